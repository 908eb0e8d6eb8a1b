//! One conformance suite, written once against `Store`, run on every backend.
//!
//! The `matrix` test drives a fresh item into each state and applies each event through
//! the store: legal pairs must move the item to `transition(from, event)`, illegal ones
//! must leave it where it was (and single-item methods must say `IllegalTransition`).

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use abide_core::VerdictClass;
use abide_outbox::model::{Completion, DelayReason};
use abide_outbox::{
    transition, AttemptRecord, Error, Event, ListFilter, NewItem, Outcome, Receipt, ReceiptCounts,
    ReceiptState, RemoteCode, Request, RequeueFilter, State,
};
use serde_json::json;

use crate::support::{t0, ByHand};
use abide_outbox::model::MovedBy;
use abide_outbox::SendMark;

const LEASE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);

fn item(provider: &str, key: &str) -> NewItem {
    NewItem::new(
        provider,
        Request::post_json("/v1/messages", json!({"to": "+15550100", "text": key})),
    )
    .with_idempotency_key(key)
}

fn attempt(provider: &str, remote: RemoteCode, class: VerdictClass) -> AttemptRecord {
    AttemptRecord {
        at: t0(),
        provider: provider.into(),
        remote,
        verdict_class: class,
        delay: Some(Duration::from_secs(2)),
        delay_reason: Some(DelayReason::Honoured),
        latency: Duration::from_millis(12),
    }
}

fn done(id: &str, owner: &str, outcome: Outcome, remote: RemoteCode) -> Completion {
    let class = match outcome {
        Outcome::Submitted => VerdictClass::Success,
        Outcome::Failed { .. } => VerdictClass::Terminal,
        _ => VerdictClass::Throttle,
    };
    Completion {
        id: id.into(),
        lease_owner: owner.into(),
        outcome,
        attempts: vec![attempt("p", remote, class)],
        last_provider_code: Some(remote),
        message_id: None,
    }
}

async fn state_of<S: ByHand>(s: &S, id: &str) -> State {
    s.get(id).await.unwrap().unwrap().state
}

