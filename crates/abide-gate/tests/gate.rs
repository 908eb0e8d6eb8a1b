//! abide-gate through its public API: the plain library and the tower layer in axum.

#![allow(clippy::unwrap_used)]

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use abide_core::{Clock, ManualClock};
use abide_gate::{BearerKeys, Gate, GateLayer, GateSet, RateQuota, Scope};
use axum::body::Body;
use axum::http::{Request, Response, StatusCode};
use axum::routing::get;
use axum::Router;
use tokio::sync::{mpsc, Semaphore};
use tower::ServiceExt;

fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap()
}

fn clock() -> ManualClock {
    ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_750_000_000))
}

fn per(n: u32, window: Duration) -> RateQuota {
    RateQuota::new(nz(n), window).unwrap()
}

fn key_gate(q: RateQuota) -> Gate {
    Gate::rate("key", "key_rate", Scope::Key, q)
}

fn account_gate(q: RateQuota) -> Gate {
    Gate::rate("account", "account_rate", Scope::Account, q)
}

fn conc_gate(n: u32) -> Gate {
    Gate::concurrency(
        "conc",
        "concurrency",
        Scope::Key,
        nz(n),
        Duration::from_secs(30),
    )
}

fn set(gates: Vec<Gate>) -> Arc<GateSet> {
    Arc::new(
        gates
            .into_iter()
            .fold(GateSet::builder(), |b, g| b.with_gate(g))
            .build()
            .unwrap(),
    )
}

#[test]
fn retry_after_boundaries_round_up_and_never_say_zero() {
    let c = clock();
    let gates = set(vec![key_gate(per(1, Duration::from_secs(1)))]);
    let _ = gates.check("k", None, c.monotonic()).unwrap();

    // 1.0 s left.
    let no = gates.check("k", None, c.monotonic()).unwrap_err();
    assert_eq!(no.wait(), Duration::from_secs(1));
    assert_eq!(no.retry_after_secs(), 1);

    // 0.2 s left.
    c.advance(Duration::from_millis(800));
    let no = gates.check("k", None, c.monotonic()).unwrap_err();
    assert_eq!(no.wait(), Duration::from_millis(200));
    assert_eq!(no.headers()["retry-after"], "1");
    assert_eq!(no.headers()["ratelimit"], "\"key\";r=0;t=1");

    // 1 ns left is still 1, never 0.
    c.advance(Duration::from_millis(200) - Duration::from_nanos(1));
    assert_eq!(
        gates
            .check("k", None, c.monotonic())
            .unwrap_err()
            .retry_after_secs(),
        1
    );
    c.advance(Duration::from_nanos(1));
    let _ = gates.check("k", None, c.monotonic()).unwrap();

    // 1.01 s left rounds up to 2.
    let g2 = set(vec![key_gate(per(1, Duration::from_millis(1010)))]);
    let _ = g2.check("k", None, c.monotonic()).unwrap();
    assert_eq!(
        g2.check("k", None, c.monotonic())
            .unwrap_err()
            .retry_after_secs(),
        2
    );
}

#[test]
fn the_reported_reset_is_the_rejecting_gates_own() {
    let c = clock();
    let gates = set(vec![
        key_gate(per(10, Duration::from_secs(1))),
        account_gate(per(1, Duration::from_secs(60))),
    ]);
    let now = c.monotonic();
    let _ = gates.check("k1", Some("acme"), now).unwrap();
    // Another key of the same account: the key gate admits, the account gate refuses.
    let no = gates.check("k2", Some("acme"), now).unwrap_err();
    assert_eq!(no.rejected().len(), 1);
    assert_eq!(no.category(), "account_rate");
    let h = no.headers();
    assert_eq!(h["retry-after"], "60");
    assert_eq!(h["ratelimit-policy"], "\"account\";q=1;w=60");
    assert_eq!(h["ratelimit"], "\"account\";r=0;t=60");
    assert_eq!(
        no.body(),
        r#"{"error":"rate_limited","reason":"account_rate"}"#
    );
    // A refused request charged nothing: k2's own window is untouched.
    let k2 = gates.quota("k2", Some("acme"), now);
    assert_eq!((k2[0].name.as_str(), k2[0].remaining), ("key", 10));

    // The key gate refusing alone reports the key gate's reset.
    let gates = set(vec![
        key_gate(per(1, Duration::from_secs(2))),
        account_gate(per(100, Duration::from_secs(60))),
    ]);
    let _ = gates.check("k", Some("acme"), now).unwrap();
    let no = gates.check("k", Some("acme"), now).unwrap_err();
    assert_eq!((no.category(), no.retry_after_secs()), ("key_rate", 2));
}

