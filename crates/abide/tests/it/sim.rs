//! `abide sim` end to end: the built binary prints tables, JSON and plots, deterministically.

#![allow(clippy::unwrap_used, missing_docs)]

use std::process::{Command, Output};

use serde_json::Value;

fn sim(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_abide"))
        .arg("sim")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "abide sim {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn json_is_deterministic_and_ranks_abide_first() {
    let args = [
        "--scenario",
        "limit-appears",
        "--json",
        "--no-plot",
        "--seed",
        "5",
    ];
    let a = sim(&args).stdout;
    assert_eq!(a, sim(&args).stdout, "same seed, same numbers");
    let reports: Value = serde_json::from_slice(&a).unwrap();
    let results = reports[0]["results"].as_array().unwrap();
    let get = |name: &str| results.iter().find(|r| r["policy"] == name).unwrap();
    let abide = get("abide");
    let fixed = get("fixed-retries");
    assert_eq!(abide["suspensions"], 0);
    assert_eq!(abide["lost"], 0);
    assert!(fixed["suspensions"].as_u64().unwrap() > 0);
    let per_req = |r: &Value| r["throttles"].as_f64().unwrap() / r["logical"].as_f64().unwrap();
    assert!(per_req(abide) < per_req(fixed));
}

#[test]
fn all_writes_a_table_and_a_plot_per_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let out = sim(&["--all", "--out", dir.path().to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    for name in [
        "limit-appears",
        "http-date-switch",
        "retry-after-zero",
        "retry-after-huge",
        "queue-throttling",
        "limit-changes",
        "limit-changes-blind",
        "gcra-no-headers",
    ] {
        assert!(text.contains(&format!("== {name} (seed 42) ==")), "{text}");
        let svg = std::fs::read_to_string(dir.path().join(format!("{name}.svg"))).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("abide"),
            "{name}.svg"
        );
    }
}

#[test]
fn help_explains_scenarios_and_policies() {
    let text = String::from_utf8(sim(&["--help"]).stdout).unwrap();
    for word in [
        "limit-changes",
        "retry-after-huge",
        "integer-only",
        "fixed-retries",
        "429/req",
    ] {
        assert!(text.contains(word), "--help lacks {word}");
    }
}

#[test]
fn unknown_scenario_is_an_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_abide"))
        .args(["sim", "--scenario", "nope"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown scenario"));
}