/// Enqueue one item for its own provider and drive it into `target` at `t0`.
async fn drive_to<S: ByHand>(s: &S, provider: &str, target: State) -> String {
    let id = s.enqueue(&[item(provider, provider)], t0()).await.unwrap()[0]
        .id
        .clone();
    if target == State::Queued {
        return id;
    }
    let claimed = s.claim(provider, "o1", t0(), LEASE, 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let outcome = match target {
        State::InFlight => return id,
        State::Submitted => Outcome::Submitted,
        State::Pending => Outcome::Retry {
            next_attempt_at: t0() + HOUR,
            reason: "http_429".into(),
        },
        State::Failed => Outcome::Failed {
            reason: "http_400".into(),
        },
        State::Deferred => Outcome::Deferred {
            reason: "attempt cap".into(),
        },
        State::Queued => unreachable!(),
    };
    let r = s
        .complete(&[done(&id, "o1", outcome, RemoteCode::Http(429))], t0())
        .await
        .unwrap();
    assert_eq!(r[0].as_ref().ok(), Some(&target));
    assert_eq!(state_of(s, &id).await, target);
    id
}

pub async fn matrix<S: ByHand>(s: S) {
    let t1 = t0() + 2 * HOUR;
    let mut n = 0;
    for from in State::ALL {
        for event in Event::ALL {
            n += 1;
            let p = format!("p{n}");
            let id = drive_to(&s, &p, from).await;
            let single: Option<abide_outbox::Result<()>> = match event {
                Event::Claim => {
                    // At t0 a PENDING item is not due: a claim must not take it.
                    let got = s.claim(&p, "o2", t0(), LEASE, 10).await.unwrap();
                    assert!(got
                        .iter()
                        .all(|i| i.id == id && i.lease_owner.as_deref() == Some("o2")));
                    None
                }
                Event::Accept | Event::Retry | Event::Fail => {
                    let outcome = match event {
                        Event::Accept => Outcome::Submitted,
                        Event::Retry => Outcome::Retry {
                            next_attempt_at: t1,
                            reason: "r".into(),
                        },
                        _ => Outcome::Failed { reason: "f".into() },
                    };
                    let r = s
                        .complete(&[done(&id, "o1", outcome, RemoteCode::Http(503))], t1)
                        .await
                        .unwrap();
                    Some(r.into_iter().next().unwrap().map(|_| ()))
                }
                Event::LeaseExpired => {
                    s.reclaim_expired(t1).await.unwrap();
                    None
                }
                Event::Due => {
                    s.promote_due(None, t1).await.unwrap();
                    None
                }
                Event::Defer => Some(s.defer(&id, "by hand", t1).await),
                Event::Requeue => Some(s.requeue(&id, t1).await),
                Event::Cancel => Some(s.cancel(&id, t1).await),
                Event::FailOver => {
                    s.fail_over(&p, "backup", t1, t1).await.unwrap();
                    None
                }
            };
            let got = s.get(&id).await.unwrap().unwrap();
            match transition(from, event) {
                Ok(to) => {
                    assert_eq!(got.state, to, "{from} --{event:?}--> expected {to}");
                    if let Some(r) = single {
                        assert!(r.is_ok(), "{from} {event:?}: {r:?}");
                    }
                    if event == Event::Cancel {
                        assert_eq!(got.reason.as_deref(), Some(abide_outbox::CANCELLED_REASON));
                        // Cancelled means never sent again: no claim takes it.
                        assert!(s
                            .claim(&p, "o3", t1 + HOUR, LEASE, 10)
                            .await
                            .unwrap()
                            .is_empty());
                    }
                    if event == Event::FailOver {
                        assert_eq!(got.current_provider, "backup");
                        assert_eq!(got.provider, p, "original provider is kept");
                    }
                }
                Err(illegal) => {
                    assert_eq!(got.state, from, "{from} --{event:?}--> must not move");
                    assert_eq!(got.current_provider, p);
                    if let Some(r) = single {
                        match r {
                            Err(Error::IllegalTransition(e)) => assert_eq!(e, illegal),
                            other => panic!("{from} {event:?}: expected illegal, got {other:?}"),
                        }
                    }
                }
            }
        }
    }
}

pub async fn enqueue_is_idempotent_and_all_or_nothing<S: ByHand>(s: S) {
    let first = s
        .enqueue(&[item("p", "k1"), item("p", "k2")], t0())
        .await
        .unwrap();
    assert!(first.iter().all(|e| e.created));
    let again = s
        .enqueue(&[item("p", "k2"), item("p", "k3"), item("p", "k3")], t0())
        .await
        .unwrap();
    assert_eq!(again[0].id, first[1].id);
    assert!(!again[0].created);
    assert!(again[1].created);
    assert_eq!(
        (again[2].id.as_str(), again[2].created),
        (again[1].id.as_str(), false)
    );

    let mut bad = item("p", "k4");
    bad.request.path = "https://elsewhere.example/x".into();
    let err = s.enqueue(&[item("p", "k5"), bad], t0()).await;
    assert!(matches!(err, Err(Error::Path(_))), "{err:?}");
    let c = s.counts_by_state(None).await.unwrap();
    assert_eq!(c.queued, 3, "nothing of the bad batch was stored");

    let it = s.get(&first[0].id).await.unwrap().unwrap();
    assert_eq!(it.idempotency_key, "k1");
    assert_eq!(it.state, State::Queued);
    assert_eq!(it.attempts, 0);
    assert_eq!(it.created_at, t0());
    assert_eq!(it.next_attempt_at, t0());
    assert_eq!(it.request, item("p", "k1").request);
    assert!(s.get("no-such-id").await.unwrap().is_none());

    // Without a caller key the id is the key.
    let e = s
        .enqueue(&[NewItem::new("p", item("p", "x").request)], t0())
        .await
        .unwrap();
    assert_eq!(
        s.get(&e[0].id).await.unwrap().unwrap().idempotency_key,
        e[0].id
    );
}

/// One key names one message: a known key with other content refuses the whole call
/// (naming the key, the stored item and the position), leaves the store as it was, and
/// the store keeps working; the same content stays a no-op; a key stored without a
/// digest (before migration 0006) is never refused.
pub async fn a_key_reused_for_another_message_is_refused<S: ByHand>(s: S) {
    let first = s.enqueue(&[item("p", "order-9")], t0()).await.unwrap();
    let mut other = item("p", "order-9");
    other.request = Request::post_json("/v1/messages", json!({"to": "+1555", "text": "SECOND"}));
    let err = s
        .enqueue(
            &[item("p", "fresh-1"), other.clone(), item("p", "fresh-2")],
            t0(),
        )
        .await;
    match err {
        Err(Error::KeyConflict {
            key,
            existing_id,
            index,
        }) => {
            assert_eq!(key, "order-9");
            assert_eq!(existing_id, first[0].id);
            assert_eq!(index, 1);
        }
        other => panic!("expected KeyConflict, got {other:?}"),
    }
    let c = s.counts_by_state(None).await.unwrap();
    assert_eq!(c.queued, 1, "nothing of the refused call was stored: {c:?}");

    // The read-only probe says the same, past one statement's worth of keys (256).
    let mut many: Vec<NewItem> = (0..300).map(|i| item("p", &format!("probe-{i}"))).collect();
    many.push(NewItem::new("p", other.request.clone()));
    assert!(s.check_keys(&many).await.is_ok());
    many[290] = other.clone();
    match s.check_keys(&many).await {
        Err(Error::KeyConflict {
            key,
            existing_id,
            index,
        }) => {
            assert_eq!(
                (key.as_str(), existing_id.as_str(), index),
                ("order-9", first[0].id.as_str(), 290)
            );
        }
        other => panic!("expected KeyConflict, got {other:?}"),
    }
    many[290] = item("p", "order-9");
    assert!(
        s.check_keys(&many).await.is_ok(),
        "the same message is no conflict"
    );
    assert_eq!(
        s.counts_by_state(None).await.unwrap().queued,
        1,
        "the probe wrote"
    );

    // Every part of the content counts: provider, method, path, headers, body.
    let base = item("p", "order-9");
    let mut variants = Vec::new();
    let mut v = base.clone();
    v.provider = "q".into();
    variants.push(v);
    let mut v = base.clone();
    v.request.method = http::Method::PUT;
    variants.push(v);
    let mut v = base.clone();
    v.request.path = "/v1/other".into();
    variants.push(v);
    let mut v = base.clone();
    v.request.headers.insert("X-Trace".into(), "1".into());
    variants.push(v);
    let mut v = base.clone();
    v.request.body = None;
    variants.push(v);
    for v in variants {
        let r = s.enqueue(std::slice::from_ref(&v), t0()).await;
        assert!(matches!(r, Err(Error::KeyConflict { .. })), "{v:?}: {r:?}");
    }

    // The same message again: idempotent, as before; JSON key order does not matter.
    let mut same = item("p", "order-9");
    same.request = Request::post_json(
        "/v1/messages",
        json!({"text": "order-9", "to": "+15550100"}),
    );
    let again = s
        .enqueue(&[same, item("p", "fresh-1")], t0())
        .await
        .unwrap();
    assert_eq!(
        (again[0].id.as_str(), again[0].created),
        (first[0].id.as_str(), false)
    );
    assert!(
        again[1].created,
        "the store still writes after a refused call"
    );

    // Two different messages with one new key in one call: the second is refused, and
    // the first is not stored either.
    let mut twin = item("p", "new-key");
    twin.request.path = "/v1/twin".into();
    let r = s.enqueue(&[item("p", "new-key"), twin], t0()).await;
    match r {
        Err(Error::KeyConflict { key, index, .. }) => {
            assert_eq!((key.as_str(), index), ("new-key", 1))
        }
        other => panic!("expected KeyConflict, got {other:?}"),
    }
    assert_eq!(s.counts_by_state(None).await.unwrap().queued, 2);

    // Stored before digests were kept: unknown content is accepted, as before.
    s.forget_content_digest("order-9").await;
    assert!(s.check_keys(std::slice::from_ref(&other)).await.is_ok());
    let legacy = s.enqueue(&[other], t0()).await.unwrap();
    assert_eq!(
        (legacy[0].id.as_str(), legacy[0].created),
        (first[0].id.as_str(), false)
    );
    assert_eq!(s.counts_by_state(None).await.unwrap().queued, 2);
}

pub async fn claim_leases_respect_provider_limit_and_due_time<S: ByHand>(s: S) {
    let items: Vec<_> = (0..5).map(|i| item("a", &format!("a{i}"))).collect();
    s.enqueue(&items, t0()).await.unwrap();
    s.enqueue(&[item("b", "b0")], t0()).await.unwrap();
    // Not due yet.
    assert!(s
        .claim("a", "w", t0() - Duration::from_secs(1), LEASE, 10)
        .await
        .unwrap()
        .is_empty());
    let c1 = s.claim("a", "w1", t0(), LEASE, 3).await.unwrap();
    assert_eq!(c1.len(), 3);
    for i in &c1 {
        assert_eq!(i.state, State::InFlight);
        assert_eq!(i.lease_owner.as_deref(), Some("w1"));
        assert_eq!(i.lease_expires_at, Some(t0() + LEASE));
        assert_eq!(i.current_provider, "a");
    }
    let c2 = s.claim("a", "w2", t0(), LEASE, 10).await.unwrap();
    assert_eq!(c2.len(), 2);
    assert!(s
        .claim("a", "w3", t0(), LEASE, 10)
        .await
        .unwrap()
        .is_empty());
    let ids: HashSet<_> = c1.iter().chain(&c2).map(|i| i.id.clone()).collect();
    assert_eq!(ids.len(), 5);
    assert_eq!(s.counts_by_state(Some("b")).await.unwrap().queued, 1);
    assert_eq!(s.counts_by_state(Some("a")).await.unwrap().in_flight, 5);
    assert!(s.claim("a", "w", t0(), LEASE, 0).await.unwrap().is_empty());
}

pub async fn concurrent_claimers_never_share_an_item<S: ByHand>(s: S) {
    let items: Vec<_> = (0..400).map(|i| item("p", &format!("k{i}"))).collect();
    s.enqueue(&items, t0()).await.unwrap();
    let mut tasks = Vec::new();
    for w in 0..8 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..400 {
                let batch = s
                    .claim("p", &format!("w{w}"), t0(), LEASE, 7)
                    .await
                    .unwrap();
                if batch.is_empty() {
                    break;
                }
                got.extend(batch.into_iter().map(|i| i.id));
            }
            got
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let unique: HashSet<_> = all.iter().collect();
    assert_eq!(all.len(), 400, "every item claimed once");
    assert_eq!(unique.len(), 400);
}

pub async fn complete_records_attempts_and_checks_the_lease<S: ByHand>(s: S) {
    let ids: Vec<_> = s
        .enqueue(&[item("p", "k1"), item("p", "k2")], t0())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    s.claim("p", "w1", t0(), LEASE, 10).await.unwrap();
    let retry = Outcome::Retry {
        next_attempt_at: t0() + Duration::from_secs(30),
        reason: "http_429".into(),
    };
    let mut two = done(&ids[0], "w1", retry, RemoteCode::Http(401));
    two.attempts
        .push(attempt("p", RemoteCode::Http(429), VerdictClass::Throttle));
    two.last_provider_code = Some(RemoteCode::Http(429));
    let r = s
        .complete(
            &[
                two,
                done(
                    &ids[1],
                    "intruder",
                    Outcome::Submitted,
                    RemoteCode::Http(202),
                ),
                done("missing", "w1", Outcome::Submitted, RemoteCode::Http(202)),
            ],
            t0(),
        )
        .await
        .unwrap();
    assert_eq!(r[0].as_ref().ok(), Some(&State::Pending));
    assert!(matches!(r[1], Err(Error::LeaseLost { .. })), "{:?}", r[1]);
    assert!(matches!(r[2], Err(Error::NotFound(_))), "{:?}", r[2]);
    assert_eq!(state_of(&s, &ids[1]).await, State::InFlight);

    let it = s.get(&ids[0]).await.unwrap().unwrap();
    assert_eq!(it.attempts, 2);
    assert_eq!(it.window_attempts, 2);
    assert_eq!(it.next_attempt_at, t0() + Duration::from_secs(30));
    assert_eq!(it.last_provider_code, Some(RemoteCode::Http(429)));
    assert_eq!(it.reason.as_deref(), Some("http_429"));
    assert_eq!(it.lease_owner, None);
    let att = s.attempts(&ids[0]).await.unwrap();
    assert_eq!(att.iter().map(|a| a.attempt_no).collect::<Vec<_>>(), [1, 2]);
    assert!(att.iter().all(|a| a.idempotency_key == "k1"));
    assert_eq!(att[0].record.remote, RemoteCode::Http(401));
    assert_eq!(att[1].record.verdict_class, VerdictClass::Throttle);
    assert_eq!(att[1].record.delay, Some(Duration::from_secs(2)));
    assert_eq!(att[1].record.latency, Duration::from_millis(12));

    // The next attempt continues the numbering.
    let c = s
        .claim("p", "w2", t0() + Duration::from_secs(30), LEASE, 10)
        .await
        .unwrap();
    assert_eq!(c.len(), 1);
    s.complete(
        &[done(
            &ids[0],
            "w2",
            Outcome::Submitted,
            RemoteCode::Http(202),
        )],
        t0(),
    )
    .await
    .unwrap();
    let att = s.attempts(&ids[0]).await.unwrap();
    assert_eq!(att.last().map(|a| a.attempt_no), Some(3));
    assert_eq!(state_of(&s, &ids[0]).await, State::Submitted);
}

pub async fn expired_leases_return_to_pending<S: ByHand>(s: S) {
    let id = s.enqueue(&[item("p", "k")], t0()).await.unwrap()[0]
        .id
        .clone();
    s.claim("p", "crashed", t0(), LEASE, 1).await.unwrap();
    // The crashed worker had put its request on the wire.
    assert_eq!(s.mark_sent(&[mark(&id, "crashed")]).await.unwrap(), [true]);
    let just_before = t0() + LEASE - Duration::from_millis(1);
    // `status` reads which in-flight items a dead run left: none while the lease runs.
    assert_eq!(s.expired_leases(just_before).await.unwrap(), 0);
    assert_eq!(s.reclaim_expired(just_before).await.unwrap(), 0);
    let later = t0() + LEASE;
    assert_eq!(s.expired_leases(later).await.unwrap(), 1, "lease ended");
    // Reading changed nothing: still in flight, still reclaimable.
    assert_eq!(state_of(&s, &id).await, State::InFlight);
    assert_eq!(s.reclaim_expired(later).await.unwrap(), 1);
    assert_eq!(s.expired_leases(later).await.unwrap(), 0, "reclaimed");
    let it = s.get(&id).await.unwrap().unwrap();
    assert_eq!(it.state, State::Pending);
    assert_eq!(
        it.attempts, 1,
        "the crashed worker marked its request as sent"
    );
    assert_eq!(it.window_attempts, 1);
    assert_eq!(it.next_attempt_at, later);
    assert_eq!(it.reason.as_deref(), Some("lease_expired"));
    assert_eq!(it.moved_by, Some(MovedBy::LeaseExpired));
    // The crashed worker's late completion is refused.
    assert_late_completion_refused(&s, &id, "crashed", later).await;
    // A new claim picks it up with the same idempotency key, still marked reclaimed (the
    // retry budget reads that on the claimed item).
    let again = s.claim("p", "fresh", later, LEASE, 1).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].idempotency_key, "k");
    assert!(again[0].lease_reclaimed());
    // Handed back unsent (a long pause, a lease about to end): still a resumed item, or its
    // next attempt would spend retry budget it never used.
    let back = Completion {
        id: id.clone(),
        lease_owner: "fresh".into(),
        outcome: Outcome::Retry {
            next_attempt_at: later,
            reason: "provider_paused".into(),
        },
        attempts: Vec::new(),
        last_provider_code: None,
        message_id: None,
    };
    s.complete(&[back], later).await.unwrap();
    let it = s.get(&id).await.unwrap().unwrap();
    assert_eq!(it.moved_by, Some(MovedBy::LeaseExpired));
    assert_eq!(it.attempts, 1, "a hand-back is not an attempt");
    let again = s.claim("p", "fresh", later, LEASE, 1).await.unwrap();
    assert!(again[0].lease_reclaimed());
    // The remote's answer clears moved_by, whatever the reason text says.
    let out = Outcome::Retry {
        next_attempt_at: later,
        reason: "lease_expired".into(),
    };
    s.complete(&[done(&id, "fresh", out, RemoteCode::Http(503))], later)
        .await
        .unwrap();
    let it = s.get(&id).await.unwrap().unwrap();
    assert_eq!(it.reason.as_deref(), Some("lease_expired"));
    assert_eq!(it.moved_by, None);
    assert!(!it.lease_reclaimed(), "a reason string decides nothing");
}

