//! One attempt: pace, send, classify, decide.
//!
//! The decision is a pure function ([`decide`]) so that the rules (caps, maximum age,
//! `Retry-After` over backoff, provider pauses) are unit-tested without a network.

use std::sync::{PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use abide_core::{
    Classifier, DelayReason, Observation, Pacer, RetryBudget, RetryDelay, TransportFailure,
    Verdict, VerdictClass,
};
use http::{HeaderMap, HeaderValue, StatusCode};
use rand::RngCore;

use crate::config::{ProviderConfig, Secret};
use crate::model::{Body, Item, Outcome, RemoteCode};
use crate::progress::Stats;

/// Everything shared by one provider's senders.
#[derive(Debug)]
pub(crate) struct ProviderRuntime {
    pub(crate) cfg: ProviderConfig,
    pub(crate) pacer: std::sync::Arc<Pacer>,
    pub(crate) budget: std::sync::Arc<RetryBudget>,
    pub(crate) classifier: Classifier,
    pub(crate) token: RwLock<Option<Secret>>,
    pub(crate) stats: Stats,
}

impl ProviderRuntime {
    pub(crate) fn token(&self) -> Option<Secret> {
        self.token
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Re-read the credential from the environment (after a 401).
    pub(crate) fn refresh_token(&self) {
        let fresh = self.cfg.read_credentials();
        *self.token.write().unwrap_or_else(PoisonError::into_inner) = fresh;
    }
}

/// What came back from one send.
#[derive(Debug)]
pub(crate) enum Response {
    Http {
        status: StatusCode,
        headers: HeaderMap,
    },
    Transport(TransportFailure),
}

impl Response {
    pub(crate) fn remote(&self) -> RemoteCode {
        match self {
            Response::Http { status, .. } => RemoteCode::Http(status.as_u16()),
            Response::Transport(_) => RemoteCode::NoResponse,
        }
    }

    pub(crate) fn classify(
        &self,
        classifier: &Classifier,
        now: SystemTime,
        rng: &mut dyn RngCore,
    ) -> Verdict {
        let obs = match self {
            Response::Http { status, headers } => Observation::Http {
                status: *status,
                headers,
            },
            Response::Transport(t) => Observation::Transport(*t),
        };
        classifier.classify(&obs, now, rng)
    }
}

/// What an item's next attempt means for its provider's retry budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BudgetRole {
    /// New work for this provider (never tried, or just failed over to it): deposits.
    First,
    /// Repeats an attempt the remote refused or failed: withdraws, or waits if refused.
    Retry,
    /// Repeats an attempt whose answer was never seen: its lease was reclaimed after a
    /// crash or hang. No remote failure is being retried, so it spends nothing; it is not
    /// new work either (a crash loop must not inflate the allowance), so it earns nothing.
    /// It is still paced like every other send.
    Resume,
}

/// The budget role of `item`'s next attempt (see [`BudgetRole`]).
pub(crate) fn budget_role(item: &Item) -> BudgetRole {
    if item.attempts == 0 || item.just_failed_over() {
        BudgetRole::First
    } else if item.lease_reclaimed() {
        BudgetRole::Resume
    } else {
        BudgetRole::Retry
    }
}

/// Build and send one request. The body of the response is read up to `max_body` bytes
/// and discarded (reading lets the connection be reused; the bound keeps a hostile
/// provider from making us buffer without limit).
pub(crate) async fn send(
    client: &reqwest::Client,
    rt: &ProviderRuntime,
    item: &Item,
    max_body: usize,
) -> Response {
    let url = match target_url(&rt.cfg.base_url, &item.request.path) {
        Some(u) => u,
        // Validated at enqueue; a row edited by hand could still get here. Never sent.
        None => return Response::Transport(TransportFailure::Connect),
    };
    let method =
        http::Method::from_bytes(item.request.method.as_bytes()).unwrap_or(http::Method::POST);
    let mut req = client.request(method, url).timeout(rt.cfg.timeout);
    for (k, v) in &item.request.headers {
        req = req.header(k.as_str(), v.as_str());
    }
    if let Ok(v) = HeaderValue::from_str(&item.idempotency_key) {
        req = req.header(rt.cfg.idempotency_key_header.clone(), v);
    }
    if let Some(token) = rt.token() {
        req = match &rt.cfg.auth_header {
            Some(name) => match HeaderValue::from_str(token.expose()) {
                Ok(mut v) => {
                    v.set_sensitive(true);
                    req.header(name.clone(), v)
                }
                Err(_) => req,
            },
            None => req.bearer_auth(token.expose()),
        };
    }
    req = match &item.request.body {
        Some(Body::Json(v)) => req.json(v),
        Some(Body::Text(t)) => req
            .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
            .body(t.clone()),
        None => req,
    };
    match req.send().await {
        Ok(mut resp) => {
            let status = resp.status();
            let headers = std::mem::take(resp.headers_mut());
            let mut read = 0usize;
            while read < max_body {
                match resp.chunk().await {
                    Ok(Some(chunk)) => read += chunk.len(),
                    _ => break,
                }
            }
            Response::Http { status, headers }
        }
        Err(e) if e.is_connect() => Response::Transport(TransportFailure::Connect),
        // Sent (or possibly sent): every request carries an idempotency key, so a replay
        // is safe as long as the provider honours it.
        Err(_) => Response::Transport(TransportFailure::AfterSend { replay_safe: true }),
    }
}

/// `base` + `path`, refusing anything that would leave `base`'s origin.
pub(crate) fn target_url(base: &reqwest::Url, path: &str) -> Option<reqwest::Url> {
    if !path.starts_with('/') || path.starts_with("//") || path.contains("://") {
        return None;
    }
    let joined = format!("{}{}", base.as_str().trim_end_matches('/'), path);
    let url = reqwest::Url::parse(&joined).ok()?;
    (url.scheme() == base.scheme()
        && url.host_str() == base.host_str()
        && url.port_or_known_default() == base.port_or_known_default())
    .then_some(url)
}

/// The stable name of a delay reason, as stored in the attempts table.
pub(crate) fn delay_reason_str(r: DelayReason) -> &'static str {
    match r {
        DelayReason::Honoured => "honoured",
        DelayReason::Floored => "floored",
        DelayReason::Capped => "capped",
        DelayReason::Unparseable => "unparseable",
        DelayReason::Absent => "absent",
    }
}

