//! The Lua-backed operations, one script call at a time, against the Redis on 127.0.0.1:6379
//! (skipped with `SKIPPED:` when it is absent, failing under `ABIDE_REQUIRE_SERVICES=1`; a
//! key prefix per test). Whole nodes and the fallback are in `tests_node.rs`.

use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::Script;

use super::*;

const URL: &str = "redis://127.0.0.1:6379";

pub(super) fn prefix(test: &str) -> String {
    format!("abide-test:{test}:{}", uuid::Uuid::new_v4().simple())
}

/// A connection, or `None` after printing why the test is skipped.
pub(super) async fn connect(test: &str) -> Option<ConnectionManager> {
    let made = async { ConnectionManager::new(redis::Client::open(URL)?).await };
    let why = match tokio::time::timeout(Duration::from_secs(3), made).await {
        Ok(Ok(c)) => return Some(c),
        Ok(Err(e)) => e.to_string(),
        Err(_) => "timed out".to_owned(),
    };
    match why {
        other if std::env::var("ABIDE_REQUIRE_SERVICES").as_deref() != Ok("1") => {
            println!("SKIPPED: {test}: no Redis at {URL} ({other:?})");
            None
        }
        other => panic!("ABIDE_REQUIRE_SERVICES=1 but Redis at {URL} is unreachable: {other:?}"),
    }
}

/// One call of `sync.lua`, arguments by name.
#[derive(Debug, Clone)]
struct Call<'a> {
    node: &'a str,
    rate: f64,
    slots: u32,
    pause_us: u64,
    decrease: Option<(f64, f64)>,
    deposits: u64,
    refunds: u64,
    tokens: u32,
    ceiling: Option<f64>,
    /// Decreases the caller has seen.
    seen: i64,
    /// Slots it handed out itself in fallback, still ahead.
    debt: u32,
    burst: f64,
    /// Live nodes it last saw, if it had joined before (0: a cold start).
    seen_nodes: u32,
    /// Shared slots it still holds.
    held: u32,
}

impl Default for Call<'_> {
    fn default() -> Self {
        Self {
            node: "a",
            rate: 1.0,
            slots: 0,
            pause_us: 0,
            decrease: None,
            deposits: 0,
            refunds: 0,
            tokens: 0,
            ceiling: None,
            seen: 0,
            debt: 0,
            burst: 1.0,
            seen_nodes: 0,
            held: 0,
        }
    }
}

async fn call(conn: &mut ConnectionManager, key: &str, c: Call<'_>) -> sync::Reply {
    let script = Script::new(include_str!("sync.lua"));
    let mut inv = script.prepare_invoke();
    let (dec, drate, dceil) = match c.decrease {
        Some((r, ce)) => ("1", r.to_string(), ce.to_string()),
        None => ("0", String::new(), String::new()),
    };
    inv.key(format!("{key}:state"))
        .key(format!("{key}:nodes"))
        .key(format!("{key}:info"))
        .arg(c.node)
        .arg(2000)
        .arg(c.rate.to_string())
        .arg(c.burst.to_string())
        .arg(c.slots)
        .arg(c.pause_us)
        .arg(dec)
        .arg(drate)
        .arg(dceil)
        .arg(c.deposits)
        .arg(c.refunds)
        .arg(c.tokens)
        .arg("0.5") // retry ratio
        .arg("1") // floor per second
        .arg("20") // cap
        .arg("10") // initial tokens (floor x ttl)
        .arg(c.ceiling.map(|x| x.to_string()).unwrap_or_default())
        .arg("redis share=1")
        .arg(5_000_000u64)
        .arg(c.seen)
        .arg("1")
        .arg(c.debt)
        .arg(c.seen_nodes)
        .arg(sync::REJOIN_GRACE_US)
        .arg(c.held);
    inv.invoke_async(conn).await.unwrap()
}

const S: i64 = 1_000_000;

