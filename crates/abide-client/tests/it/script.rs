//! A client that answers from a script: (status, `Retry-After`) per request, and a body
//! when given ([`Script::with_bodies`]), counting what it was sent.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use abide_client::SendFailure;
use abide_client::{Attempts, ManualSleeper, Outgoing, Policy, PolicyBuilder, Reply, RequestInfo};
use abide_core::ManualClock;
use http::{HeaderMap, HeaderValue, Method, StatusCode};

pub(crate) fn clock() -> ManualClock {
    ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_750_000_000))
}

/// A policy on `clock`, seeded.
pub(crate) fn policy(clock: &ManualClock) -> PolicyBuilder {
    Policy::builder()
        .with_clock(
            Arc::new(clock.clone()),
            Arc::new(ManualSleeper::new(clock.clone())),
        )
        .with_seed(7)
}

/// A `GET https://api.example/v1/things` for `policy`.
pub(crate) fn get(policy: &Policy) -> Outgoing {
    let headers = HeaderMap::new();
    let info = RequestInfo {
        method: &Method::GET,
        scheme: "https",
        host: "api.example",
        port: None,
        headers: &headers,
    };
    Outgoing::new(policy, &info, "/v1/things")
}

/// One scripted answer: the status and the `Retry-After` value, if any.
pub(crate) type Answer = (u16, Option<&'static str>);

/// The answers still to give and the requests sent (shared by clones).
#[derive(Clone)]
pub(crate) struct Script {
    answers: Arc<Mutex<VecDeque<Answer>>>,
    bodies: Arc<Mutex<VecDeque<&'static str>>>,
    sent: Arc<Mutex<u32>>,
}

impl Script {
    pub(crate) fn new<const N: usize>(answers: [Answer; N]) -> Self {
        Self {
            answers: Arc::new(Mutex::new(answers.into_iter().collect())),
            bodies: Arc::default(),
            sent: Arc::new(Mutex::new(0)),
        }
    }

    /// The bodies of the first answers, in order (the later ones are empty).
    pub(crate) fn with_bodies<const N: usize>(self, bodies: [&'static str; N]) -> Self {
        *self.bodies.lock().unwrap() = bodies.into_iter().collect();
        self
    }

    /// Requests sent so far.
    pub(crate) fn sent(&self) -> u32 {
        *self.sent.lock().unwrap()
    }
}

impl Attempts for Script {
    type Response = (StatusCode, HeaderMap);

    fn head(r: &Self::Response) -> (StatusCode, &HeaderMap) {
        (r.0, &r.1)
    }

    fn can_resend(&self) -> bool {
        true
    }

    async fn send(&mut self, _extra: &HeaderMap) -> Result<Reply<Self::Response>, SendFailure> {
        *self.sent.lock().unwrap() += 1;
        let (status, retry_after) = self
            .answers
            .lock()
            .unwrap()
            .pop_front()
            .expect("the script has an answer for every request");
        let mut headers = HeaderMap::new();
        if let Some(ra) = retry_after {
            headers.insert(http::header::RETRY_AFTER, HeaderValue::from_static(ra));
        }
        let body = self.bodies.lock().unwrap().pop_front().unwrap_or_default();
        Ok(Reply {
            response: (StatusCode::from_u16(status).unwrap(), headers),
            body: bytes::Bytes::from_static(body.as_bytes()),
        })
    }
}
