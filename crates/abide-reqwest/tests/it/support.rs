//! Set-up shared by the loopback tests: a provider and a policy on one `ManualClock`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use abide_core::{Clock, ManualClock};
use abide_fake::{spawn, ProviderConfig, RunningProvider, DEMO_KEY};
use abide_reqwest::{AbideMiddleware, ManualSleeper, Policy, PolicyBuilder, Stopped};
use axum::http::{HeaderMap, StatusCode};
use reqwest_middleware::ClientWithMiddleware;

pub(crate) fn clock() -> ManualClock {
    ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_750_000_000))
}

pub(crate) async fn provider(toml: &str, clock: &ManualClock) -> RunningProvider {
    let cfg = ProviderConfig::from_toml_str(toml).unwrap();
    let c: Arc<dyn Clock> = Arc::new(clock.clone());
    spawn(cfg, c, "127.0.0.1:0".parse().unwrap()).await.unwrap()
}

/// The builder every test starts from: virtual time, a fixed seed.
pub(crate) fn policy(clock: &ManualClock) -> PolicyBuilder {
    Policy::builder()
        .with_clock(
            Arc::new(clock.clone()),
            Arc::new(ManualSleeper::new(clock.clone())),
        )
        .with_seed(7)
}

pub(crate) fn client(policy: Policy) -> ClientWithMiddleware {
    reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(AbideMiddleware::new(policy))
        .build()
}

/// One logical `POST /v1/messages`: its outcome and the virtual time it took.
pub(crate) async fn post(
    c: &ClientWithMiddleware,
    url: &str,
    clock: &ManualClock,
) -> (
    Result<reqwest::Response, reqwest_middleware::Error>,
    Duration,
) {
    let t0 = clock.monotonic();
    let r = c
        .post(format!("{url}/v1/messages"))
        .bearer_auth(DEMO_KEY)
        .json(&serde_json::json!({"to": "+15550100", "text": "hi"}))
        .send()
        .await;
    (r, clock.monotonic() - t0)
}

pub(crate) fn stopped(r: Result<reqwest::Response, reqwest_middleware::Error>) -> String {
    let e = r.expect_err("abide should have stopped");
    let s: &Stopped = abide_reqwest::stopped(&e).expect("a Stopped error");
    format!("{}|{}", s.reason.code(), s)
}

/// A scripted answer: status and headers.
pub(crate) type Answer = (StatusCode, Vec<(&'static str, String)>);

/// A scripted server: answers in order (the last one repeats), records request headers.
#[derive(Clone, Default)]
pub(crate) struct Script {
    pub(crate) answers: Arc<Mutex<Vec<Answer>>>,
    pub(crate) seen: Arc<Mutex<Vec<HeaderMap>>>,
}

impl Script {
    pub(crate) async fn serve(self) -> String {
        let app = axum::Router::new().fallback(move |headers: HeaderMap| {
            let s = self.clone();
            async move {
                s.seen.lock().unwrap().push(headers);
                let mut answers = s.answers.lock().unwrap();
                let (status, hs) = if answers.len() > 1 {
                    answers.remove(0)
                } else {
                    answers[0].clone()
                };
                let mut res = axum::response::Response::new(axum::body::Body::from("{}"));
                *res.status_mut() = status;
                for (k, v) in hs {
                    res.headers_mut().insert(k, v.parse().unwrap());
                }
                res
            }
        });
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(l, app).await });
        url
    }

    pub(crate) fn seen(&self) -> Vec<HeaderMap> {
        self.seen.lock().unwrap().clone()
    }
}
