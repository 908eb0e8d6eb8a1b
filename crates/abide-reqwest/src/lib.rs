//! # abide-reqwest
//!
//! abide in-process for reqwest: a [`reqwest_middleware::Middleware`] that classifies every
//! answer, honours `Retry-After` (floored and capped), paces each host, draws retries from
//! one retry budget per host, and stops with an error that says why.
//!
//! ```no_run
//! # async fn demo() -> Result<(), reqwest_middleware::Error> {
//! let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
//!     .with(abide_reqwest::AbideMiddleware::default())
//!     .build();
//! let response = client.get("https://api.example.com/v1/things").send().await?;
//! # Ok(()) }
//! ```
//!
//! Configure with [`Policy::builder`] (the providers-file vocabulary: `max_attempts`,
//! `max_age`, `headroom`, `classify`, `use_rate_limit_headers`, plus `max_wait`, the
//! longest single wait a caller accepts). One [`Policy`] holds one shared session per host:
//! every client, clone and task built from it draws on the same pacer, pauses and retry
//! budget, so a throttle seen by one task slows all of them. The rules, waits and errors
//! are abide-client's (whose driver this crate implements [`abide_client::Attempts`] for;
//! re-exported here); see its crate docs.
//!
//! ```
//! use std::time::Duration;
//! use abide_reqwest::{AbideMiddleware, Policy, VerdictClass};
//! # async fn fresh_auth_headers() -> Result<reqwest::header::HeaderMap, abide_reqwest::BoxError> {
//! #     Ok(reqwest::header::HeaderMap::new())
//! # }
//!
//! let policy = Policy::builder()
//!     .with_max_attempts(5)                    // requests per logical request
//!     .with_max_age(Duration::from_secs(120))  // give up after
//!     .with_max_wait(Duration::from_secs(30))  // longest single wait a caller accepts
//!     .with_headroom(0.9)                      // of an advertised limit
//!     .with_classify(409, VerdictClass::Retry)
//!     .with_refresh(|| async { Ok(fresh_auth_headers().await?) }) // 401: once
//!     .build()?;
//! let middleware = AbideMiddleware::new(policy);
//! # Ok::<(), abide_reqwest::ConfigError>(())
//! ```
//!
//! # Errors
//! When abide gives up it returns [`reqwest_middleware::Error::Middleware`] holding a
//! [`Stopped`] (read it with [`stopped`]): why ([`StopReason`]: attempt cap, maximum age,
//! a wait longer than `max_wait`, credentials rejected after a refresh, a body that cannot
//! be replayed, ...) and what the server said last ([`LastAnswer`]: status, verdict,
//! raw `Retry-After`, start of the body). A transport error is its `source`. Terminal
//! answers (`400`, `404`, ...) come back as responses unless
//! [`PolicyBuilder::with_terminal_as_error`] is set.
//!
//! # Bodies
//! Bodies of answers that are not `2xx` are read (to classify them and quote them in the
//! error) and put back: the response you get still has its body and URL. A `2xx` body is
//! read and put back only when it is JSON of a known length up to [`MAX_SUCCESS_BODY`]
//! (a GraphQL or chat API may say "throttled" there with a `200`); other `2xx` bodies are
//! not touched. A request whose body cannot be cloned (a stream, see
//! [`reqwest::Request::try_clone`]) is sent once and never retried: the error says
//! [`StopReason::BodyNotReplayable`] and carries the answer.

#![cfg_attr(test, allow(clippy::unwrap_used))]

use bytes::Bytes;
use http::{Extensions, HeaderMap, StatusCode};
use reqwest::{Request, Response, ResponseBuilderExt};
use reqwest_middleware::{Middleware, Next};

/// The Rust snippets of the front page compile (`cargo test -p abide-reqwest --doc`).
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeSnippets;

/// The Rust snippets of the in-process chapter of the guide compile.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/in-process.md")]
pub struct InProcessSnippets;

#[cfg(feature = "redis")]
pub use abide_client::CoordinationConfig;
use abide_client::{drive, Attempts, Outgoing, Reply, SendFailure};
pub use abide_client::{
    BoxError, ConfigError, LastAnswer, ManualSleeper, Policy, PolicyBuilder, RequestInfo, Sleeper,
    StopReason, Stopped, TokioSleeper, VerdictClass, WaitCause, IDEMPOTENCY_KEY,
};