fn mark(id: &str, owner: &str) -> SendMark {
    SendMark {
        id: id.into(),
        lease_owner: owner.into(),
    }
}

/// An attempt is a request on the wire: `mark_sent` before each request, the completion's
/// attempts replacing the marks, a reclaim charging only marks never recorded, a claim
/// reclaimed or handed back unsent costing nothing; the window count follows the total.
pub async fn attempts_count_requests_on_the_wire<S: ByHand>(s: S) {
    let ids: Vec<String> = s
        .enqueue(&[item("w", "w1"), item("w", "w2"), item("w3", "w3")], t0())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    let (a, b, c) = (&ids[0], &ids[1], &ids[2]);
    // w3 stays QUEUED: a mark for an item not IN_FLIGHT under that lease is refused.
    assert_eq!(s.claim("w", "o1", t0(), LEASE, 10).await.unwrap().len(), 2);
    let r = s
        .mark_sent(&[
            mark(a, "o1"),
            mark(b, "other"),
            mark(c, "o1"),
            mark(b, "o1"),
        ])
        .await
        .unwrap();
    assert_eq!(r, [true, false, false, true]);
    assert_eq!(s.mark_sent(&[]).await.unwrap(), Vec::<bool>::new());
    // a: two requests (a credential refresh) recorded by one completion: 2, not 4.
    assert_eq!(s.mark_sent(&[mark(a, "o1")]).await.unwrap(), [true]);
    let mut two = done(a, "o1", Outcome::Submitted, RemoteCode::Http(202));
    two.attempts.push(two.attempts[0].clone());
    s.complete(&[two], t0()).await.unwrap();
    let it = s.get(a).await.unwrap().unwrap();
    assert_eq!((it.attempts, it.window_attempts), (2, 2));
    // b: marked once, its answer never recorded (a crash): the reclaim charges one, and
    // records it as a request whose answer never came, from the claim to the reclaim.
    let later = t0() + LEASE;
    assert_eq!(s.reclaim_expired(later).await.unwrap(), 1);
    let it = s.get(b).await.unwrap().unwrap();
    assert_eq!((it.attempts, it.window_attempts), (1, 1));
    let rows = s.attempts(b).await.unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let lost = &rows[0];
    assert_eq!(lost.attempt_no, 1);
    assert_eq!(lost.idempotency_key, it.idempotency_key);
    assert_eq!(lost.record.remote, RemoteCode::NoResponse);
    assert_eq!(lost.record.provider, "w");
    assert_eq!(lost.record.verdict_class, VerdictClass::Retry);
    assert_eq!(lost.record.delay_reason, Some(DelayReason::LeaseExpired));
    assert_eq!((lost.record.at, lost.record.latency), (t0(), LEASE));
    // a's answered requests and b's lost one, counted by what the remote said.
    let mut counts = s.remote_counts(None).await.unwrap();
    counts.sort();
    assert_eq!(
        counts,
        [(RemoteCode::Http(202), 2), (RemoteCode::NoResponse, 1)]
    );
    // Claimed again and reclaimed unsent (a restart before its slot): costs nothing.
    let got = s.claim("w", "o2", later, LEASE, 1).await.unwrap();
    assert_eq!(got[0].id, *b);
    assert_eq!(s.reclaim_all_in_flight(later).await.unwrap(), 1);
    assert_eq!(s.get(b).await.unwrap().unwrap().attempts, 1);
    // Claimed, marked, answered: the answer replaces the mark; its attempts row follows
    // the lost one's number.
    s.claim("w", "o3", later, LEASE, 1).await.unwrap();
    assert_eq!(s.mark_sent(&[mark(b, "o3")]).await.unwrap(), [true]);
    let ok = done(b, "o3", Outcome::Submitted, RemoteCode::Http(202));
    s.complete(&[ok], later).await.unwrap();
    let it = s.get(b).await.unwrap().unwrap();
    assert_eq!((it.attempts, it.window_attempts), (2, 2));
    let rows = s.attempts(b).await.unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1].attempt_no, 2);
    assert_eq!(rows[1].record.remote, RemoteCode::Http(202));
    // c: claimed, handed back unsent, reclaimed unsent: never an attempt.
    let got = s.claim("w3", "o4", later, LEASE, 1).await.unwrap();
    assert_eq!(got[0].id, *c);
    let back = Completion {
        id: c.clone(),
        lease_owner: "o4".into(),
        outcome: Outcome::Retry {
            next_attempt_at: later,
            reason: "provider_paused".into(),
        },
        attempts: Vec::new(),
        last_provider_code: None,
        message_id: None,
    };
    let r = s.complete(&[back], later).await.unwrap();
    assert!(matches!(r[0], Ok(State::Pending)), "{:?}", r[0]);
    s.claim("w3", "o5", later, LEASE, 1).await.unwrap();
    assert_eq!(s.reclaim_all_in_flight(later).await.unwrap(), 1);
    let it = s.get(c).await.unwrap().unwrap();
    assert_eq!((it.attempts, it.window_attempts), (0, 0));
    assert!(s.attempts(c).await.unwrap().is_empty());
    // A mark left by the reclaimed lease is gone: a new lease starts from none.
    s.claim("w3", "o6", later, LEASE, 1).await.unwrap();
    assert_eq!(s.reclaim_all_in_flight(later).await.unwrap(), 1);
    assert_eq!(s.get(c).await.unwrap().unwrap().attempts, 0);
}