#[tokio::test]
async fn two_nodes_draw_slots_from_one_schedule() {
    let Some(mut conn) = connect("schedule").await else {
        return;
    };
    let key = prefix("schedule");
    // 1/s: node a takes the slots at +0, +1 and +2 s; node b's continue at +3 s (less the
    // few milliseconds between the calls), on the same server clock.
    let a = call(
        &mut conn,
        &key,
        Call {
            slots: 3,
            ..Call::default()
        },
    )
    .await;
    assert_eq!(a.9, 1, "new state reads as fresh");
    let offs = &a.10;
    assert_eq!(offs.len(), 3);
    assert_eq!(offs[0], 0);
    assert_eq!(offs[1], S);
    assert_eq!(offs[2], 2 * S);
    let b = call(
        &mut conn,
        &key,
        Call {
            node: "b",
            slots: 4,
            ..Call::default()
        },
    )
    .await;
    assert_eq!(b.0, 2, "two live nodes");
    assert_eq!(b.9, 0);
    // The horizon (5 s): b gets the slots at +3, +4 and +5 s (less the time between the
    // calls), not the one at +6 s.
    assert_eq!(b.10.len(), 3);
    assert!((2 * S + S / 2..=3 * S).contains(&b.10[0]), "{:?}", b.10);
    assert_eq!(b.10[1] - b.10[0], S);
    assert_eq!(b.7, 6, "slots granted to all nodes");
}

#[tokio::test]
async fn a_pause_heard_by_one_node_holds_every_node_and_its_slots() {
    let Some(mut conn) = connect("pause").await else {
        return;
    };
    let key = prefix("pause");
    let a = call(
        &mut conn,
        &key,
        Call {
            pause_us: 30 * S as u64,
            ..Call::default()
        },
    )
    .await;
    assert!(a.1 > 29 * S && a.1 <= 30 * S, "{}", a.1);
    let b = call(
        &mut conn,
        &key,
        Call {
            node: "b",
            slots: 5,
            rate: 100.0,
            ..Call::default()
        },
    )
    .await;
    assert!(
        b.1 > 29 * S && b.1 <= 30 * S,
        "b sees the same end: {}",
        b.1
    );
    assert!(b.10.is_empty(), "no slot inside the pause: {:?}", b.10);
    // A shorter pause never shortens it.
    let c = call(
        &mut conn,
        &key,
        Call {
            pause_us: S as u64,
            ..Call::default()
        },
    )
    .await;
    assert!(c.1 > 29 * S, "{}", c.1);
}

#[tokio::test]
async fn a_decrease_and_the_current_estimate_reach_the_other_nodes() {
    let Some(mut conn) = connect("rate").await else {
        return;
    };
    let key = prefix("rate");
    let a = call(
        &mut conn,
        &key,
        Call {
            rate: 77.5,
            ceiling: Some(80.0),
            ..Call::default()
        },
    )
    .await;
    assert_eq!(a.2, 0);
    // A node joining late reads the last rate and ceiling shared.
    let b = call(
        &mut conn,
        &key,
        Call {
            node: "b",
            ..Call::default()
        },
    )
    .await;
    assert_eq!((b.5.as_str(), b.6.as_str()), ("77.5", "80"));
    let a = call(
        &mut conn,
        &key,
        Call {
            decrease: Some((40.0, 42.0)),
            rate: 40.0,
            ..Call::default()
        },
    )
    .await;
    assert_eq!(a.2, 1);
    let b = call(
        &mut conn,
        &key,
        Call {
            node: "b",
            ..Call::default()
        },
    )
    .await;
    assert_eq!((b.2, b.3.as_str(), b.4.as_str()), (1, "40", "42"));
    // A node that has not taken the decrease yet neither spaces slots at its old rate nor
    // raises the shared one; nor does a node that has had no answer ('' rate).
    let b = call(
        &mut conn,
        &key,
        Call {
            node: "b",
            rate: 500.0,
            slots: 2,
            ..Call::default()
        },
    )
    .await;
    assert_eq!(b.10[1] - b.10[0], S / 40, "{:?}", b.10);
    let c = call(
        &mut conn,
        &key,
        Call {
            node: "c",
            ..Call::default()
        },
    )
    .await;
    assert_eq!(c.5, "40");
    // Once it has seen it, its own learned rate is the schedule's again.
    let b = call(
        &mut conn,
        &key,
        Call {
            node: "b",
            rate: 50.0,
            seen: 1,
            slots: 2,
            ..Call::default()
        },
    )
    .await;
    assert_eq!(b.10[1] - b.10[0], S / 50, "{:?}", b.10);
}

