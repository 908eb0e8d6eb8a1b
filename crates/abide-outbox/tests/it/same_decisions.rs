//! One decision logic: the same provider answers, fed to the outbox (scripted transport,
//! virtual time, real SQLite) and to `abide sim`'s `abide` policy, give the same sends at
//! the same times, the same delays and the same final state, because both drive one
//! `abide_core::Session`.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use abide_core::{Clock, TransportFailure};
use abide_outbox::{
    Config, Dispatcher, DispatcherOptions, NewItem, Request, Response, ScriptedTransport,
    SqliteStore, State, Store, Transport,
};
use abide_sim::engine::Traced;
use http::StatusCode;

use crate::support::{still, t0, StillStore, TokioClock};

/// One answer of the script, for either side.
#[derive(Debug, Clone)]
enum Said {
    Http(u16, Vec<(&'static str, String)>),
    NoAnswer(TransportFailure),
}

/// The answer to request `n` at wall time `wall`: each `Retry-After` form, a transport
/// outage (refused, then a timeout), a 503 burst, `403` + `Retry-After: 0`, rate-limit
/// headers appearing and changing; then success.
fn script(n: usize, wall: SystemTime) -> Said {
    let h = |pairs: &[(&'static str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| (*k, (*v).to_owned()))
            .collect::<Vec<_>>()
    };
    match n {
        0 => Said::Http(429, h(&[("retry-after", "3")])),
        1 => Said::NoAnswer(TransportFailure::Connect),
        2 => Said::NoAnswer(TransportFailure::AfterSend { replay_safe: true }),
        3 | 4 => Said::Http(503, h(&[("retry-after", "5")])),
        5 => Said::Http(403, h(&[("retry-after", "0")])),
        6 => {
            let date = httpdate::fmt_http_date(wall + Duration::from_secs(20));
            Said::Http(429, vec![("retry-after", date)])
        }
        7 => Said::Http(
            429,
            h(&[
                ("ratelimit-policy", "\"p\";q=100;w=1"),
                ("ratelimit", "\"p\";r=0;t=7"),
                ("retry-after", "7"),
            ]),
        ),
        8 => Said::Http(
            429,
            h(&[
                ("ratelimit-policy", "\"p\";q=5;w=1"),
                ("ratelimit", "\"p\";r=0;t=2"),
                ("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT"),
            ]),
        ),
        _ => Said::Http(202, Vec::new()),
    }
}

fn for_outbox(said: Said) -> Response {
    match said {
        Said::Http(status, headers) => {
            let pairs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            Response::with_headers(status, &pairs)
        }
        Said::NoAnswer(t) => Response::Transport(t),
    }
}

fn for_sim(said: Said) -> abide_sim::provider::Response {
    match said {
        Said::Http(status, headers) => {
            let pairs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            abide_sim::replay::answer(StatusCode::from_u16(status).unwrap(), &pairs)
        }
        Said::NoAnswer(t) => abide_sim::replay::no_answer(t),
    }
}

/// (send times from the first send, retry waits, final state) of the outbox.
async fn outbox() -> (Vec<Duration>, Vec<Option<Duration>>, State) {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TokioClock::new(t0()));
    let store = StillStore::new(
        still(SqliteStore::open(dir.path().join("o.db")))
            .await
            .unwrap(),
    );
    let t = {
        let c: Arc<dyn Clock> = clock.clone();
        let wall = clock.clone();
        Arc::new(ScriptedTransport::new(c, move |_, n| {
            for_outbox(script(n, wall.now()))
        }))
    };
    // `abide send`'s defaults, one sender.
    let config = Config::from_toml_str(
        r#"[[provider]]
        name = "p"
        base_url = "http://127.0.0.1:9"
        concurrency = 1"#,
    )
    .unwrap();
    let opts = DispatcherOptions {
        seed: Some(1),
        ..DispatcherOptions::default()
    };
    let c: Arc<dyn Clock> = clock.clone();
    let d = Dispatcher::with_transports(store.clone(), config, c, opts, |_| {
        let t: Arc<dyn Transport> = t.clone();
        t
    })
    .unwrap();
    let req = Request::post_json("/m", serde_json::json!({}));
    let id = d.enqueue(&[NewItem::new("p", req)]).await.unwrap()[0]
        .id
        .clone();
    d.run_until_drained().await.unwrap();
    let sent = t.sent();
    let first = sent[0].at;
    let times = sent.iter().map(|s| s.at - first).collect();
    let waits = store
        .attempts(&id)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.record.delay)
        .collect();
    let state = store.get(&id).await.unwrap().unwrap().state;
    (times, waits, state)
}

/// The same from `abide sim`'s `abide` policy.
fn sim() -> (Vec<Duration>, Vec<Option<Duration>>, &'static str) {
    let trace = abide_sim::replay::replay_abide(
        |n, wall| for_sim(script(n, wall)),
        // What `abide send` gives a provider that sets no `[provider.pacer]`.
        // The same providers file as the outbox's (one sender: the cold start follows it).
        Config::from_toml_str(
            "[[provider]]\nname = \"p\"\nbase_url = \"http://x\"\nconcurrency = 1",
        )
        .unwrap()
        .providers[0]
            .session_config()
            .pacer,
    );
    let mut times = Vec::new();
    let mut waits = Vec::new();
    let mut last = "none";
    for t in trace {
        match t {
            Traced::Sent { at, .. } => times.push(at),
            Traced::Decided {
                decision, after, ..
            } => {
                waits.push(after);
                last = decision;
            }
        }
    }
    let first = times[0];
    (times.into_iter().map(|t| t - first).collect(), waits, last)
}

#[tokio::test(start_paused = true)]
async fn the_outbox_and_the_simulator_decide_the_same() {
    let (o_times, o_waits, o_state) = outbox().await;
    let (s_times, s_waits, s_last) = sim();
    // The script's waits, as the session must read them.
    let secs = |s: u64| Some(Duration::from_secs(s));
    assert_eq!(o_times.len(), 10, "{o_times:?}");
    // The refused connection (send 1) is no attempt: the outbox records nine.
    assert_eq!(o_waits.len(), 9, "{o_waits:?}");
    assert_eq!(o_waits[0], secs(3), "Retry-After: 3 honoured");
    assert!(
        o_times[2] - o_times[1] >= Duration::from_secs(1),
        "refused connection: at least the outage pause: {o_times:?}"
    );
    assert_eq!(
        o_waits[1],
        secs(2),
        "a timeout right after: the pause doubled"
    );
    assert_eq!(o_waits[4], secs(1), "Retry-After: 0 floored");
    assert_eq!(o_waits[8], None, "delivered");
    assert_eq!(o_state, State::Submitted);
    // And the simulator's run of the same session agrees on every one; it traces the
    // refused connection's wait too.
    assert_eq!(o_times, s_times, "send times");
    let mut s_waits = s_waits;
    assert_eq!(
        s_waits.remove(1),
        secs(1),
        "refused connection in the simulator"
    );
    assert_eq!(o_waits, s_waits, "waits");
    assert_eq!(s_last, "delivered");
    println!("send times {o_times:?}\nwaits {o_waits:?}");
}