/// The middleware. Build it from a [`Policy`]; `Default` uses [`Policy::default`].
///
/// # Clone
/// Clones share the policy's per-host state.
#[derive(Debug, Clone, Default)]
pub struct AbideMiddleware {
    policy: Policy,
}

impl AbideMiddleware {
    /// A middleware applying `policy`.
    pub fn new(policy: Policy) -> Self {
        Self { policy }
    }

    /// The policy (for its snapshots).
    pub fn policy(&self) -> &Policy {
        &self.policy
    }
}

/// The [`Stopped`] inside an error this middleware returned, if it is one.
pub fn stopped(e: &reqwest_middleware::Error) -> Option<&Stopped> {
    match e {
        reqwest_middleware::Error::Middleware(e) => e.downcast_ref::<Stopped>(),
        reqwest_middleware::Error::Reqwest(_) => None,
    }
}

#[async_trait::async_trait]
impl Middleware for AbideMiddleware {
    async fn handle(
        &self,
        req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let url = req.url();
        let info = RequestInfo {
            method: req.method(),
            scheme: url.scheme(),
            host: url.host_str().unwrap_or("unknown"),
            port: url.port(),
            headers: req.headers(),
        };
        let out = Outgoing::new(&self.policy, &info, url.path());
        let attempts = ReqwestAttempts {
            template: Some(req),
            next,
            extensions,
        };
        drive(&self.policy, out, attempts)
            .await
            .map_err(reqwest_middleware::Error::middleware)
    }
}

struct ReqwestAttempts<'a> {
    /// The request as the caller made it; taken when its body cannot be cloned.
    template: Option<Request>,
    next: Next<'a>,
    extensions: &'a mut Extensions,
}

impl Attempts for ReqwestAttempts<'_> {
    type Response = Response;

    fn head(r: &Response) -> (StatusCode, &HeaderMap) {
        (r.status(), r.headers())
    }

    fn can_resend(&self) -> bool {
        self.template.is_some()
    }

    async fn send(&mut self, extra: &HeaderMap) -> Result<Reply<Response>, SendFailure> {
        let req = match self.template.as_ref().and_then(Request::try_clone) {
            Some(r) => Some(r),
            None => self.template.take(),
        };
        let Some(mut req) = req else {
            return Err(SendFailure {
                connect: true,
                error: "abide: the request was already sent and cannot be cloned".into(),
            });
        };
        for (name, value) in extra {
            req.headers_mut().insert(name.clone(), value.clone());
        }
        match self.next.clone().run(req, self.extensions).await {
            Ok(response) if response.status().is_success() && !small_json(&response) => Ok(Reply {
                response,
                body: Bytes::new(),
            }),
            Ok(response) => Ok(buffer(response).await),
            Err(e) => Err(SendFailure {
                connect: e.is_connect(),
                error: Box::new(e),
            }),
        }
    }
}

/// Longest `2xx` body read to classify it, by its `Content-Length`: 64 KiB.
pub const MAX_SUCCESS_BODY: u64 = 64 * 1024;

/// A `2xx` whose body may say it is a throttle (a GraphQL `THROTTLED`, Slack's
/// `"ok": false`): JSON, with a `Content-Length` of at most [`MAX_SUCCESS_BODY`]. Other
/// successes (streams, downloads, bodies of unknown length) are left untouched.
fn small_json(response: &Response) -> bool {
    let json = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.to_ascii_lowercase().contains("json"));
    json && response
        .content_length()
        .is_some_and(|n| n <= MAX_SUCCESS_BODY)
}

/// Read a body so the classifier can see it, and put it back.
async fn buffer(response: Response) -> Reply<Response> {
    let status = response.status();
    let version = response.version();
    let url = response.url().clone();
    let headers = response.headers().clone();
    // A body that fails to arrive is read as empty: the status and headers still count.
    let body = response.bytes().await.unwrap_or_default();
    let mut builder = http::Response::builder()
        .status(status)
        .version(version)
        .url(url);
    if let Some(h) = builder.headers_mut() {
        *h = headers;
    }
    let rebuilt = match builder.body(body.clone()) {
        Ok(r) => Response::from(r),
        Err(_) => Response::from(http::Response::new(body.clone())),
    };
    Reply {
        response: rebuilt,
        body,
    }
}
