//! [`ScheduleEntry`]: a behaviour change and when it happens, from `FACET=VALUE[@WHEN]` or
//! TOML.

use std::str::FromStr;
use std::time::Duration;

use serde::Deserialize;

use super::{
    parse_duration, Behaviour, ReceiptState, RetryAfterStyle, Spread, ThrottleStyle, MAX_SLOW_MS,
};
use crate::Error;

/// A behaviour change and when it happens. Written on the command line as
/// `FACET=VALUE[@WHEN]` (see [`ScheduleEntry::from_str`]) or in TOML as
/// `[[schedule]] at_secs = 60, retry_after = "imf-fixdate"`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScheduleEntry {
    /// Applies once this many seconds have passed since the provider started.
    pub at_secs: Option<f64>,
    /// Applies from the N-th message request on (1-based, counting every request).
    pub at_request: Option<u64>,
    /// New `Retry-After` form.
    pub retry_after: Option<RetryAfterStyle>,
    /// New throttle style.
    pub throttle: Option<ThrottleStyle>,
    /// New SMPP status.
    pub smpp_status: Option<u32>,
    /// New 503 fraction.
    pub fail_503: Option<f64>,
    /// New fraction of requests throttled whatever the rate.
    pub throttle_fraction: Option<f64>,
    /// How that fraction is spread (evenly or at random).
    pub throttle_spread: Option<Spread>,
    /// New seed of the random spread.
    pub throttle_seed: Option<u64>,
    /// Grace on or off.
    pub grace: Option<bool>,
    /// SMPP binds refused (`true`) or accepted again (`false`).
    pub bind_refusal: Option<bool>,
    /// SMPP: close each connection after its N-th PDU (0 = off).
    pub drop_after_pdus: Option<u64>,
    /// SMPP: delay before each `submit_sm_resp`, in milliseconds.
    pub slow_ms: Option<u64>,
    /// SMPP: fraction of `submit_sm` answered with the throttle status before any limit.
    pub congestion: Option<f64>,
    /// SMPP: the outcome receipts of messages accepted from then on report.
    pub receipt_state: Option<ReceiptState>,
    /// SMPP: close every open connection once, when the trigger is reached (an event, not
    /// a state: needs `at_secs` or `at_request`).
    pub drop_connections: Option<bool>,
}

impl ScheduleEntry {
    /// Whether the trigger is reached `elapsed` after start at request number `request`.
    pub fn reached(&self, elapsed: Duration, request: u64) -> bool {
        self.at_secs.is_none_or(|s| elapsed.as_secs_f64() >= s)
            && self.at_request.is_none_or(|n| request >= n)
    }

    /// Apply the changes to `b`.
    pub fn apply(&self, b: &mut Behaviour) {
        if let Some(v) = self.retry_after {
            b.retry_after = v;
        }
        if let Some(v) = self.throttle {
            b.throttle = v;
        }
        if let Some(v) = self.smpp_status {
            b.smpp_status = v;
        }
        if let Some(v) = self.fail_503 {
            b.fail_503 = v;
        }
        if let Some(v) = self.throttle_fraction {
            b.throttle_fraction = v;
        }
        if let Some(v) = self.throttle_spread {
            b.throttle_spread = v;
        }
        if let Some(v) = self.throttle_seed {
            b.throttle_seed = v;
        }
        if let Some(v) = self.grace {
            b.grace = v;
        }
        if let Some(v) = self.bind_refusal {
            b.bind_refusal = v;
        }
        if let Some(v) = self.drop_after_pdus {
            b.drop_after_pdus = v;
        }
        if let Some(v) = self.slow_ms {
            b.slow_ms = v;
        }
        if let Some(v) = self.congestion {
            b.congestion = v;
        }
        if let Some(v) = self.receipt_state {
            b.receipt_state = v;
        }
    }
}

impl FromStr for ScheduleEntry {
    type Err = Error;

