//! `abide demo`, scaled down: it must finish, deliver everything once and report both sides.

#![allow(clippy::unwrap_used)]

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_demo_delivers_everything_and_reports_both_sides() {
    let out = run(abide(&[
        "demo",
        "--items",
        "200",
        "--rate",
        "400",
        "--workers",
        "20",
        "--quiet",
        "--json",
        "--seed",
        "7",
    ]))
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let r = report(&out);
    assert_eq!(r["provider_saw"]["accepted"], 200, "{r}");
    assert_eq!(r["provider_saw"]["duplicates"], 0, "{r}");
    assert_eq!(r["provider_saw"]["suspensions"], 0, "{r}");
    assert_eq!(r["run"]["delivered"], 200, "{r}");
    // The 503 burst happened and abide heard it (what the remote said, counted apart).
    let heard_503 = r["outbox"]["remote_counts"]["http_503"]
        .as_u64()
        .unwrap_or(0);
    assert!(heard_503 > 0, "{r}");
    assert_eq!(
        r["provider_saw"]["rejected_by_status"]["503"].as_u64(),
        Some(heard_503)
    );
}

/// A second demo on a kept outbox would silently send nothing: it is refused instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_used_demo_db_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_in(dir.path());
    let args = [
        "demo", "--items", "20", "--rate", "400", "--quiet", "--db", &db,
    ];
    let first = run(abide(&args)).await;
    assert_eq!(first.status.code(), Some(0), "{}", show(&first));
    let again = run(abide(&args)).await;
    assert_eq!(again.status.code(), Some(2), "{}", show(&again));
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("already holds an outbox"), "{}", show(&again));
}

/// The same over SMPP: the fake SMSC accepts each SMS once (repeats, by idempotency key,
/// only of submits whose answer the dropped connection lost), abide re-binds after the
/// drop, fails nothing, and maps every receipt back to its item.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_smpp_demo_delivers_everything_with_receipts() {
    let out = run(abide(&[
        "demo",
        "--transport",
        "smpp",
        "--items",
        "200",
        "--rate",
        "400",
        "--workers",
        "10",
        "--quiet",
        "--json",
        "--seed",
        "7",
    ]))
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let r = report(&out);
    let saw = &r["smsc_saw"];
    assert_eq!(saw["accepted"], 200, "{r}");
    assert_eq!(saw["content_repeats"], 0, "{r}");
    assert!(saw["repeats"].as_u64().unwrap() <= 10, "{r}");
    assert_eq!(saw["connections_dropped"]["drop_all"], 1, "{r}");
    assert_eq!(r["run"]["delivered"], 200, "{r}");
    assert_eq!(r["outbox"]["counts"]["failed"], 0, "{r}");
    assert_eq!(r["outbox"]["receipts"]["delivered"], 200, "{r}");
    assert_eq!(r["outbox"]["receipts"]["unmatched"], 0, "{r}");
    assert_eq!(r["providers"][0]["smpp"]["binds"], 2, "{r}");
}