/// A worker whose lease was reclaimed reports success late: the store must refuse it.
async fn assert_late_completion_refused<S: ByHand>(s: &S, id: &str, owner: &str, at: SystemTime) {
    let r = s
        .complete(
            &[done(id, owner, Outcome::Submitted, RemoteCode::Http(202))],
            at,
        )
        .await
        .unwrap();
    assert!(
        matches!(r[0], Err(Error::IllegalTransition(_))),
        "{:?}",
        r[0]
    );
}

/// `reclaim_all_in_flight` ignores the lease (its caller knows the holders are dead) but
/// otherwise makes the same change as `reclaim_expired`, and touches no other state.
pub async fn reclaim_all_in_flight_ignores_unexpired_leases<S: ByHand>(s: S) {
    let flying = drive_to(&s, "ra", State::InFlight).await;
    let waiting = drive_to(&s, "rb", State::Pending).await;
    let done_id = drive_to(&s, "rc", State::Submitted).await;
    let queued = drive_to(&s, "rd", State::Queued).await;
    // Long before the lease (60 s) runs out.
    let now = t0() + Duration::from_secs(1);
    assert_eq!(s.reclaim_expired(now).await.unwrap(), 0);
    assert_eq!(s.reclaim_all_in_flight(now).await.unwrap(), 1);
    let it = s.get(&flying).await.unwrap().unwrap();
    assert_eq!(it.state, State::Pending);
    assert_eq!(it.attempts, 0, "the dead worker never marked it as sent");
    assert_eq!(it.next_attempt_at, now);
    assert_eq!(it.lease_owner, None);
    assert_eq!(
        it.reason.as_deref(),
        Some(abide_outbox::model::LEASE_EXPIRED_REASON)
    );
    assert!(it.lease_reclaimed());
    assert_eq!(state_of(&s, &waiting).await, State::Pending);
    assert_eq!(state_of(&s, &done_id).await, State::Submitted);
    assert_eq!(state_of(&s, &queued).await, State::Queued);
    // The dead owner's late completion is refused; nothing is left to reclaim.
    assert_late_completion_refused(&s, &flying, "o1", now).await;
    assert_eq!(s.reclaim_all_in_flight(now).await.unwrap(), 0);
}