    /// `FACET=VALUE[@WHEN]`. Facets: `retry-after`, `throttle`, `smpp-status`, `fail-503`,
    /// `throttle-fraction` (`F`, `random:F` or `random:F:SEED`: a fraction refused whatever
    /// the rate, evenly spread or at random; HTTP and SMPP), `grace`
    /// (`on`/`off`); SMPP: `throttle=smpp-0x58|smpp-0x14` (sets `smpp-status`),
    /// `bind` (`refuse`/`accept`), `drop-after` (N PDUs or `off`), `drop` (`all`, an event),
    /// `slow` (a duration), `congestion` (a fraction), `receipt` (`delivered`,
    /// `undeliverable`, `expired`, `rejected`). WHEN: a duration since start (`60s`,
    /// `500ms`, `2m`, `1h`) or `#N` (from the N-th message request on: HTTP requests for the
    /// HTTP listener, `submit_sm` PDUs for the SMPP one). Without `@WHEN` it applies from the
    /// start.
    fn from_str(s: &str) -> Result<Self, Error> {
        let (set, when) = match s.rsplit_once('@') {
            Some((a, b)) => (a, Some(b)),
            None => (s, None),
        };
        let mut e = ScheduleEntry::default();
        match when {
            Some(w) if w.starts_with('#') => {
                e.at_request = Some(w[1..].parse().map_err(|_| {
                    Error::Config(format!("behaviour {s:?}: bad request number {w:?}"))
                })?);
            }
            Some(w) => e.at_secs = Some(parse_duration(w)?.as_secs_f64()),
            None => {}
        }
        let (facet, value) = set.split_once('=').ok_or_else(|| {
            Error::Config(format!("behaviour {s:?}: expected FACET=VALUE[@WHEN]"))
        })?;
        match facet.trim() {
            "retry-after" => e.retry_after = Some(value.parse()?),
            "throttle" => match value.strip_prefix("smpp-0x") {
                Some(hex) => {
                    e.smpp_status = Some(u32::from_str_radix(hex, 16).map_err(|_| {
                        Error::Config(format!(
                            "behaviour {s:?}: throttle {value:?}: expected smpp-0x58 or smpp-0x14 (a hex command_status)"
                        ))
                    })?);
                }
                None => e.throttle = Some(value.parse()?),
            },
            "smpp-status" => {
                e.smpp_status = Some(value.parse().map_err(|_| {
                    Error::Config(format!("behaviour {s:?}: smpp-status must be an integer"))
                })?);
            }
            "fail-503" => e.fail_503 = Some(fraction(s, "fail-503", value)?),
            "throttle-fraction" => {
                let (spread, rest) = match value.strip_prefix("random:") {
                    Some(rest) => (Spread::Random, rest),
                    None => (Spread::Even, value),
                };
                let (f, seed) = match rest.split_once(':') {
                    Some((f, seed)) if spread == Spread::Random => (f, Some(seed)),
                    _ => (rest, None),
                };
                e.throttle_fraction = Some(fraction(s, "throttle-fraction", f)?);
                e.throttle_spread = Some(spread);
                if let Some(seed) = seed {
                    e.throttle_seed = Some(seed.parse().map_err(|_| {
                        Error::Config(format!(
                            "behaviour {s:?}: the seed of throttle-fraction=random:F:SEED must be a whole number"
                        ))
                    })?);
                }
            }
            "congestion" => e.congestion = Some(fraction(s, "congestion", value)?),
            "receipt" => e.receipt_state = Some(value.parse()?),
            "bind" => {
                e.bind_refusal = Some(match value {
                    "refuse" => true,
                    "accept" => false,
                    _ => return Err(Error::Config(format!("behaviour {s:?}: bind is refuse or accept"))),
                });
            }
            "drop-after" => {
                e.drop_after_pdus = Some(match value {
                    "off" => 0,
                    n => n.parse().map_err(|_| {
                        Error::Config(format!("behaviour {s:?}: drop-after is a number of PDUs or off"))
                    })?,
                });
            }
            "drop" => {
                if value != "all" {
                    return Err(Error::Config(format!("behaviour {s:?}: drop takes all (drop=all@WHEN)")));
                }
                if when.is_none() {
                    return Err(Error::Config(format!("behaviour {s:?}: drop=all needs @WHEN")));
                }
                e.drop_connections = Some(true);
            }
            "slow" => {
                let ms = u64::try_from(parse_duration(value)?.as_millis()).unwrap_or(u64::MAX);
                if ms > MAX_SLOW_MS {
                    return Err(Error::Config(format!("behaviour {s:?}: slow is at most 60s")));
                }
                e.slow_ms = Some(ms);
            }
            "grace" => {
                e.grace = Some(match value {
                    "on" | "true" => true,
                    "off" | "false" => false,
                    _ => return Err(Error::Config(format!("behaviour {s:?}: grace is on or off"))),
                });
            }
            other => {
                return Err(Error::Config(format!(
                    "behaviour {s:?}: unknown facet {other:?} (retry-after, throttle, smpp-status, fail-503, throttle-fraction, grace, bind, drop-after, drop, slow, congestion, receipt)"
                )))
            }
        }
        Ok(e)
    }
}

