//! `abide serve` end to end: bearer auth, batch enqueue validated whole, delivery by the
//! in-process dispatcher, item view, stats, requeue, metrics, graceful shutdown.

#![allow(clippy::unwrap_used)]

use crate::support::*;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_enqueues_delivers_and_reports() {
    const N: usize = 200;
    let p = start_provider(provider_config(500, 50)).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "providers.toml",
        &provider_toml("sms", &p.url(), "rate_hint = 500.0\nconcurrency = 20", ""),
    );
    let db = db_in(dir.path());
    let mut cmd = abide(&[
        "serve",
        "--config",
        cfg.to_str().unwrap(),
        "--db",
        &db,
        "--listen",
        "127.0.0.1:0",
        "--token-env",
        "ABIDE_TEST_API_TOKEN",
    ]);
    cmd.env("ABIDE_TEST_API_TOKEN", "s3cret-token");
    let mut child = start(cmd);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(RUN_BOUND, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let base = first.strip_prefix("listening on ").unwrap().to_owned();
    let c = reqwest::Client::new();
    let auth = |r: reqwest::RequestBuilder| r.bearer_auth("s3cret-token");

    // No token, wrong token: 401 and nothing stored.
    let r = c
        .post(format!("{base}/v1/items"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = c
        .get(format!("{base}/v1/stats"))
        .bearer_auth("s3cret-tokem")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);

    // POST a batch, return the status and the JSON answer.
    let post = |body: Value| {
        let r = auth(c.post(format!("{base}/v1/items")).json(&body)).send();
        async move {
            let r = r.await.unwrap();
            (r.status(), r.json::<Value>().await.unwrap())
        }
    };
    // A batch with one bad item: 422 naming its index, nothing enqueued.
    let (status, v) = post(json!([
        {"provider": "sms", "path": "/v1/messages", "body": {"to": "+1"}},
        {"provider": "sms", "path": "https://evil.example/x"},
    ]))
    .await;
    assert_eq!(status, 422);
    assert_eq!(v["errors"][0]["index"], 1, "{v}");
    // A repeated key (serde_json's `Value` would keep the last): refused as `send` refuses
    // it, naming where, in a batch and alone; the top-level fields likewise.
    let raw_post = |body: &'static str| {
        let r = auth(c.post(format!("{base}/v1/items")))
            .header("content-type", "application/json")
            .body(body)
            .send();
        async move {
            let r = r.await.unwrap();
            (r.status(), r.json::<Value>().await.unwrap())
        }
    };
    for (body, index, says) in [
        (
            r#"[{"provider":"sms","path":"/v1/messages","body":{"to":"+1"}},
                {"provider":"sms","path":"/v1/messages","body":{"a":[{"b":1,"b":2}]}}]"#,
            1,
            "\"body.a[0].b\" given twice",
        ),
        (
            r#"{"provider":"sms","path":"/v1/messages","body":{"to":"+1","to":"+2"}}"#,
            0,
            "\"body.to\" given twice",
        ),
        (
            r#"{"provider":"nope","provider":"sms","path":"/v1/messages"}"#,
            0,
            "duplicate field `provider`",
        ),
        (
            r#"{"provider":"sms","path":"/v1/messages","headers":{"X-Tag":"a","X-Tag":"b"}}"#,
            0,
            "given twice",
        ),
    ] {
        let (status, v) = raw_post(body).await;
        assert_eq!(status, 422, "{body}: {v}");
        assert_eq!(v["errors"][0]["index"], index, "{v}");
        let message = v["errors"][0]["message"].as_str().unwrap();
        assert!(message.contains(says), "{body}: {v}");
    }
    // One idempotency key on two different messages: the second would never be sent.
    let (status, v) = post(json!([
        {"provider": "sms", "path": "/v1/messages", "body": {"to": "+1"}, "idempotency_key": "k"},
        {"provider": "sms", "path": "/v1/messages", "body": {"to": "+2"}, "idempotency_key": "k"},
    ]))
    .await;
    assert_eq!(status, 422);
    assert_eq!(v["errors"][0]["index"], 1, "{v}");
    assert!(
        v["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("already used by index 0"),
        "{v}"
    );

    let items: Vec<Value> = (0..N)
        .map(|i| {
            json!({"provider": "sms", "path": "/v1/messages", "body": {"i": i},
                        "idempotency_key": format!("serve-{i}")})
        })
        .collect();
    let (status, v) = post(Value::Array(items.clone())).await;
    assert_eq!(status, 202);
    let id = v["items"][0]["id"].as_str().unwrap().to_owned();
    // Re-posting is a no-op: same ids, created false.
    let (_, again) = post(items[0].clone()).await;
    assert_eq!(again["created"], false, "{again}");
    assert_eq!(again["id"], id.as_str());
    // The same key with a different message, in a batch with a new item: 422 naming the
    // key and the stored item (draft-ietf-httpapi-idempotency-key-header §2.7), and
    // nothing of the request enqueued, not even the new item.
    let mut changed = items[0].clone();
    changed["body"] = json!({"i": "a different message"});
    let fresh = json!({"provider": "sms", "path": "/v1/messages", "body": {"i": -1},
                       "idempotency_key": "serve-fresh"});
    let (status, v) = post(json!([fresh, changed])).await;
    assert_eq!(status, 422, "{v}");
    assert_eq!(v["error"], "idempotency_key_conflict", "{v}");
    assert_eq!(v["idempotency_key"], "serve-0", "{v}");
    assert_eq!(v["existing_id"], id.as_str(), "{v}");
    assert_eq!(v["index"], 1, "{v}");
    let r = auth(c.get(format!("{base}/v1/stats")))
        .send()
        .await
        .unwrap();
    let counts: Value = r.json::<Value>().await.unwrap()["counts"].clone();
    let total: u64 = counts
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(
        total, N as u64,
        "the refused request enqueued something: {counts}"
    );

    wait_until("the provider to accept every item", || {
        p.stats().accepted >= N as u64
    })
    .await;
    // The results are committed in batches after the provider's answers: wait for the
    // commit with the same generous bound as every wait here (200 x 20 ms, 4 s, was short
    // of it on a loaded machine).
    let mut stats = Value::Null;
    for _ in 0..RUN_BOUND.as_millis() / 20 {
        let r = auth(c.get(format!("{base}/v1/stats")))
            .send()
            .await
            .unwrap();
        stats = r.json().await.unwrap();
        if stats["counts"]["submitted"] == N as u64 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(stats["counts"]["submitted"], N as u64, "{stats}");
    assert_eq!(stats["remote_counts"]["http_202"], N as u64, "{stats}");

    let r = auth(c.get(format!("{base}/v1/items/{id}")))
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["item"]["state"], "SUBMITTED", "{v}");
    assert_eq!(v["attempts"][0]["remote"], "http_202", "{v}");
    assert_eq!(v["attempts"][0]["idempotency_key"], "serve-0", "{v}");
    // Times as RFC 3339 in UTC, durations in milliseconds.
    for t in [&v["item"]["created_at"], &v["attempts"][0]["at"]] {
        let t = t.as_str().unwrap_or_else(|| panic!("not a string: {v}"));
        assert!(
            t.len() >= 20 && t.ends_with('Z') && &t[10..11] == "T",
            "{t}"
        );
    }
    assert!(v["attempts"][0]["latency_ms"].is_number(), "{v}");
    let r = auth(c.get(format!("{base}/v1/items/nope")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);

    // GET /v1/items?state=..: every SUBMITTED item once, in pages of 64, newest first.
    let mut seen = std::collections::BTreeSet::new();
    let mut offset = Some(0u64);
    let mut pages = 0;
    while let Some(o) = offset {
        let r = auth(c.get(format!(
            "{base}/v1/items?state=submitted&provider=sms&limit=64&offset={o}"
        )))
        .send()
        .await
        .unwrap();
        assert_eq!(r.status(), 200);
        let v: Value = r.json().await.unwrap();
        let rows = v["items"].as_array().unwrap();
        assert!(rows.len() <= 64, "{v}");
        for row in rows {
            assert_eq!(row["state"], "SUBMITTED", "{row}");
            assert!(row.get("body").is_none(), "no request data: {row}");
            assert!(seen.insert(row["id"].as_str().unwrap().to_owned()), "{row}");
        }
        offset = v["next_offset"].as_u64();
        pages += 1;
        assert!(pages <= 4, "{v}");
    }
    assert_eq!((seen.len(), pages), (N, 4));
    let r = auth(c.get(format!("{base}/v1/items?state=failed")))
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["items"], json!([]), "{v}");
    assert_eq!(v["next_offset"], Value::Null, "{v}");
    for bad in [
        "state=bogus",
        "state=failed&limit=0",
        "state=failed&limit=1001",
        "stat=failed",
        "state=failed&offset=9950&limit=100",
    ] {
        let r = auth(c.get(format!("{base}/v1/items?{bad}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{bad}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"], "invalid_query", "{bad}: {v}");
    }
    let r = c
        .get(format!("{base}/v1/items?state=failed"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // The description of the API is open, and it is OpenAPI 3.1.
    let r = c
        .get(format!("{base}/v1/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["openapi"], "3.1.0", "{v}");
    // No such route, or not this method: a body that says so and points at the list.
    let r = c.get(format!("{base}/v1/itemz")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"], "not_found", "{v}");
    assert!(
        v["message"].as_str().unwrap().contains("GET \"/v1/itemz\""),
        "{v}"
    );
    // A method of any length is accepted by hyper; the answer does not reflect it whole.
    let long = reqwest::Method::from_bytes("A".repeat(5000).as_bytes()).unwrap();
    let r = c
        .request(long, format!("{base}/nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert!(r.text().await.unwrap().len() < 1000);
    let r = c.delete(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 405);
    assert!(r.headers()["allow"].to_str().unwrap().contains("GET"));
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"], "method_not_allowed", "{v}");

    let r = auth(c.post(format!("{base}/v1/requeue")).json(&json!({})))
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["requeued"], 0, "nothing is deferred: {v}");
    // As `abide requeue` exits 1 for them: a provider no item targets and ids none of
    // which is in the state asked for are 404s naming what was wrong.
    for (body, code) in [
        (json!({"provider": "nope"}), "unknown_provider"),
        (json!({"ids": ["nope"]}), "no_such_items"),
        (json!({"ids": ["nope"], "failed": true}), "no_such_items"),
    ] {
        let r = auth(c.post(format!("{base}/v1/requeue")).json(&body))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{body}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"], code, "{body}: {v}");
    }
    // FAILED items too, as `abide requeue --failed` (none failed here).
    let r = auth(
        c.post(format!("{base}/v1/requeue"))
            .json(&json!({"failed": true})),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["requeued"], 0, "{v}");
    // The id list is bounded like a batch (each id is a statement in one write).
    let ids: Vec<String> = (0..10_001).map(|i| format!("id-{i}")).collect();
    let r = auth(
        c.post(format!("{base}/v1/requeue"))
            .json(&json!({ "ids": ids })),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), 413, "{:?}", r.text().await);
    // A body over the limit gets JSON naming the limit, not axum's plain text.
    // On a client of its own: the server answers before reading the body and drops the
    // connection, which a pooled connection of `c` would then hit (IncompleteMessage).
    let big = vec![b' '; 17 << 20];
    let lone = reqwest::Client::new();
    let r = auth(lone.post(format!("{base}/v1/items")).body(big))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"], "body_too_large", "{v}");
    assert!(
        v["message"].as_str().unwrap().contains("16777216 bytes"),
        "{v}"
    );

    let m = c.get(format!("{base}/metrics")).send().await.unwrap();
    assert_eq!(m.status(), 200);
    let text = m.text().await.unwrap();
    assert!(
        text.contains("abide_items{state=\"SUBMITTED\"} 200"),
        "{text}"
    );
    assert!(!text.contains("s3cret"));
    // Prometheus conventions (issue 14): one counter per decision, units in gauge names.
    // What this process decided is labelled by its node id (issue 15).
    assert!(
        text.contains("abide_dispatcher_delivered_total{provider=\"sms\",node=\"abide-"),
        "{text}"
    );
    assert!(text.contains("abide_provider_pace_requests_per_second{provider=\"sms\",node=\"abide-"));
    assert!(text.contains("abide_remote_responses_total{remote=\"http_429\"} 0"));
    assert!(
        !text.contains("abide_dispatcher_total{"),
        "old name still exported"
    );

    // The dashboard: page and data open (read-only), no secret in either; requeue needs
    // the token (checked above).
    let page = c.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .contains("frame-ancestors 'none'"));
    let html = page.text().await.unwrap();
    assert!(
        html.contains(r#"<td id="count-submitted" data-state="submitted">200</td>"#),
        "{html}"
    );
    let js = c
        .get(format!("{base}/assets/uplot.min.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(js.status(), 200);
    assert!(js.text().await.unwrap().contains("uPlot"));
    let d: Value = c
        .get(format!("{base}/dashboard/state.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(d["counts"]["submitted"], 200, "{d}");
    assert_eq!(d["providers"][0]["name"], "sms", "{d}");
    assert!(d["recent"].as_array().unwrap().is_empty(), "{d}");
    assert!(!d.to_string().contains("s3cret"));

    // The charts' history is kept by serve: a client that never polled before (a new tab, a
    // reload) gets the samples taken since the start, oldest first, up to the delivered 200.
    let fresh = reqwest::Client::new();
    let history = || async {
        let r = fresh
            .get(format!("{base}/dashboard/history.json"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        r.json::<Value>().await.unwrap()
    };
    let delivered_in = |h: &Value| {
        h["counts"]["submitted"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == 200)
    };
    let mut h = history().await;
    // Bounded wait for the next sample (one every 5 s), not a timing claim.
    let deadline = tokio::time::Instant::now() + RUN_BOUND;
    while !delivered_in(&h) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no sample with the 200 delivered: {h}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        h = history().await;
    }
    assert_eq!(h["every_secs"], 5.0, "{h}");
    assert_eq!(h["keep"], 720, "{h}");
    let t: Vec<f64> = h["t"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert!(
        t.len() >= 2,
        "the first sample at the start, one later: {h}"
    );
    assert!(t.windows(2).all(|w| w[0] < w[1]), "oldest first: {h}");
    assert_eq!(h["counts"]["queued"].as_array().unwrap().len(), t.len());
    assert_eq!(h["providers"][0]["name"], "sms", "{h}");
    let pace = h["providers"][0]["pace_per_sec"].as_array().unwrap();
    assert_eq!(pace.len(), t.len(), "{h}");
    assert!(
        pace.iter().any(|v| v.as_f64().is_some_and(|x| x > 0.0)),
        "{h}"
    );
    assert!(!h.to_string().contains("s3cret"));

    assert_eq!(p.stats().duplicates, 0);
    // SIGTERM: graceful stop (the client still holds keep-alive connections), exit 0.
    sigterm(&child);
    let status = tokio::time::timeout(RUN_BOUND, child.wait())
        .await
        .expect("serve did not stop on SIGTERM")
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let st = run(abide(&["status", "--db", &db, "--json"])).await;
    assert_eq!(report(&st)["counts"]["in_flight"], 0, "{}", show(&st));
}

/// The token itself given to `--token-env` (which takes a variable's name): refused,
/// exit 2, and never repeated (before: "export sk_live_...=$(openssl ...)").
#[tokio::test]
async fn a_token_given_as_the_variable_name_is_not_echoed() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "providers.toml",
        &provider_toml("sms", "http://127.0.0.1:9", "", ""),
    );
    let db = db_in(dir.path());
    let secret = "sk_live_4f9a8b7c6d5e";
    let o = run(abide(&[
        "serve",
        "--config",
        cfg.to_str().unwrap(),
        "--db",
        &db,
        "--token-env",
        secret,
    ]))
    .await;
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("takes the NAME of an environment variable"),
        "{err}"
    );
    assert!(!err.contains(secret), "{err}");
}