/// Requests a dead lease holder put on the wire and never recorded are attempts rows
/// saying no answer came, numbered after the item's earlier attempts, under either reclaim;
/// a lease still running is left alone by `reclaim_expired`, rows and all.
pub async fn lost_requests_are_recorded_as_no_response<S: ByHand>(s: S) {
    let ids: Vec<String> = s
        .enqueue(&[item("l", "l1"), item("l", "l2")], t0())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    let (a, b) = (&ids[0], &ids[1]);
    s.claim("l", "o1", t0(), LEASE, 1).await.unwrap();
    // a: answered once, then claimed again and sent twice (a credential refresh) before
    // its worker died.
    assert_eq!(s.mark_sent(&[mark(a, "o1")]).await.unwrap(), [true]);
    let retry = Outcome::Retry {
        next_attempt_at: t0(),
        reason: "http_503".into(),
    };
    s.complete(&[done(a, "o1", retry, RemoteCode::Http(503))], t0())
        .await
        .unwrap();
    let t1 = t0() + Duration::from_secs(1);
    let got = s.claim("l", "o2", t1, LEASE, 2).await.unwrap();
    assert_eq!(got.len(), 2);
    let marks = [mark(a, "o2"), mark(b, "o2")];
    assert_eq!(s.mark_sent(&marks).await.unwrap(), [true, true]);
    assert_eq!(s.mark_sent(&[mark(a, "o2")]).await.unwrap(), [true]);
    // Before the lease ends nothing moves and nothing is written.
    assert_eq!(s.reclaim_expired(t1 + LEASE / 2).await.unwrap(), 0);
    assert_eq!(s.attempts(a).await.unwrap().len(), 1);
    // A restart that knows the holder is dead takes both, lease or not.
    let t2 = t1 + Duration::from_secs(5);
    assert_eq!(s.reclaim_all_in_flight(t2).await.unwrap(), 2);
    let rows = s.attempts(a).await.unwrap();
    let seen: Vec<(u32, RemoteCode)> = rows
        .iter()
        .map(|r| (r.attempt_no, r.record.remote))
        .collect();
    assert_eq!(
        seen,
        [
            (1, RemoteCode::Http(503)),
            (2, RemoteCode::NoResponse),
            (3, RemoteCode::NoResponse)
        ]
    );
    for lost in &rows[1..] {
        assert_eq!(
            (lost.record.at, lost.record.latency),
            (t1, Duration::from_secs(5))
        );
    }
    assert_eq!(s.get(a).await.unwrap().unwrap().attempts, 3);
    let rows = s.attempts(b).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].attempt_no, rows[0].record.remote),
        (1, RemoteCode::NoResponse)
    );
    let mut counts = s.remote_counts(None).await.unwrap();
    counts.sort();
    assert_eq!(
        counts,
        [(RemoteCode::Http(503), 1), (RemoteCode::NoResponse, 3)]
    );
}