#[test]
fn when_several_gates_refuse_retry_after_waits_for_all() {
    let c = clock();
    let gates = set(vec![
        key_gate(per(1, Duration::from_secs(5))),
        account_gate(per(1, Duration::from_secs(30))),
    ]);
    let now = c.monotonic();
    let _ = gates.check("k", Some("a"), now).unwrap();
    let no = gates.check("k", Some("a"), now).unwrap_err();
    assert_eq!(no.rejected().len(), 2);
    assert_eq!(no.retry_after_secs(), 30);
    assert_eq!(no.category(), "account_rate");
    assert_eq!(
        no.headers()["ratelimit"],
        "\"key\";r=0;t=5, \"account\";r=0;t=30"
    );
}

#[test]
fn one_trace_holds_one_slot_and_stale_releases_free_nothing() {
    let c = clock();
    let gates = set(vec![conc_gate(1)]);
    let now = c.monotonic();
    let a1 = gates.check_traced("k", None, Some("A"), now).unwrap();
    let a2 = gates.check_traced("k", None, Some("A"), now).unwrap();
    assert!(gates.check_traced("k", None, Some("B"), now).is_err());
    // Releasing A's first acquisition twice: the second call does nothing, A still holds.
    assert!(gates.release(&a1.leases()[0]));
    assert!(!gates.release(&a1.leases()[0]));
    assert!(gates.check_traced("k", None, Some("B"), now).is_err());
    assert!(gates.release(&a2.leases()[0]));
    let b = gates.check_traced("k", None, Some("B"), now).unwrap();

    // A's leases are stale now: releasing them cannot free B's slot.
    assert!(!gates.release(&a1.leases()[0]));
    assert!(!gates.release(&a2.leases()[0]));
    assert!(gates.check_traced("k", None, Some("C"), now).is_err());
    drop(b);
}

#[test]
fn an_expired_lease_frees_its_slot_and_its_late_release_is_harmless() {
    let c = clock();
    let gates = set(vec![conc_gate(1)]);
    let a = gates
        .check_traced("k", None, Some("A"), c.monotonic())
        .unwrap();
    c.advance(Duration::from_secs(29));
    let no = gates
        .check_traced("k", None, Some("B"), c.monotonic())
        .unwrap_err();
    assert_eq!(
        no.wait(),
        Duration::from_secs(1),
        "the lease expiry bounds the wait"
    );
    c.advance(Duration::from_secs(1));
    let _b = gates
        .check_traced("k", None, Some("B"), c.monotonic())
        .unwrap();
    assert!(!gates.release(&a.leases()[0]));
    assert!(gates
        .check_traced("k", None, Some("C"), c.monotonic())
        .is_err());
}

#[test]
fn invalid_gate_sets_are_refused() {
    let q = per(1, Duration::from_secs(1));
    assert!(GateSet::builder()
        .with_gate(key_gate(q))
        .with_gate(key_gate(q))
        .build()
        .is_err());
    assert!(GateSet::builder()
        .with_gate(Gate::rate("Key Gate", "key_rate", Scope::Key, q))
        .build()
        .is_err());
    assert!(RateQuota::new(nz(1), Duration::ZERO).is_err());
}

#[test]
fn huge_windows_and_leases_are_refused_instead_of_overflowing_an_instant() {
    // Both used to panic on the first request ("overflow when adding duration to instant").
    assert!(RateQuota::new(nz(1), Duration::from_secs(u64::MAX / 2)).is_err());
    let year = RateQuota::new(nz(1), abide_gate::MAX_WINDOW).unwrap();
    let gates = set(vec![key_gate(year)]);
    let c = clock();
    let _ = gates.check("k", None, c.monotonic()).unwrap();
    assert_eq!(
        gates.check("k", None, c.monotonic()).unwrap_err().wait(),
        abide_gate::MAX_WINDOW
    );
    for lease in [Duration::ZERO, Duration::from_secs(u64::MAX / 2)] {
        let g = Gate::concurrency("conc", "concurrency", Scope::Key, nz(1), lease);
        assert!(
            GateSet::builder().with_gate(g).build().is_err(),
            "{lease:?}"
        );
    }
}

// ---- the tower layer in axum ----

struct App {
    router: Router,
    entered: mpsc::UnboundedReceiver<()>,
    hold: Arc<Semaphore>,
    layer: GateLayer,
}

