//! abide-tower over hyper-util's client against `abide provider`, in virtual time.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use abide_core::{Clock, ManualClock};
use abide_fake::{spawn, ProviderConfig, RunningProvider, DEMO_KEY};
use abide_tower::{AbideLayer, ManualSleeper, Policy, PolicyBuilder, StopReason, Stopped};
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower::{Service, ServiceBuilder, ServiceExt};

fn clock() -> ManualClock {
    ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_750_000_000))
}

async fn provider(toml: &str, clock: &ManualClock) -> RunningProvider {
    let cfg = ProviderConfig::from_toml_str(toml).unwrap();
    let c: Arc<dyn Clock> = Arc::new(clock.clone());
    spawn(cfg, c, "127.0.0.1:0".parse().unwrap()).await.unwrap()
}

fn policy(clock: &ManualClock) -> PolicyBuilder {
    Policy::builder()
        .with_clock(
            Arc::new(clock.clone()),
            Arc::new(ManualSleeper::new(clock.clone())),
        )
        .with_seed(3)
        .with_rate_limit_headers(false)
}

fn message<B: From<Bytes>>(p: &RunningProvider) -> Request<B> {
    Request::post(format!("{}/v1/messages", p.url()))
        .header("authorization", format!("Bearer {DEMO_KEY}"))
        .header("content-type", "application/json")
        .body(B::from(Bytes::from_static(br#"{"to":"+1","text":"hi"}"#)))
        .unwrap()
}

async fn call<S, B>(
    svc: &mut S,
    req: Request<B>,
) -> Result<http::Response<hyper::body::Incoming>, Stopped>
where
    S: Service<Request<B>, Response = http::Response<hyper::body::Incoming>, Error = Stopped>,
{
    svc.ready().await?.call(req).await
}

#[tokio::test]
async fn a_throttle_seen_through_one_clone_pauses_every_clone_and_task() {
    let clock = clock();
    let p = provider("[limits]\nkey_rate = \"1/10s\"\n", &clock).await;
    let policy = policy(&clock)
        .with_max_wait(Duration::from_secs(5))
        .build()
        .unwrap();
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut a = ServiceBuilder::new()
        .layer(AbideLayer::new(policy.clone()))
        .service(client.clone());
    assert_eq!(
        call(&mut a, message(&p)).await.unwrap().status(),
        StatusCode::ACCEPTED
    );
    // 429 with Retry-After: 10, longer than max_wait: stopped at once.
    let e = call(&mut a, message(&p)).await.unwrap_err();
    assert!(matches!(e.reason, StopReason::WaitTooLong { .. }), "{e}");
    assert_eq!(
        e.last.as_ref().unwrap().status,
        Some(StatusCode::TOO_MANY_REQUESTS)
    );
    // Another service from another layer, in another task: same policy, same host pause.
    let mut b = ServiceBuilder::new()
        .layer(AbideLayer::new(policy))
        .service(client);
    let req = message(&p);
    let e = tokio::spawn(async move { call(&mut b, req).await.unwrap_err() })
        .await
        .unwrap();
    assert!(e.to_string().contains("host paused"), "{e}");
    assert_eq!(e.attempts, 0);
    assert_eq!(p.stats().requests, 2);
}

#[tokio::test]
async fn a_503_is_retried_with_a_copied_body() {
    let clock = clock();
    let p = provider("[behaviour]\nfail_503 = 0.5\n", &clock).await;
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut svc = AbideLayer::new(policy(&clock).build().unwrap()).layer_on(client);
    let t0 = clock.monotonic();
    assert_eq!(
        call(&mut svc, message(&p)).await.unwrap().status(),
        StatusCode::ACCEPTED
    );
    let r = call(&mut svc, message(&p)).await.unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let waited = clock.monotonic() - t0;
    assert!(
        waited >= Duration::from_secs(1) && waited <= Duration::from_secs(10),
        "{waited:?}"
    );
    let s = p.stats();
    assert_eq!((s.requests, s.accepted, s.duplicates), (3, 2, 0));
}

#[tokio::test]
async fn a_body_that_cannot_be_copied_is_sent_once() {
    let clock = clock();
    let p = provider("[behaviour]\nfail_503 = 1.0\n", &clock).await;
    type Boxed = BoxBody<Bytes, std::convert::Infallible>;
    let client = Client::builder(TokioExecutor::new()).build_http::<Boxed>();
    let mut svc = AbideLayer::new(policy(&clock).build().unwrap()).layer_on(client);
    let req: Request<Full<Bytes>> = message(&p);
    let req = req.map(|b| b.boxed());
    let e = call(&mut svc, req).await.unwrap_err();
    assert_eq!(e.reason, StopReason::BodyNotReplayable, "{e}");
    assert_eq!(
        e.last.as_ref().unwrap().status,
        Some(StatusCode::SERVICE_UNAVAILABLE)
    );
    assert_eq!(p.stats().requests, 1);
}

trait LayerOn {
    fn layer_on<S>(self, s: S) -> abide_tower::AbideService<S>;
}

impl LayerOn for AbideLayer {
    fn layer_on<S>(self, s: S) -> abide_tower::AbideService<S> {
        tower::Layer::layer(&self, s)
    }
}