pub async fn deferral_requeue_and_failover_sweeps<S: ByHand>(s: S) {
    let e = s
        .enqueue(
            &[item("p", "old"), item("p", "young"), item("q", "other")],
            t0(),
        )
        .await
        .unwrap();
    for claimed in [
        s.claim("p", "w", t0(), LEASE, 10).await.unwrap(),
        s.claim("q", "w", t0(), LEASE, 10).await.unwrap(),
    ] {
        for it in claimed {
            let out = Outcome::Retry {
                next_attempt_at: t0() + HOUR,
                reason: "http_503".into(),
            };
            s.complete(&[done(&it.id, "w", out, RemoteCode::Http(503))], t0())
                .await
                .unwrap();
        }
    }
    assert_eq!(s.next_due("p").await.unwrap(), Some(t0() + HOUR));
    assert_eq!(s.next_due("none").await.unwrap(), None);
    assert_eq!(
        s.oldest_pending_age(t0() + Duration::from_secs(5))
            .await
            .unwrap(),
        Some(Duration::from_secs(5))
    );
    // Age cut-off before t0: nothing is old enough.
    let before = t0() - Duration::from_secs(1);
    assert_eq!(s.fail_over("p", "backup", before, t0()).await.unwrap(), 0);
    assert_eq!(
        s.defer_older_than("p", before, "max age", t0())
            .await
            .unwrap(),
        0
    );
    // Fail over only p's waiting items: two PENDING, one still QUEUED (never claimed,
    // e.g. because the provider was paused).
    s.enqueue(&[item("p", "waiting")], t0()).await.unwrap();
    // The move, a minute after they were enqueued (a 30 s wait).
    let moved_at = t0() + Duration::from_secs(60);
    let wait = Duration::from_secs(30);
    assert_eq!(
        s.fail_over("p", "backup", moved_at - wait, moved_at)
            .await
            .unwrap(),
        3
    );
    let moved = s.get(&e[0].id).await.unwrap().unwrap();
    assert_eq!(
        (moved.provider.as_str(), moved.current_provider.as_str()),
        ("p", "backup")
    );
    assert_eq!(
        moved.next_attempt_at, moved_at,
        "due at once on the new provider"
    );
    assert_eq!(moved.reason.as_deref(), Some("failed_over_from:p"));
    assert_eq!(moved.moved_by, Some(MovedBy::FailedOver));
    // A moved item starts a new window at the move: a second hop's wait counts from
    // there, not from its enqueue (else a chain moves it on at once).
    assert_eq!(moved.window_start, moved_at, "window restarted at the move");
    assert_eq!(moved.window_attempts, 0);
    assert_eq!(
        s.fail_over("backup", "p", moved_at - wait, moved_at)
            .await
            .unwrap(),
        0,
        "moved on before waiting at backup"
    );
    let on_backup = s.claim("backup", "w", moved_at, LEASE, 10).await.unwrap();
    assert_eq!(on_backup.len(), 3);
    assert!(on_backup.iter().all(|i| i.just_failed_over()));
    // Max age defers q's item.
    assert_eq!(
        s.defer_older_than("q", t0(), "max age", t0())
            .await
            .unwrap(),
        1
    );
    let d = s.get(&e[2].id).await.unwrap().unwrap();
    assert_eq!(
        (d.state, d.reason.as_deref()),
        (State::Deferred, Some("max age"))
    );
    // Requeue by filter: wrong provider touches nothing, right one starts a new window.
    let f = RequeueFilter {
        provider: Some("p".into()),
        ids: None,
    };
    assert_eq!(s.requeue_deferred(&f, t0()).await.unwrap(), 0);
    let later = t0() + HOUR;
    let f = RequeueFilter {
        provider: None,
        ids: Some(vec![e[2].id.clone(), "missing".into()]),
    };
    assert_eq!(s.requeue_deferred(&f, later).await.unwrap(), 1);
    let r = s.get(&e[2].id).await.unwrap().unwrap();
    assert_eq!(r.state, State::Queued);
    assert_eq!((r.attempts, r.window_attempts), (1, 0));
    assert_eq!((r.window_start, r.next_attempt_at), (later, later));
    assert_eq!(r.moved_by, None);
    assert!(matches!(
        s.requeue("missing", later).await,
        Err(Error::NotFound(_))
    ));
}

pub async fn remote_counts_group_what_the_remote_said<S: ByHand>(s: S) {
    let keys: Vec<_> = (0..3).map(|i| item("p", &format!("k{i}"))).collect();
    let ids: Vec<_> = s
        .enqueue(&keys, t0())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    s.claim("p", "w", t0(), LEASE, 10).await.unwrap();
    let mut c0 = done(&ids[0], "w", Outcome::Submitted, RemoteCode::Http(429));
    c0.attempts
        .push(attempt("p", RemoteCode::Http(429), VerdictClass::Throttle));
    c0.attempts
        .push(attempt("p", RemoteCode::Http(202), VerdictClass::Success));
    let c1 = done(&ids[1], "w", Outcome::Submitted, RemoteCode::Smpp(0x58));
    let fail = Outcome::Failed {
        reason: "connect".into(),
    };
    let c2 = done(&ids[2], "w", fail, RemoteCode::NoResponse);
    s.complete(&[c0, c1, c2], t0()).await.unwrap();
    let counts = s.remote_counts(None).await.unwrap();
    assert_eq!(counts[0], (RemoteCode::Http(429), 2));
    let mut rest = counts[1..].to_vec();
    rest.sort();
    assert_eq!(
        rest,
        [
            (RemoteCode::Http(202), 1),
            (RemoteCode::Smpp(0x58), 1),
            (RemoteCode::NoResponse, 1)
        ]
    );
    assert!(s.remote_counts(Some("other")).await.unwrap().is_empty());
    let c = s.counts_by_state(None).await.unwrap();
    assert_eq!((c.submitted, c.failed, c.total()), (2, 1, 3));
}

/// A large batch (more than one statement's worth) with mixed outcomes, a repeated item
/// and a foreign lease gives exactly what one-by-one application would.
pub async fn large_batches_match_one_by_one_completion<S: ByHand>(s: S) {
    let n = 300;
    let new: Vec<NewItem> = (0..n).map(|i| item("p", &format!("b{i}"))).collect();
    let ids: Vec<String> = s
        .enqueue(&new, t0())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(s.claim("p", "w", t0(), LEASE, n).await.unwrap().len(), n);
    let outcome = |i: usize| match i % 4 {
        0 => Outcome::Submitted,
        1 => Outcome::Retry {
            next_attempt_at: t0() + HOUR,
            reason: "http_429".into(),
        },
        2 => Outcome::Failed {
            reason: "http_400".into(),
        },
        _ => Outcome::Deferred {
            reason: "attempt cap".into(),
        },
    };
    let mut batch: Vec<Completion> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let owner = if i == 7 { "intruder" } else { "w" };
            done(id, owner, outcome(i), RemoteCode::Http(202))
        })
        .collect();
    // The same item twice: the second finds it no longer IN_FLIGHT.
    batch.push(done(
        &ids[0],
        "w",
        Outcome::Submitted,
        RemoteCode::Http(202),
    ));
    let r = s.complete(&batch, t0()).await.unwrap();
    assert_eq!(r.len(), n + 1);
    let want = [
        State::Submitted,
        State::Pending,
        State::Failed,
        State::Deferred,
    ];
    for (i, res) in r.iter().take(n).enumerate() {
        if i == 7 {
            assert!(matches!(res, Err(Error::LeaseLost { .. })), "{res:?}");
            assert_eq!(state_of(&s, &ids[i]).await, State::InFlight);
        } else {
            assert_eq!(res.as_ref().ok(), Some(&want[i % 4]), "item {i}");
        }
    }
    assert!(
        matches!(r[n], Err(Error::IllegalTransition(_))),
        "{:?}",
        r[n]
    );
    let c = s.counts_by_state(Some("p")).await.unwrap();
    assert_eq!(
        (c.submitted, c.pending, c.failed, c.deferred, c.in_flight),
        (75, 75, 75, 74, 1)
    );
    for i in [0, 1, 299] {
        let att = s.attempts(&ids[i]).await.unwrap();
        assert_eq!(att.len(), 1, "item {i}");
        assert_eq!(att[0].attempt_no, 1);
        assert_eq!(att[0].idempotency_key, format!("b{i}"));
    }
    let it = s.get(&ids[1]).await.unwrap().unwrap();
    assert_eq!(it.next_attempt_at, t0() + HOUR);
    assert_eq!(it.reason.as_deref(), Some("http_429"));
    assert_eq!(it.last_provider_code, Some(RemoteCode::Http(202)));
    assert_eq!(it.lease_owner, None);
    assert!(s.attempts(&ids[7]).await.unwrap().is_empty());
}