#[tokio::test]
async fn the_retry_budget_is_one_bucket_for_every_node() {
    let Some(mut conn) = connect("budget").await else {
        return;
    };
    let key = prefix("budget");
    // Initial allowance: the floor over the ttl (10).
    let a = call(
        &mut conn,
        &key,
        Call {
            tokens: 8,
            ..Call::default()
        },
    )
    .await;
    assert_eq!(a.8, 8);
    let b = call(
        &mut conn,
        &key,
        Call {
            node: "b",
            tokens: 8,
            ..Call::default()
        },
    )
    .await;
    assert_eq!(b.8, 2, "what a left, and no more");
    // 10 first attempts at ratio 0.5 earn 5; 2 refunds give 2 back.
    let a = call(
        &mut conn,
        &key,
        Call {
            deposits: 10,
            refunds: 2,
            tokens: 16,
            ..Call::default()
        },
    )
    .await;
    assert_eq!(a.8, 7);
    // Never above the cap (20) however much is deposited.
    let a = call(
        &mut conn,
        &key,
        Call {
            deposits: 1000,
            tokens: 16,
            ..Call::default()
        },
    )
    .await;
    assert_eq!(a.8, 16);
    let a = call(
        &mut conn,
        &key,
        Call {
            tokens: 16,
            ..Call::default()
        },
    )
    .await;
    assert_eq!(a.8, 4);
}

#[tokio::test]
async fn lost_state_reads_as_fresh_and_starts_from_the_callers_rate() {
    let Some(mut conn) = connect("lost").await else {
        return;
    };
    let key = prefix("lost");
    let _ = call(
        &mut conn,
        &key,
        Call {
            slots: 3,
            rate: 2.0,
            ..Call::default()
        },
    )
    .await;
    let _: () = redis::cmd("DEL")
        .arg(format!("{key}:state"))
        .query_async(&mut conn)
        .await
        .unwrap();
    let a = call(
        &mut conn,
        &key,
        Call {
            slots: 3,
            rate: 2.0,
            ..Call::default()
        },
    )
    .await;
    assert_eq!(a.9, 1);
    // Spaced at the caller's rate from the first slot: no burst.
    assert_eq!(a.10, [0, S / 2, S]);
    // A node rejoining with 4 slots of its own still ahead: the schedule skips them.
    let _: () = redis::cmd("DEL")
        .arg(format!("{key}:state"))
        .query_async(&mut conn)
        .await
        .unwrap();
    let b = call(
        &mut conn,
        &key,
        Call {
            node: "b",
            slots: 1,
            rate: 2.0,
            debt: 4,
            ..Call::default()
        },
    )
    .await;
    assert_eq!(b.10, [2 * S]);
}

#[tokio::test]
async fn after_a_restart_rejoining_nodes_get_no_burst_and_leave_the_absent_their_share() {
    let Some(mut conn) = connect("rejoin").await else {
        return;
    };
    let key = prefix("rejoin");
    // 30/s, burst 10, three nodes, each holding 2 slots ahead when Redis goes.
    let node = |node, seen_nodes| Call {
        node,
        rate: 30.0,
        burst: 10.0,
        slots: 30,
        seen_nodes,
        ..Call::default()
    };
    for n in ["a", "b", "c"] {
        let _ = call(&mut conn, &key, node(n, 0)).await;
    }
    // Restarted: every key lost.
    let _: () = redis::cmd("DEL")
        .arg(format!("{key}:state"))
        .arg(format!("{key}:nodes"))
        .arg(format!("{key}:info"))
        .query_async(&mut conn)
        .await
        .unwrap();
    let within_a_second = |r: &sync::Reply| r.10.iter().filter(|us| **us < S).count();
    // Node a rejoins first, each of the others still sending its fallback share (10/s).
    let a = call(
        &mut conn,
        &key,
        Call {
            held: 2,
            ..node("a", 3)
        },
    )
    .await;
    assert_eq!(a.9, 1, "the state was lost");
    assert_eq!(a.0, 3, "the absent nodes still count");
    // No burst: spaced at a's share (100 ms) from the first slot, after its 2 held.
    assert_eq!(a.10[..3], [2 * S / 10, 3 * S / 10, 4 * S / 10]);
    assert!(within_a_second(&a) <= 8, "{:?}", a.10);
    // The others rejoin: over all three, no more than the rate in the first second.
    let b = call(&mut conn, &key, node("b", 3)).await;
    let c = call(&mut conn, &key, node("c", 3)).await;
    assert_eq!(b.9, 0);
    let all = within_a_second(&a) + within_a_second(&b) + within_a_second(&c);
    assert!(all <= 30 + 1, "{all} slots in the first second at 30/s");
    // A cold start (no node had joined) keeps the burst a lone pacer would have.
    let cold = call(&mut conn, &prefix("cold"), node("a", 0)).await;
    assert_eq!(cold.10[..10], [0; 10]);
}
