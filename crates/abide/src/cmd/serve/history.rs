//! The dashboard's chart history, kept by `abide serve` so that a page opened later (a new
//! tab, a reload) draws the recent past at once instead of starting empty.
//!
//! One [`Sample`] of what the charts plot every [`EVERY`] (5 s), taken by a task of its own
//! (not per request), in a ring of [`KEEP`] samples (720: one hour). When the ring is full
//! the oldest sample is dropped, so the memory is bounded whatever the run length: about
//! 100 bytes per sample plus about 100 per provider (720 samples of 3 providers: ~290 KB).
//! Served whole, oldest first, as `GET /dashboard/history.json`.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use abide_outbox::{Counts, ProviderProgress};
use serde_json::{json, Value};

/// Time between two samples.
pub(crate) const EVERY: Duration = Duration::from_secs(5);
/// Samples kept: one hour at [`EVERY`].
pub(crate) const KEEP: usize = 720;

/// What the charts show at one moment.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    /// When it was taken, seconds since the Unix epoch (the server's clock).
    pub(crate) at_secs: f64,
    /// Items per state.
    pub(crate) counts: Counts,
    /// Age of the oldest `QUEUED`/`PENDING` item, seconds; `None` when none waits.
    pub(crate) oldest_pending_age_secs: Option<f64>,
    /// Each provider the dispatcher reported, in its order.
    pub(crate) providers: Vec<ProviderSample>,
}

/// One provider's lines on the charts at one moment.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProviderSample {
    pub(crate) name: String,
    /// The pacer's rate, requests per second.
    pub(crate) pace_per_sec: f64,
    /// The limit learned from throttles, requests per second (`None` before the first).
    pub(crate) ceiling_per_sec: Option<f64>,
    /// The limit the rate-limit headers advertise, requests per second.
    pub(crate) advertised_rate_per_sec: Option<f64>,
    /// Advertised × headroom, requests per second.
    pub(crate) target_rate_per_sec: Option<f64>,
    /// Throttled fraction of responses over the pacer's window, 0 to 1.
    pub(crate) throttle_rate: f64,
}

impl ProviderSample {
    pub(crate) fn of(p: &ProviderProgress) -> Self {
        Self {
            name: p.name.clone(),
            pace_per_sec: p.rate,
            ceiling_per_sec: p.ceiling,
            advertised_rate_per_sec: p.advertised_rate,
            target_rate_per_sec: p.target_rate,
            throttle_rate: p.throttle_rate,
        }
    }
}

/// Seconds since the Unix epoch (negative before it), millisecond precision.
pub(crate) fn unix_secs(t: SystemTime) -> f64 {
    let secs = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    };
    (secs * 1000.0).round() / 1000.0
}

/// The ring of samples, oldest first. Shared by the sampling task and the requests.
#[derive(Debug)]
pub(crate) struct History {
    ring: Mutex<VecDeque<Sample>>,
    keep: usize,
    every: Duration,
}

impl History {
    /// A ring of at most `keep` samples (at least 1), taken every `every`.
    pub(crate) fn new(keep: usize, every: Duration) -> Self {
        let keep = keep.max(1);
        Self {
            ring: Mutex::new(VecDeque::with_capacity(keep)),
            keep,
            every,
        }
    }

    fn ring(&self) -> std::sync::MutexGuard<'_, VecDeque<Sample>> {
        self.ring.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds `s` as the newest sample, dropping the oldest when the ring is full.
    pub(crate) fn push(&self, s: Sample) {
        let mut ring = self.ring();
        while ring.len() >= self.keep {
            ring.pop_front();
        }
        ring.push_back(s);
    }

    /// Every sample kept, oldest first.
    pub(crate) fn samples(&self) -> Vec<Sample> {
        self.ring().iter().cloned().collect()
    }