/// `has_active` (index probes) agrees with counting, for an item in every state, and
/// answers for several providers at once: any of them active.
pub async fn has_active_agrees_with_counts<S: ByHand>(s: S) {
    let mut idle = Vec::new();
    for (n, target) in State::ALL.into_iter().enumerate() {
        let provider = format!("ha{n}");
        drive_to(&s, &provider, target).await;
        let active = matches!(target, State::Queued | State::InFlight | State::Pending);
        let counted = s.counts_by_state(Some(&provider)).await.unwrap().active() > 0;
        assert_eq!(counted, active, "{target:?}");
        assert_eq!(
            s.has_active(&[&provider]).await.unwrap(),
            active,
            "{target:?}"
        );
        assert_eq!(
            s.has_active(&["nobody", &provider, "none"]).await.unwrap(),
            active,
            "{target:?} among others"
        );
        if !active {
            idle.push(provider);
        }
    }
    let idle: Vec<&str> = idle.iter().map(String::as_str).collect();
    assert!(idle.len() >= 3, "{idle:?}");
    assert!(!s.has_active(&idle).await.unwrap());
    assert!(!s.has_active(&["nobody"]).await.unwrap());
    assert!(!s.has_active(&[]).await.unwrap());
}

/// `reason_counts` says why items are where they are; `list` is newest first, filtered and
/// clamped; `requeue_failed` moves only `FAILED` items, into a fresh window.
pub async fn reasons_listing_and_requeue_of_failed_items<S: ByHand>(s: S) {
    let q = drive_to(&s, "rq", State::Queued).await;
    let f1 = drive_to(&s, "rf1", State::Failed).await;
    let f2 = drive_to(&s, "rf2", State::Failed).await;
    let d = drive_to(&s, "rd", State::Deferred).await;
    let p = drive_to(&s, "rp", State::Pending).await;

    let all = s.reason_counts(None).await.unwrap();
    assert_eq!(all[0], (State::Failed, "http_400".into(), 2), "{all:?}");
    for want in [
        (State::Deferred, "attempt cap".to_owned(), 1),
        (State::Pending, "http_429".to_owned(), 1),
        (State::Queued, String::new(), 1),
    ] {
        assert!(all.contains(&want), "{want:?} in {all:?}");
    }
    assert_eq!(all.len(), 4, "{all:?}");
    assert_eq!(
        s.reason_counts(Some(State::Deferred)).await.unwrap(),
        vec![(State::Deferred, "attempt cap".to_owned(), 1)]
    );
    assert!(s
        .reason_counts(Some(State::Submitted))
        .await
        .unwrap()
        .is_empty());

    // Newest first: a later enqueue comes before the earlier ones.
    let late = s.enqueue(&[item("rq", "late")], t0() + HOUR).await.unwrap()[0]
        .id
        .clone();
    let every = ListFilter {
        limit: 100,
        ..ListFilter::default()
    };
    let listed = s.list(&every).await.unwrap();
    assert_eq!(listed.len(), 6);
    assert_eq!(listed[0].id, late);
    let failed = ListFilter {
        state: Some(State::Failed),
        limit: 100,
        ..ListFilter::default()
    };
    let mut ids: Vec<_> = s
        .list(&failed)
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.id)
        .collect();
    ids.sort();
    let mut want = vec![f1.clone(), f2.clone()];
    want.sort();
    assert_eq!(ids, want);
    let by_provider = ListFilter {
        provider: Some("rq".into()),
        limit: 1,
        ..ListFilter::default()
    };
    let one = s.list(&by_provider).await.unwrap();
    assert_eq!(one.iter().map(|i| &i.id).collect::<Vec<_>>(), vec![&late]);
    let none = ListFilter {
        limit: 0,
        ..ListFilter::default()
    };
    assert!(s.list(&none).await.unwrap().is_empty());
    let huge = ListFilter {
        limit: usize::MAX,
        ..ListFilter::default()
    };
    assert_eq!(
        s.list(&huge).await.unwrap().len(),
        6,
        "a huge limit is clamped, not an error"
    );

    // requeue_failed: only FAILED items move (not the deferred one), in a fresh window.
    let later = t0() + 3 * HOUR;
    let only_f1 = RequeueFilter {
        provider: Some("rf1".into()),
        ids: None,
    };
    assert_eq!(s.requeue_failed(&only_f1, later).await.unwrap(), 1);
    let r = s.get(&f1).await.unwrap().unwrap();
    assert_eq!(r.state, State::Queued);
    assert_eq!((r.attempts, r.window_attempts), (1, 0));
    assert_eq!((r.window_start, r.next_attempt_at), (later, later));
    assert_eq!(r.reason, None);
    let any = RequeueFilter::default();
    assert_eq!(s.requeue_failed(&any, later).await.unwrap(), 1, "f2 only");
    assert_eq!(state_of(&s, &f2).await, State::Queued);
    assert_eq!(state_of(&s, &d).await, State::Deferred);
    assert_eq!(state_of(&s, &p).await, State::Pending);
    assert_eq!(state_of(&s, &q).await, State::Queued);
    // requeue_deferred leaves failed items alone and still works.
    let f3 = drive_to(&s, "rf3", State::Failed).await;
    assert_eq!(s.requeue_deferred(&any, later).await.unwrap(), 1, "d only");
    assert_eq!(state_of(&s, &f3).await, State::Failed);
    assert_eq!(state_of(&s, &d).await, State::Queued);
    // A requeued failed item can be claimed and delivered again.
    let got = s.claim("rf1", "o9", later, LEASE, 10).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].idempotency_key, "rf1", "same key across the requeue");
}