fn app(gates: Arc<GateSet>, clock: &ManualClock) -> App {
    let (tx, entered) = mpsc::unbounded_channel();
    let hold = Arc::new(Semaphore::new(0));
    let h = Arc::clone(&hold);
    let keys = BearerKeys::new()
        .with_key("k1", Some("acme"))
        .with_key("k2", Some("acme"));
    let clock: Arc<dyn Clock> = Arc::new(clock.clone());
    let layer = GateLayer::new(gates, clock, keys).with_quota_path("/v1/quota");
    let router = Router::new()
        .route("/ok", get(|| async { "ok" }))
        .route("/app429", get(|| async { StatusCode::TOO_MANY_REQUESTS }))
        .route("/bad", get(|| async { StatusCode::NOT_FOUND }))
        .route("/boom", get(|| async { StatusCode::INTERNAL_SERVER_ERROR }))
        .route(
            "/hold",
            get(move || {
                let (tx, h) = (tx.clone(), Arc::clone(&h));
                async move {
                    tx.send(()).unwrap();
                    h.acquire().await.unwrap().forget();
                    "held"
                }
            }),
        )
        .layer(layer.clone());
    App {
        router,
        entered,
        hold,
        layer,
    }
}

fn req(path: &str, key: Option<&str>, trace: Option<&str>) -> Request<Body> {
    let mut b = Request::get(path);
    if let Some(k) = key {
        b = b.header("authorization", format!("Bearer {k}"));
    }
    if let Some(t) = trace {
        b = b.header("idempotency-key", t);
    }
    b.body(Body::empty()).unwrap()
}

/// One request through a clone of `router`, as a client would send it.
async fn send(
    router: &Router,
    path: &str,
    key: Option<&str>,
    trace: Option<&str>,
) -> Response<Body> {
    router.clone().oneshot(req(path, key, trace)).await.unwrap()
}

async fn body_json(res: Response<Body>) -> serde_json::Value {
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 20)
        .await
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

