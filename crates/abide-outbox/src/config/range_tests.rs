//! Every numeric key of the providers file has one documented range (abide-core's
//! [`abide_core::session::limits`], the transport's own): every value outside it is refused
//! naming the key, every value inside is accepted. HTTP providers' keys and an SMPP
//! provider's own (`transport = "smpp"`) alike.

use proptest::prelude::*;

use crate::{Config, Error};

/// Where a key is written: beside `name`, in a `[provider.<table>]`, or beside the name
/// of an SMPP provider.
#[derive(Debug, Clone, Copy)]
enum At {
    Top,
    Table(&'static str),
    Smpp,
}

#[derive(Debug, Clone, Copy)]
enum Range {
    Int(i64, i64),
    Float(f64, f64),
    /// One of these integers (a code point of a spec's table), nothing between.
    OneOf(&'static [i64]),
}

/// The numbering plan indicators of SMPP 3.4 §5.2.6.
const NPI: &[i64] = &[0, 1, 3, 4, 6, 8, 9, 10, 14, 18];

/// (key as written, where, its range in the file's units, keys set beside it so that a
/// value in range is not refused for another's sake).
const FIELDS: &[(&str, At, Range, &str)] = &[
    ("rate_hint", At::Top, Range::Float(1.0 / 3600.0, 1e6), ""),
    ("concurrency", At::Top, Range::Int(1, 1024), ""),
    ("timeout_secs", At::Top, Range::Float(0.001, 600.0), ""),
    (
        "max_attempts",
        At::Table("retry"),
        Range::Int(1, 10_000),
        "",
    ),
    (
        "unknown_max_attempts",
        At::Table("retry"),
        Range::Int(1, 10_000),
        "",
    ),
    (
        "max_age_secs",
        At::Table("retry"),
        Range::Int(1, 365 * 86_400),
        "",
    ),
    (
        "backoff_base_ms",
        At::Table("retry"),
        Range::Int(1, 3_600_000),
        "backoff_cap_secs = 86400",
    ),
    (
        "backoff_cap_secs",
        At::Table("retry"),
        Range::Int(1, 86_400),
        "backoff_base_ms = 1",
    ),
    ("ttl_secs", At::Table("budget"), Range::Int(1, 60), ""),
    (
        "min_per_sec",
        At::Table("budget"),
        Range::Int(0, 100_000),
        "",
    ),
    (
        "retry_ratio",
        At::Table("budget"),
        Range::Float(0.0, 1000.0),
        "",
    ),
    ("headroom", At::Table("pacer"), Range::Float(0.01, 1.0), ""),
    (
        "throttle_pause_ms",
        At::Table("pacer"),
        Range::Int(100, 600_000),
        "max_throttle_pause_secs = 600",
    ),
    (
        "max_throttle_pause_secs",
        At::Table("pacer"),
        Range::Int(1, 600),
        "throttle_pause_ms = 100",
    ),
    (
        "after_pending_secs",
        At::Table("failover"),
        Range::Int(1, 365 * 86_400),
        "to = \"b\"",
    ),
    // SMPP 3.4: the window of outstanding submit_sm, the address types (§5.2.5, §5.2.6),
    // the link timers in seconds, the longest text in octets.
    ("window", At::Smpp, Range::Int(1, 1024), ""),
    ("source_addr_ton", At::Smpp, Range::Int(0, 6), ""),
    ("dest_addr_ton", At::Smpp, Range::Int(0, 6), ""),
    ("source_addr_npi", At::Smpp, Range::OneOf(NPI), ""),
    ("dest_addr_npi", At::Smpp, Range::OneOf(NPI), ""),
    (
        "enquire_link_interval",
        At::Smpp,
        Range::Float(1.0, 3600.0),
        "",
    ),
    ("pdu_timeout", At::Smpp, Range::Float(0.01, 290.0), ""),
    ("max_text_octets", At::Smpp, Range::Int(1, 64_000), ""),
];

/// A value as TOML writes it.
fn toml_float(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        format!("{v:e}")
    }
}

/// The providers file with `key = value` for field `i`.
fn file(i: usize, value: &str) -> String {
    let (key, at, _, beside) = FIELDS[i];
    let line = format!("{key} = {value}\n{beside}\n");
    let (top, table) = match at {
        At::Top | At::Smpp => (line, String::new()),
        At::Table(t) => (String::new(), format!("[provider.{t}]\n{line}")),
    };
    let transport = match at {
        At::Smpp => "transport = \"smpp\"\naddress = \"127.0.0.1:2775\"\nsystem_id = \"x\"",
        _ => "base_url = \"https://api.example\"",
    };
    format!(
        "[[provider]]\nname = \"p\"\n{transport}\n{top}{table}\n\
         [[provider]]\nname = \"b\"\nbase_url = \"https://b.example\"\n"
    )
}

/// The field name an error of field `i` must carry.
fn field(i: usize) -> String {
    match FIELDS[i] {
        (key, At::Top | At::Smpp, ..) => key.to_owned(),
        (key, At::Table(t), ..) => format!("{t}.{key}"),
    }
}

fn outside(r: Range) -> BoxedStrategy<String> {
    match r {
        Range::Int(lo, hi) => prop_oneof![
            (i64::MIN..lo).prop_map(|v| v.to_string()),
            ((hi + 1)..=i64::MAX).prop_map(|v| v.to_string()),
            Just((lo - 1).to_string()),
            Just((hi + 1).to_string()),
        ]
        .boxed(),
        Range::Float(lo, hi) => prop_oneof![
            (-1e300..lo).prop_map(toml_float),
            (hi..1e300)
                .prop_filter("above", move |v| *v > hi)
                .prop_map(toml_float),
            Just("nan".to_owned()),
            Just("inf".to_owned()),
            Just("-inf".to_owned()),
        ]
        .boxed(),
        Range::OneOf(set) => prop_oneof![
            any::<i64>().prop_filter("not in the set", move |v| !set.contains(v)),
            (-1i64..=256).prop_filter("not in the set", move |v| !set.contains(v)),
        ]
        .prop_map(|v| v.to_string())
        .boxed(),
    }
}

fn inside(r: Range) -> BoxedStrategy<String> {
    match r {
        Range::Int(lo, hi) => prop_oneof![
            (lo..=hi).prop_map(|v| v.to_string()),
            Just(lo.to_string()),
            Just(hi.to_string()),
        ]
        .boxed(),
        Range::Float(lo, hi) => prop_oneof![
            (lo..=hi).prop_map(toml_float),
            Just(toml_float(lo)),
            Just(toml_float(hi)),
        ]
        .boxed(),
        Range::OneOf(set) => proptest::sample::select(set)
            .prop_map(|v| v.to_string())
            .boxed(),
    }
}

fn any_field() -> impl Strategy<Value = (usize, String, String)> {
    (0..FIELDS.len()).prop_flat_map(|i| {
        let r = FIELDS[i].2;
        (Just(i), outside(r), inside(r))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_value_outside_its_range_is_refused_naming_the_key(
        (i, bad, good) in any_field()
    ) {
        match Config::from_toml_str(&file(i, &bad)) {
            Err(Error::Config { provider, field: f, message }) => {
                prop_assert_eq!(provider.as_deref(), Some("p"));
                prop_assert_eq!(&f, &field(i), "{} = {}: {}", f, bad, message);
            }
            other => prop_assert!(false, "{} = {}: {:?}", field(i), bad, other),
        }
        let ok = Config::from_toml_str(&file(i, &good));
        prop_assert!(ok.is_ok(), "{} = {}: {:?}", field(i), good, ok);
    }
}