/// Inputs of [`decide`] besides the verdict.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DecideInput<'a> {
    pub(crate) cfg: &'a ProviderConfig,
    pub(crate) item: &'a Item,
    /// Attempts made under this lease (added to the item's window attempts).
    pub(crate) made: u32,
    pub(crate) now: SystemTime,
    /// How long the provider stays paused, if it is.
    pub(crate) pause_left: Option<Duration>,
}

/// What to do with the item after a verdict. Returns the outcome and, for a retry, the
/// delay chosen (and why).
pub(crate) fn decide(
    input: DecideInput<'_>,
    verdict: &Verdict,
    classifier: &Classifier,
    rng: &mut dyn RngCore,
) -> (Outcome, Option<RetryDelay>) {
    let DecideInput {
        cfg,
        item,
        made,
        now,
        pause_left,
    } = input;
    match verdict.class {
        VerdictClass::Success => return (Outcome::Submitted, None),
        VerdictClass::Terminal => {
            return (
                Outcome::Failed {
                    reason: verdict.reason.clone(),
                },
                None,
            )
        }
        VerdictClass::RefreshCredentials => {
            // Reached only after the one refresh already failed: a person must fix it.
            return (
                Outcome::Deferred {
                    reason: format!("credentials rejected after refresh ({})", verdict.reason),
                },
                None,
            );
        }
        VerdictClass::Throttle | VerdictClass::Retry | VerdictClass::Unknown => {}
    }
    let window_attempts = item.window_attempts.saturating_add(made);
    let cap = if verdict.class == VerdictClass::Unknown {
        cfg.retry.unknown_max_attempts.min(cfg.retry.max_attempts)
    } else {
        cfg.retry.max_attempts
    };
    if window_attempts >= cap {
        return (
            Outcome::Deferred {
                reason: format!("attempt cap {cap} reached (last: {})", verdict.reason),
            },
            None,
        );
    }
    let age = now.duration_since(item.window_start).unwrap_or_default();
    if age >= cfg.retry.max_age {
        return (
            Outcome::Deferred {
                reason: format!(
                    "maximum age {}s reached (last: {})",
                    cfg.retry.max_age.as_secs(),
                    verdict.reason
                ),
            },
            None,
        );
    }
    // The server's Retry-After (already floored and capped by core) outranks our backoff.
    let mut delay = match &verdict.retry_after {
        Some(d) => d.clone(),
        None => classifier.retry_after.from_backoff(cfg.retry.backoff.delay(
            window_attempts.max(1),
            None,
            rng,
        )),
    };
    // Never schedule an item before the provider's pause ends.
    if let Some(p) = pause_left {
        delay.delay = delay.delay.max(p);
    }
    (
        Outcome::Retry {
            next_attempt_at: now + delay.delay,
            reason: verdict.reason.clone(),
        },
        Some(delay),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::model::Request;
    use crate::state::State;
    use rand::SeedableRng;
    use std::time::UNIX_EPOCH;

    fn cfg() -> ProviderConfig {
        Config::from_toml_str(
            r#"[[provider]]
            name = "p"
            base_url = "http://127.0.0.1:1/api/"
            [provider.retry]
            max_attempts = 4
            unknown_max_attempts = 2
            max_age_secs = 3600
            backoff_base_ms = 1000
            backoff_cap_secs = 60"#,
        )
        .unwrap()
        .providers
        .remove(0)
    }

    fn item(window_attempts: u32) -> Item {
        Item {
            id: "i".into(),
            provider: "p".into(),
            current_provider: "p".into(),
            request: Request::post_json("/m", serde_json::json!({})),
            idempotency_key: "k".into(),
            created_at: UNIX_EPOCH,
            state: State::InFlight,
            attempts: window_attempts,
            window_attempts,
            window_start: UNIX_EPOCH,
            next_attempt_at: UNIX_EPOCH,
            last_provider_code: None,
            reason: None,
            lease_owner: Some("o".into()),
            lease_expires_at: None,
        }
    }

    fn verdict(class: VerdictClass, retry_after: Option<Duration>) -> Verdict {
        Verdict {
            class,
            reason: format!("test_{}", class.as_str()),
            retry_after: retry_after.map(|d| RetryDelay {
                delay: d,
                reason: DelayReason::Honoured,
                raw: Some(d.as_secs().to_string()),
                retry_after: Some(d),
            }),
            rate_limit: None,
        }
    }

    fn run(
        it: &Item,
        made: u32,
        now_secs: u64,
        pause: Option<Duration>,
        v: &Verdict,
    ) -> (Outcome, Option<RetryDelay>) {
        let c = cfg();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let input = DecideInput {
            cfg: &c,
            item: it,
            made,
            now: UNIX_EPOCH + Duration::from_secs(now_secs),
            pause_left: pause,
        };
        decide(input, v, &Classifier::default(), &mut rng)
    }

    #[test]
    fn retry_after_outranks_backoff_and_pause_outranks_both() {
        let v = verdict(VerdictClass::Throttle, Some(Duration::from_secs(7)));
        let (o, d) = run(&item(0), 1, 10, None, &v);
        assert_eq!(
            o,
            Outcome::Retry {
                next_attempt_at: UNIX_EPOCH + Duration::from_secs(17),
                reason: "test_throttle".into()
            }
        );
        assert_eq!(d.map(|d| d.reason), Some(DelayReason::Honoured));
        let (o, _) = run(&item(0), 1, 10, Some(Duration::from_secs(30)), &v);
        assert!(
            matches!(o, Outcome::Retry { next_attempt_at, .. } if next_attempt_at == UNIX_EPOCH + Duration::from_secs(40))
        );
    }

    #[test]
    fn backoff_is_clamped_and_labelled_absent() {
        let (o, d) = run(&item(2), 1, 10, None, &verdict(VerdictClass::Retry, None));
        let d = d.unwrap();
        assert_eq!(d.reason, DelayReason::Absent);
        // Core's Retry-After floor (1 s) applies to our own backoff too.
        assert!(d.delay >= Duration::from_secs(1) && d.delay <= Duration::from_secs(60));
        assert!(matches!(o, Outcome::Retry { .. }));
    }

    #[test]
    fn caps_and_age_defer() {
        let retry = verdict(VerdictClass::Retry, None);
        assert!(matches!(
            run(&item(2), 1, 10, None, &retry).0,
            Outcome::Retry { .. }
        ));
        assert!(matches!(
            run(&item(3), 1, 10, None, &retry).0,
            Outcome::Deferred { .. }
        ));
        let unknown = verdict(VerdictClass::Unknown, None);
        assert!(matches!(
            run(&item(1), 1, 10, None, &unknown).0,
            Outcome::Deferred { .. }
        ));
        assert!(matches!(
            run(&item(0), 1, 3600, None, &retry).0,
            Outcome::Deferred { .. }
        ));
    }

    #[test]
    fn terminal_success_and_rejected_credentials() {
        let it = item(0);
        assert_eq!(
            run(&it, 1, 1, None, &verdict(VerdictClass::Success, None)).0,
            Outcome::Submitted
        );
        assert!(matches!(
            run(&it, 1, 1, None, &verdict(VerdictClass::Terminal, None)).0,
            Outcome::Failed { .. }
        ));
        assert!(matches!(
            run(
                &it,
                2,
                1,
                None,
                &verdict(VerdictClass::RefreshCredentials, None)
            )
            .0,
            Outcome::Deferred { .. }
        ));
    }

    #[test]
    fn only_retries_of_remote_failures_spend_budget() {
        let mut it = item(0);
        assert_eq!(budget_role(&it), BudgetRole::First);
        it.attempts = 3;
        it.reason = Some("http_503".into());
        assert_eq!(budget_role(&it), BudgetRole::Retry);
        it.reason = Some("retry_budget_exhausted".into());
        assert_eq!(budget_role(&it), BudgetRole::Retry);
        it.reason = Some(crate::model::LEASE_EXPIRED_REASON.into());
        assert_eq!(budget_role(&it), BudgetRole::Resume);
        it.reason = Some(format!("{}q", crate::model::FAILED_OVER_PREFIX));
        assert_eq!(budget_role(&it), BudgetRole::First);
    }

    #[test]
    fn urls_stay_on_the_provider() {
        let base = reqwest::Url::parse("http://127.0.0.1:9/api/").unwrap();
        assert_eq!(
            target_url(&base, "/v1/m?x=1").map(|u| u.to_string()),
            Some("http://127.0.0.1:9/api/v1/m?x=1".into())
        );
        for p in ["//evil/x", "http://evil/x", "v1", "/@evil.example"] {
            let u = target_url(&base, p);
            assert!(
                u.as_ref().is_none_or(|u| u.host_str() == Some("127.0.0.1")),
                "{p}: {u:?}"
            );
        }
    }
}