    /// The body of `/dashboard/history.json`: one array per line of a chart, aligned with
    /// `t` (sample times, Unix seconds), `null` where a value was unknown or a provider was
    /// not reported. Providers in the order they first appear.
    pub(crate) fn to_json(&self) -> Value {
        let samples = self.samples();
        let n = samples.len();
        let t: Vec<f64> = samples.iter().map(|s| s.at_secs).collect();
        // Named as in `state.json` (the same serialisation): `counts.queued`, ...
        let mut counts = serde_json::Map::new();
        if let Value::Object(states) = json!(Counts::default()) {
            counts.extend(states.into_iter().map(|(state, _)| (state, json!([]))));
        }
        for s in &samples {
            if let Value::Object(one) = json!(s.counts) {
                for (state, count) in one {
                    let line = counts.entry(state).or_insert_with(|| json!([]));
                    if let Value::Array(line) = line {
                        line.push(count);
                    }
                }
            }
        }
        let age: Vec<Option<f64>> = samples.iter().map(|s| s.oldest_pending_age_secs).collect();
        let mut names: Vec<&str> = Vec::new();
        for p in samples.iter().flat_map(|s| &s.providers) {
            if !names.contains(&p.name.as_str()) {
                names.push(&p.name);
            }
        }
        let providers: Vec<Value> = names
            .iter()
            .map(|name| {
                let line = |f: fn(&ProviderSample) -> Option<f64>| -> Vec<Option<f64>> {
                    let mut out = Vec::with_capacity(n);
                    for s in &samples {
                        out.push(s.providers.iter().find(|p| p.name == *name).and_then(f));
                    }
                    out
                };
                json!({
                    "name": name,
                    "pace_per_sec": line(|p| Some(p.pace_per_sec)),
                    "ceiling_per_sec": line(|p| p.ceiling_per_sec),
                    "advertised_rate_per_sec": line(|p| p.advertised_rate_per_sec),
                    "target_rate_per_sec": line(|p| p.target_rate_per_sec),
                    "throttle_rate": line(|p| Some(p.throttle_rate)),
                })
            })
            .collect();
        json!({
            "every_secs": self.every.as_secs_f64(),
            "keep": self.keep,
            "t": t,
            "counts": counts,
            "oldest_pending_age_secs": age,
            "providers": providers,
        })
    }
}

/// What the sampling task waits on between samples: the next tick, `false` to stop.
pub(crate) trait Ticks {
    fn next(&mut self) -> impl Future<Output = bool> + Send;
}

impl Ticks for tokio::time::Interval {
    async fn next(&mut self) -> bool {
        self.tick().await;
        true
    }
}

/// Takes a sample with `take` at every tick into `history` until `ticks` stops. A sample
/// that cannot be taken (the database refused) is left out: a gap on the charts, logged at
/// debug level (a store fault is reported by `/healthz` and the dispatcher already).
pub(crate) async fn keep<T, F, Fut>(history: &History, mut ticks: T, mut take: F)
where
    T: Ticks,
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Sample>>,
{
    while ticks.next().await {
        match take().await {
            Ok(s) => history.push(s),
            Err(e) => tracing::debug!(error = %e, "dashboard history: no sample this time"),
        }
    }
}