/// `message_id` is stored with an acceptance only; receipts are stored as they come and
/// matched to items when read, whatever the order; unknown ids are counted, never lost;
/// an item's state never changes.
pub async fn message_ids_and_receipts_are_matched_when_read<S: ByHand>(s: S) {
    let keys = ["r1", "r2", "r3", "r4"];
    let items: Vec<NewItem> = keys.iter().map(|k| item("p", k)).collect();
    let ids: Vec<String> = s
        .enqueue(&items, t0())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    let got = s.claim("p", "o", t0(), LEASE, 10).await.unwrap();
    assert_eq!(got.len(), 4);
    assert!(got.iter().all(|i| i.message_id.is_none()));
    let receipt = |id: &str, state, secs| Receipt {
        provider: "p".into(),
        message_id: id.into(),
        state,
        at: t0() + Duration::from_secs(secs),
    };
    // The receipt of r3 arrives before r3's acceptance is written.
    s.record_receipts(&[receipt("m3", ReceiptState::Delivered, 1)])
        .await
        .unwrap();
    assert_eq!(s.receipt_counts(None).await.unwrap().unmatched, 1);
    let with_id = |i: usize, outcome: Outcome, mid: &str| Completion {
        message_id: Some(mid.into()),
        ..done(&ids[i], "o", outcome, RemoteCode::Smpp(0))
    };
    let retry = Outcome::Retry {
        next_attempt_at: t0(),
        reason: "smpp_0x58_throttled".into(),
    };
    let r = s
        .complete(
            &[
                with_id(0, Outcome::Submitted, "m1"),
                with_id(1, Outcome::Submitted, "m2"),
                with_id(2, Outcome::Submitted, "m3"),
                // A throttled submit has no id; one given anyway is not stored.
                with_id(3, retry, "m-throttled"),
            ],
            t0(),
        )
        .await
        .unwrap();
    assert!(r.iter().all(Result::is_ok), "{r:?}");
    let m = |i: usize| {
        let s = &s;
        let id = ids[i].clone();
        async move { s.get(&id).await.unwrap().unwrap().message_id }
    };
    assert_eq!(m(0).await.as_deref(), Some("m1"));
    assert_eq!(m(3).await, None);
    s.record_receipts(&[
        receipt("m1", ReceiptState::Delivered, 2),
        receipt("m2", ReceiptState::Undeliverable, 2),
        receipt("zz", ReceiptState::Expired, 2),
        // Delivered twice (the remote repeated it): stored once.
        receipt("m1", ReceiptState::Delivered, 3),
    ])
    .await
    .unwrap();
    let c = s.receipt_counts(None).await.unwrap();
    assert_eq!(
        (c.delivered, c.undeliverable, c.expired, c.unmatched),
        (2, 1, 0, 1),
        "{c:?}"
    );
    assert_eq!(s.receipt_counts(Some("p")).await.unwrap(), c);
    assert_eq!(
        s.receipt_counts(Some("q")).await.unwrap(),
        ReceiptCounts::default()
    );
    assert_eq!(
        s.receipt_of(&ids[0]).await.unwrap(),
        Some((ReceiptState::Delivered, t0() + Duration::from_secs(3)))
    );
    assert_eq!(s.receipt_of(&ids[3]).await.unwrap(), None);
    assert_eq!(s.receipt_of("nope").await.unwrap(), None);
    for id in &ids[..3] {
        assert_eq!(state_of(&s, id).await, State::Submitted);
    }
    // r4, accepted on its next attempt, gets its own id and its receipt.
    let got = s.claim("p", "o2", t0(), LEASE, 10).await.unwrap();
    assert_eq!(got.len(), 1);
    let c4 = Completion {
        message_id: Some("m4".into()),
        ..done(&ids[3], "o2", Outcome::Submitted, RemoteCode::Smpp(0))
    };
    s.complete(&[c4], t0()).await.unwrap();
    s.record_receipts(&[receipt("m4", ReceiptState::Rejected, 4)])
        .await
        .unwrap();
    let c = s.receipt_counts(None).await.unwrap();
    assert_eq!((c.rejected, c.matched(), c.total()), (1, 4, 5), "{c:?}");
    let item = s.get(&ids[3]).await.unwrap().unwrap();
    assert_eq!(serde_json::to_value(&item).unwrap()["message_id"], "m4");
}

/// Marks and results written together (`mark_and_complete`, one transaction on the SQL
/// stores) answer as `mark_sent` and `complete` would: a mark under a lease no longer
/// held is refused beside one that is marked, and results replace the marks they answer.
pub async fn marks_and_results_written_together<S: ByHand>(s: S) {
    let ids: Vec<String> = s
        .enqueue(&[item("w", "t1"), item("w", "t2"), item("w", "t3")], t0())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    let (a, b, c) = (&ids[0], &ids[1], &ids[2]);
    assert_eq!(s.claim("w", "o1", t0(), LEASE, 10).await.unwrap().len(), 3);
    let (marked, done_) = s
        .mark_and_complete(&[mark(a, "o1"), mark(b, "other"), mark(c, "o1")], &[], t0())
        .await
        .unwrap();
    assert_eq!((marked, done_.len()), (vec![true, false, true], 0));
    let (marked, results) = s
        .mark_and_complete(
            &[mark(b, "o1")],
            &[done(a, "o1", Outcome::Submitted, RemoteCode::Http(202))],
            t0(),
        )
        .await
        .unwrap();
    assert_eq!(marked, [true]);
    assert!(
        matches!(results.as_slice(), [Ok(State::Submitted)]),
        "{results:?}"
    );
    // A result for a lease not held is refused; nothing else of the batch is undone.
    let (marked, results) = s
        .mark_and_complete(
            &[],
            &[
                done(c, "other", Outcome::Submitted, RemoteCode::Http(202)),
                done(c, "o1", Outcome::Submitted, RemoteCode::Http(202)),
            ],
            t0(),
        )
        .await
        .unwrap();
    assert!(marked.is_empty());
    assert!(results[0].is_err() && matches!(results[1], Ok(State::Submitted)));
    let it = s.get(a).await.unwrap().unwrap();
    assert_eq!((it.state, it.attempts), (State::Submitted, 1));
    assert_eq!(s.attempts(c).await.unwrap().len(), 1);
    // b: marked, never answered: the reclaim charges exactly that one request.
    assert_eq!(s.reclaim_expired(t0() + LEASE).await.unwrap(), 1);
    let it = s.get(b).await.unwrap().unwrap();
    assert_eq!((it.state, it.attempts), (State::Pending, 1));
}

macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    crate::support::with_sqlite(super::$name).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    crate::support::with_postgres(super::$name).await;
                }
            )*
        }
    };
}

conformance!(
    matrix,
    enqueue_is_idempotent_and_all_or_nothing,
    a_key_reused_for_another_message_is_refused,
    claim_leases_respect_provider_limit_and_due_time,
    concurrent_claimers_never_share_an_item,
    complete_records_attempts_and_checks_the_lease,
    expired_leases_return_to_pending,
    attempts_count_requests_on_the_wire,
    reclaim_all_in_flight_ignores_unexpired_leases,
    lost_requests_are_recorded_as_no_response,
    deferral_requeue_and_failover_sweeps,
    remote_counts_group_what_the_remote_said,
    large_batches_match_one_by_one_completion,
    has_active_agrees_with_counts,
    reasons_listing_and_requeue_of_failed_items,
    message_ids_and_receipts_are_matched_when_read,
    marks_and_results_written_together,
);