/// A fraction within 0..=1 for facet `name` of behaviour `s`.
fn fraction(s: &str, name: &str, value: &str) -> Result<f64, Error> {
    let f: f64 = value
        .parse()
        .map_err(|_| Error::Config(format!("behaviour {s:?}: {name} must be a fraction")))?;
    if !(0.0..=1.0).contains(&f) {
        return Err(Error::Config(format!(
            "behaviour {s:?}: {name} outside 0..=1"
        )));
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ProviderConfig;

    #[test]
    fn schedule_syntax() {
        let e: ScheduleEntry = "retry-after=http-date@60s".parse().unwrap();
        assert_eq!(e.retry_after, Some(RetryAfterStyle::ImfFixdate));
        assert_eq!(e.at_secs, Some(60.0));
        let e: ScheduleEntry = "grace=on@#5".parse().unwrap();
        assert_eq!((e.grace, e.at_request), (Some(true), Some(5)));
        let e: ScheduleEntry = "throttle=403".parse().unwrap();
        assert!(e.reached(Duration::ZERO, 1));
        assert!("retry-after=sometimes".parse::<ScheduleEntry>().is_err());
        assert!("fail-503=2".parse::<ScheduleEntry>().is_err());
        let e: ScheduleEntry = "throttle-fraction=0.05@10s".parse().unwrap();
        assert_eq!((e.throttle_fraction, e.at_secs), (Some(0.05), Some(10.0)));
        assert_eq!(e.throttle_spread, Some(Spread::Even));
        assert!("throttle-fraction=-0.1".parse::<ScheduleEntry>().is_err());
        let e: ScheduleEntry = "throttle-fraction=random:0.05".parse().unwrap();
        assert_eq!(
            (e.throttle_fraction, e.throttle_spread, e.throttle_seed),
            (Some(0.05), Some(Spread::Random), None)
        );
        let e: ScheduleEntry = "throttle-fraction=random:0.05:7@#100".parse().unwrap();
        assert_eq!(
            (e.throttle_spread, e.throttle_seed, e.at_request),
            (Some(Spread::Random), Some(7), Some(100))
        );
        let mut b = Behaviour::default();
        e.apply(&mut b);
        assert_eq!((b.throttle_fraction, b.throttle_seed), (0.05, 7));
        for bad in [
            "throttle-fraction=random:x",
            "throttle-fraction=random:0.1:-3",
            "throttle-fraction=0.1:3",
        ] {
            assert!(bad.parse::<ScheduleEntry>().is_err(), "{bad}");
        }
        assert!("colour=red".parse::<ScheduleEntry>().is_err());
    }

    #[test]
    fn smpp_schedule_syntax() {
        let e: ScheduleEntry = "throttle=smpp-0x14@#100".parse().unwrap();
        assert_eq!(
            (e.smpp_status, e.throttle, e.at_request),
            (Some(0x14), None, Some(100))
        );
        let e: ScheduleEntry = "bind=refuse@10s".parse().unwrap();
        assert_eq!((e.bind_refusal, e.at_secs), (Some(true), Some(10.0)));
        let e: ScheduleEntry = "drop-after=500".parse().unwrap();
        assert_eq!(e.drop_after_pdus, Some(500));
        assert_eq!(
            "drop-after=off"
                .parse::<ScheduleEntry>()
                .unwrap()
                .drop_after_pdus,
            Some(0)
        );
        let e: ScheduleEntry = "drop=all@30s".parse().unwrap();
        assert_eq!(e.drop_connections, Some(true));
        let e: ScheduleEntry = "slow=250ms@#10".parse().unwrap();
        assert_eq!(e.slow_ms, Some(250));
        let e: ScheduleEntry = "receipt=expired@#3".parse().unwrap();
        assert_eq!(e.receipt_state, Some(ReceiptState::Expired));
        let e: ScheduleEntry = "congestion=0.5".parse().unwrap();
        let mut b = Behaviour::default();
        e.apply(&mut b);
        assert_eq!(b.congestion, 0.5);
        for (bad, token) in [
            ("drop=all", "@WHEN"),
            ("drop=some@1s", "some"),
            ("slow=2m", "60s"),
            ("throttle=smpp-0xZZ", "smpp-0xZZ"),
            ("bind=maybe", "refuse"),
            ("receipt=lost", "lost"),
            ("congestion=2", "congestion"),
            ("wobble=1", "wobble"),
        ] {
            let e = bad.parse::<ScheduleEntry>().unwrap_err().to_string();
            assert!(e.contains(token), "{bad}: {e}");
        }
        let c = ProviderConfig::from_toml_str("[[schedule]]\ndrop_connections = true\n");
        let e = c.unwrap().check_values().unwrap_err().to_string();
        assert!(e.contains("drop_connections"), "{e}");
    }
}