/// The ticks of the sampling task: every `every`, the first at once; a tick missed while
/// the process was busy is not made up (the samples stay `every` apart).
pub(crate) fn interval(every: Duration) -> tokio::time::Interval {
    let mut i = tokio::time::interval(every);
    i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    i
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn sample(at_secs: f64, queued: u64, providers: &[(&str, f64)]) -> Sample {
        Sample {
            at_secs,
            counts: Counts {
                queued,
                ..Counts::default()
            },
            oldest_pending_age_secs: (queued > 0).then_some(at_secs),
            providers: providers
                .iter()
                .map(|(name, pace)| ProviderSample {
                    name: (*name).to_owned(),
                    pace_per_sec: *pace,
                    ceiling_per_sec: None,
                    advertised_rate_per_sec: Some(10.0),
                    target_rate_per_sec: None,
                    throttle_rate: 0.0,
                })
                .collect(),
        }
    }

    /// Injected time: each tick is a moment given by the test (5 s apart), no clock read.
    struct Injected {
        times: std::vec::IntoIter<f64>,
        now: std::sync::Arc<Mutex<f64>>,
    }

    impl Ticks for Injected {
        async fn next(&mut self) -> bool {
            match self.times.next() {
                Some(t) => {
                    *self.now.lock().unwrap() = t;
                    true
                }
                None => false,
            }
        }
    }

    #[tokio::test]
    async fn the_ring_is_bounded_drops_the_oldest_and_keeps_the_order() {
        let h = History::new(KEEP, EVERY);
        let now = std::sync::Arc::new(Mutex::new(0.0));
        let ticks = Injected {
            // Three hours at 5 s: 2,160 samples into a ring of 720.
            times: (0..3 * KEEP)
                .map(|i| i as f64 * 5.0)
                .collect::<Vec<_>>()
                .into_iter(),
            now: std::sync::Arc::clone(&now),
        };
        let mut n = 0;
        keep(&h, ticks, || {
            let at = *now.lock().unwrap();
            n += 1;
            let s = sample(at, n, &[("sms", 1.0)]);
            async move { Ok(s) }
        })
        .await;
        let kept = h.samples();
        assert_eq!(kept.len(), KEEP);
        // The newest hour, oldest first: samples 1,441 to 2,160.
        assert_eq!(kept[0].counts.queued, 2 * KEEP as u64 + 1);
        assert_eq!(kept[KEEP - 1].counts.queued, 3 * KEEP as u64);
        assert!(kept.windows(2).all(|w| w[1].at_secs - w[0].at_secs == 5.0));
        // The ring never grew past what it keeps.
        assert!(h.ring().capacity() < 2 * KEEP, "{}", h.ring().capacity());
    }

    #[tokio::test]
    async fn a_failed_sample_is_left_out_and_the_next_taken() {
        let h = History::new(3, EVERY);
        let now = std::sync::Arc::new(Mutex::new(0.0));
        let ticks = Injected {
            times: vec![0.0, 5.0, 10.0].into_iter(),
            now: std::sync::Arc::clone(&now),
        };
        keep(&h, ticks, || {
            let at = *now.lock().unwrap();
            async move {
                anyhow::ensure!(at != 5.0, "database is locked");
                Ok(sample(at, 1, &[]))
            }
        })
        .await;
        let t: Vec<f64> = h.samples().iter().map(|s| s.at_secs).collect();
        assert_eq!(t, [0.0, 10.0]);
    }

    #[test]
    fn the_json_has_one_aligned_line_per_series_and_null_where_a_provider_was_missing() {
        let h = History::new(2, EVERY);
        let empty = h.to_json();
        assert_eq!(empty["t"], json!([]));
        assert_eq!(empty["counts"]["deferred"], json!([]), "{empty}");
        h.push(sample(1.0, 0, &[("old", 9.0)]));
        h.push(sample(6.0, 3, &[("sms", 2.0)]));
        h.push(sample(11.0, 4, &[("sms", 3.0), ("bulk", 1.5)]));
        let v = h.to_json();
        assert_eq!(v["every_secs"], 5.0);
        assert_eq!(v["keep"], 2);
        assert_eq!(v["t"], json!([6.0, 11.0]));
        assert_eq!(v["counts"]["queued"], json!([3, 4]));
        assert_eq!(v["counts"]["failed"], json!([0, 0]));
        assert_eq!(v["oldest_pending_age_secs"], json!([6.0, 11.0]));
        // "old" fell out of the ring with its only sample; order of first appearance.
        let names: Vec<&str> = v["providers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["sms", "bulk"]);
        assert_eq!(v["providers"][0]["pace_per_sec"], json!([2.0, 3.0]));
        assert_eq!(v["providers"][1]["pace_per_sec"], json!([null, 1.5]));
        assert_eq!(v["providers"][0]["ceiling_per_sec"], json!([null, null]));
        assert_eq!(
            v["providers"][1]["advertised_rate_per_sec"],
            json!([null, 10.0])
        );
    }

    #[test]
    fn unix_seconds_to_the_millisecond() {
        let t = UNIX_EPOCH + Duration::from_micros(1_700_000_000_123_456);
        assert_eq!(unix_secs(t), 1_700_000_000.123);
        assert_eq!(unix_secs(UNIX_EPOCH - Duration::from_secs(2)), -2.0);
    }
}