async fn conc_remaining(router: &Router, key: &str) -> u64 {
    let res = send(router, "/v1/quota", Some(key), None).await;
    let v = body_json(res).await;
    let g = v["gates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "conc")
        .unwrap()
        .clone();
    g["remaining"].as_u64().unwrap()
}

#[tokio::test]
async fn many_clones_share_one_limit() {
    let c = clock();
    let a = app(set(vec![key_gate(per(5, Duration::from_secs(60)))]), &c);
    let mut tasks = Vec::new();
    for _ in 0..40 {
        let r = a.router.clone();
        tasks.push(tokio::spawn(async move {
            send(&r, "/ok", Some("k1"), None).await.status()
        }));
    }
    let mut ok = 0;
    for t in tasks {
        match t.await.unwrap() {
            StatusCode::OK => ok += 1,
            s => assert_eq!(s, StatusCode::TOO_MANY_REQUESTS),
        }
    }
    assert_eq!(ok, 5);
    let m = a.layer.metrics().snapshot();
    assert_eq!((m.admitted, m.rejected_by_category["key_rate"]), (5, 35));
}

#[tokio::test]
async fn parallel_duplicates_with_one_trace_hold_one_slot() {
    let c = clock();
    let mut a = app(set(vec![conc_gate(2)]), &c);
    let mut held = Vec::new();
    for _ in 0..5 {
        let r = a.router.clone();
        held.push(tokio::spawn(async move {
            send(&r, "/hold", Some("k1"), Some("same")).await
        }));
    }
    for _ in 0..5 {
        a.entered.recv().await.unwrap();
    }
    assert_eq!(conc_remaining(&a.router, "k1").await, 1);
    // One slot is still free for another trace, and then none.
    let other = {
        let r = a.router.clone();
        tokio::spawn(async move { send(&r, "/hold", Some("k1"), Some("other")).await })
    };
    a.entered.recv().await.unwrap();
    let no = send(&a.router, "/ok", Some("k1"), Some("third")).await;
    assert_eq!(no.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(no.headers()["retry-after"], "1");
    assert_eq!(
        body_json(no).await,
        serde_json::json!({"error": "rate_limited", "reason": "concurrency"})
    );

    a.hold.add_permits(6);
    for t in held.into_iter().chain([other]) {
        let res = t.await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let _ = axum::body::to_bytes(res.into_body(), 1024).await.unwrap();
    }
    assert_eq!(conc_remaining(&a.router, "k1").await, 2);
}

#[tokio::test]
async fn a_dropped_request_frees_its_slot() {
    let c = clock();
    let mut a = app(set(vec![conc_gate(1)]), &c);
    let r = a.router.clone();
    let t = tokio::spawn(async move { r.oneshot(req("/hold", Some("k1"), Some("d"))).await });
    a.entered.recv().await.unwrap();
    assert_eq!(conc_remaining(&a.router, "k1").await, 0);
    // The client goes away: the server drops the handler future.
    t.abort();
    assert!(t.await.unwrap_err().is_cancelled());
    assert_eq!(conc_remaining(&a.router, "k1").await, 1);
}

#[tokio::test]
async fn the_slot_is_held_until_the_response_body_is_done() {
    let c = clock();
    let a = app(set(vec![conc_gate(1)]), &c);
    let res = send(&a.router, "/ok", Some("k1"), None).await;
    assert_eq!(conc_remaining(&a.router, "k1").await, 0);
    let _ = axum::body::to_bytes(res.into_body(), 1024).await.unwrap();
    assert_eq!(conc_remaining(&a.router, "k1").await, 1);
    // A response dropped unread frees it too.
    let res = send(&a.router, "/ok", Some("k1"), None).await;
    drop(res);
    assert_eq!(conc_remaining(&a.router, "k1").await, 1);
}

#[tokio::test]
async fn quota_endpoint_works_while_exhausted_and_changes_nothing() {
    let c = clock();
    let a = app(set(vec![key_gate(per(2, Duration::from_secs(10)))]), &c);
    for _ in 0..2 {
        let res = send(&a.router, "/ok", Some("k1"), None).await;
        assert_eq!(res.status(), StatusCode::OK);
    }
    let before = send(&a.router, "/ok", Some("k1"), None).await;
    assert_eq!(before.headers()["retry-after"], "5");
    for _ in 0..3 {
        let q = send(&a.router, "/v1/quota", Some("k1"), None).await;
        assert_eq!(q.status(), StatusCode::OK);
        assert_eq!(q.headers()["ratelimit"], "\"key\";r=0;t=10");
        let v = body_json(q).await;
        assert_eq!(v["gates"][0]["remaining"], 0);
        assert_eq!(v["gates"][0]["category"], "key_rate");
    }
    // Asking did not push the reset further out.
    let after = send(&a.router, "/ok", Some("k1"), None).await;
    assert_eq!(after.headers()["retry-after"], "5");
    // Not authenticated: 401, and never a gate's 429.
    let q = send(&a.router, "/v1/quota", None, None).await;
    assert_eq!(q.status(), StatusCode::UNAUTHORIZED);
    // Another key is unaffected.
    let q = send(&a.router, "/v1/quota", Some("k2"), None).await;
    assert_eq!(body_json(q).await["gates"][0]["remaining"], 2);
}

#[tokio::test]
async fn counters_keep_gate_429s_app_429s_4xx_and_5xx_apart() {
    let c = clock();
    let a = app(set(vec![key_gate(per(4, Duration::from_secs(60)))]), &c);
    for path in ["/ok", "/app429", "/bad", "/boom", "/ok"] {
        let _ = send(&a.router, path, Some("k1"), None).await;
    }
    let m = a.layer.metrics().snapshot();
    assert_eq!(m.admitted, 4);
    assert_eq!(m.rejected_by_category["key_rate"], 1);
    assert_eq!((m.ok, m.app_429, m.other_4xx, m.server_5xx), (1, 1, 1, 1));
    // Successful responses advertise the gate's state.
    c.advance(Duration::from_secs(60));
    let res = send(&a.router, "/ok", Some("k1"), None).await;
    assert_eq!(res.headers()["ratelimit-policy"], "\"key\";q=4;w=60");
    assert_eq!(res.headers()["ratelimit"], "\"key\";r=3;t=15");
}

#[tokio::test]
async fn debug_output_never_shows_api_keys_or_traces() {
    let c = clock();
    let gates = set(vec![key_gate(per(5, Duration::from_secs(1))), conc_gate(2)]);
    let adm = gates
        .check_traced(
            "sk_live_hunter2",
            None,
            Some("idem-secretish"),
            c.monotonic(),
        )
        .unwrap();
    let guard = adm.into_guard(Arc::clone(&gates));
    let a = app(Arc::clone(&gates), &c);
    // GateSet's state, a lease, a guard and the layer used to print the raw key.
    for shown in [
        format!("{gates:?}"),
        format!("{guard:?}"),
        format!("{:?}", a.layer),
    ] {
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(!shown.contains("idem-secretish"), "{shown}");
        assert!(
            shown.contains("key_rate") || shown.contains("Lease"),
            "{shown}"
        );
    }
}

#[test]
fn two_keys_of_one_account_with_the_same_trace_take_two_account_slots() {
    // Idempotency keys are chosen by each caller: "1" from k1 and "1" from k2 are different
    // requests and must not share one account-wide slot.
    let gates = set(vec![Gate::concurrency(
        "account-conc",
        "account_concurrency",
        Scope::Account,
        nz(1),
        Duration::from_secs(30),
    )]);
    let now = clock().monotonic();
    let _a = gates
        .check_traced("k1", Some("acme"), Some("1"), now)
        .unwrap();
    let no = gates.check_traced("k2", Some("acme"), Some("1"), now);
    assert!(no.is_err(), "k2 shared k1's slot");
    // The same key repeating its trace still shares its own slot.
    let _again = gates
        .check_traced("k1", Some("acme"), Some("1"), now)
        .unwrap();
}

#[test]
fn what_the_gate_sends_is_what_abide_core_reads() {
    // The gate formats the headers and abide-core parses them: one contract, two crates.
    use abide_core::{RateLimitSource, RetryAfterPolicy};
    let c = clock();
    let gates = set(vec![
        key_gate(per(10, Duration::from_secs(1))),
        account_gate(per(3, Duration::from_secs(60))),
    ]);
    let now = c.monotonic();
    for _ in 0..3 {
        let _ = gates.check("k", Some("a"), now).unwrap();
    }
    c.advance(Duration::from_millis(1500));
    let no = gates.check("k", Some("a"), c.monotonic()).unwrap_err();
    let h = no.headers();
    let wall = c.now();
    let info = abide_core::parse_rate_limit(&h, wall).unwrap();
    assert_eq!(info.source, RateLimitSource::Ietf);
    assert_eq!(info.policy.as_deref(), Some("account"));
    assert_eq!((info.limit, info.remaining), (Some(3), Some(0)));
    assert_eq!(info.window, Some(Duration::from_secs(60)));
    // 18.5 s left: the header says 19, and so does Retry-After.
    assert_eq!(info.reset, Some(Duration::from_secs(19)));
    let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(1);
    let d = RetryAfterPolicy::default()
        .from_headers(&h, wall, &mut rng)
        .unwrap();
    assert_eq!(
        d.retry_after,
        Some(Duration::from_secs(no.retry_after_secs()))
    );
    assert!(
        d.delay >= no.wait(),
        "never earlier than the gate would admit"
    );
}

#[test]
fn window_algorithms_answer_with_the_same_headers_and_round_up() {
    use abide_gate::Algorithm;
    let c = clock();
    let q = |a| per(2, Duration::from_millis(1500)).with_algorithm(a);
    let fixed = set(vec![key_gate(q(Algorithm::FixedWindow))]);
    let sliding = set(vec![key_gate(q(Algorithm::SlidingWindow))]);
    for g in [&fixed, &sliding] {
        let ok = g.check("k", None, c.monotonic()).unwrap();
        assert_eq!(ok.headers()["ratelimit-policy"], "\"key\";q=2;w=2");
        assert_eq!(g.check("k", None, c.monotonic()).unwrap().leases().len(), 0);
    }
    c.advance(Duration::from_millis(1499));
    // Fixed: 1 ms left in the window, said as 1 s (never 0).
    let no = fixed.check("k", None, c.monotonic()).unwrap_err();
    assert_eq!(no.wait(), Duration::from_millis(1));
    assert_eq!(no.headers()["retry-after"], "1");
    assert_eq!(no.headers()["ratelimit"], "\"key\";r=0;t=1");
    // Sliding: 1 ms to the window's end, then 750 ms until 2 weighs 1: 0.751 s -> 1.
    let no = sliding.check("k", None, c.monotonic()).unwrap_err();
    assert_eq!(no.wait(), Duration::from_millis(751));
    assert_eq!(no.retry_after_secs(), 1);
    assert_eq!(no.category(), "key_rate");
    c.advance(Duration::from_millis(1));
    let _ = fixed.check("k", None, c.monotonic()).unwrap();
    let _ = fixed.check("k", None, c.monotonic()).unwrap();
    assert!(fixed.check("k", None, c.monotonic()).is_err());
    assert!(sliding.check("k", None, c.monotonic()).is_err());
    // The quota endpoint reads the window without charging it.
    let q = sliding.quota("k", None, c.monotonic());
    assert_eq!((q[0].remaining, q[0].limit), (0, 2));
}
