#![allow(clippy::unwrap_used)]

use std::cell::RefCell;
use std::io::Write as _;

use abide_outbox::{SqliteStore, Store as _};

use super::*;

fn any(item: &NewItem) -> Result<(), String> {
    item.validate().map_err(|e| e.to_string())
}

/// `n` distinct valid lines, then `tail`.
fn write_input(dir: &std::path::Path, n: usize, tail: &str) -> String {
    let path = dir.join("in.jsonl");
    let mut f = BufWriter::new(File::create(&path).unwrap());
    for i in 0..n {
        writeln!(
            f,
            "{{\"provider\":\"sms\",\"path\":\"/m\",\"body\":{{\"to\":\"+1555{i:07}\"}}}}"
        )
        .unwrap();
    }
    f.write_all(tail.as_bytes()).unwrap();
    f.flush().unwrap();
    path.to_str().unwrap().to_owned()
}

/// Streamed, the input gets the keys a batch held in memory gets (identical lines
/// distinct, given keys kept), and blank lines, a byte-order mark and a last line
/// without `\n` change nothing.
#[tokio::test]
async fn streamed_keys_are_the_in_memory_keys() {
    let dir = tempfile::tempdir().unwrap();
    let a = r#"{"provider":"sms","path":"/m","body":{"to":"+1"}}"#;
    let k = r#"{"provider":"sms","path":"/m","body":1,"idempotency_key":"k"}"#;
    let text = format!("\u{feff}{a}\n\n{k}\n{a}\r\n{k}\n  \n{a}");
    let path = dir.path().join("in.jsonl");
    std::fs::write(&path, &text).unwrap();
    let checked = check(path.to_str().unwrap(), &any, false).unwrap().unwrap();
    let got = RefCell::new(Vec::new());
    let sink = |chunk: Vec<NewItem>| {
        let out = chunk
            .iter()
            .map(|_| Enqueued {
                id: String::new(),
                created: true,
            })
            .collect();
        got.borrow_mut().extend(chunk);
        async move { Ok(out) }
    };
    let summary = enqueue(checked, &any, false, sink).await.unwrap();
    assert_eq!(summary.items, 5);
    assert_eq!(got.into_inner(), input::parse_batch(&text, &any).unwrap());
}

/// 200,000 lines in a file: every one handed on, in chunks, each with its own key. Then
/// the same lines and a bad last one: refused with its number, nothing handed on.
#[tokio::test]
async fn a_large_input_is_enqueued_whole_and_a_bad_last_line_enqueues_nothing() {
    const N: usize = 200_000;
    let dir = tempfile::tempdir().unwrap();
    let keys = RefCell::new(std::collections::HashSet::new());
    let sink = |chunk: Vec<NewItem>| {
        assert!(chunk.len() <= CHUNK, "{}", chunk.len());
        let mut keys = keys.borrow_mut();
        for it in &chunk {
            assert!(keys.insert(it.idempotency_key.clone().unwrap()), "{it:?}");
        }
        let out = vec![
            Enqueued {
                id: String::new(),
                created: true,
            };
            chunk.len()
        ];
        async move { Ok(out) }
    };
    let good = write_input(dir.path(), N, "");
    let checked = check(&good, &any, false).unwrap().unwrap();
    let s = enqueue(checked, &any, false, sink).await.unwrap();
    assert_eq!((s.items, s.enqueued), (N, N));
    assert_eq!(keys.borrow().len(), N);

    let bad = write_input(dir.path(), N, "{\"provider\":\"sms\",\"path\":\"/m\"");
    let e = check(&bad, &any, false).unwrap().unwrap_err();
    assert_eq!((e.bad, e.total), (1, N + 1));
    assert_eq!(e.errors[0].at, N + 1);
    assert!(e.errors[0].message.contains("EOF"), "{e}");
}

/// Into a real SQLite outbox, 20 chunks: every line stored, a second run adds nothing.
/// (20,000 lines: an insert costs ~100 µs in a debug build.)
#[tokio::test]
async fn chunks_go_into_the_store_and_a_rerun_adds_nothing() {
    const N: usize = 20_000;
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("outbox.db"))
        .await
        .unwrap();
    let now = abide_core::Clock::now(&abide_core::SystemClock);
    let sink = |chunk: Vec<NewItem>| {
        let store = store.clone();
        async move { Ok(store.enqueue(&chunk, now).await?) }
    };
    let good = write_input(dir.path(), N, "");
    for run in 0..2 {
        let checked = check(&good, &any, false).unwrap().unwrap();
        let s = enqueue(checked, &any, false, sink).await.unwrap();
        assert_eq!(s.items, N);
        assert_eq!(s.enqueued, if run == 0 { N } else { 0 }, "run {run}");
        assert_eq!(s.already_enqueued, N - s.enqueued, "run {run}");
    }
    let counts = store.counts_by_state(None).await.unwrap();
    assert_eq!(counts.total(), N as u64);
}

/// A line longer than [`MAX_LINE_BYTES`] is reported by number without being held
/// whole, and the lines after it keep their numbers.
#[test]
fn an_overlong_line_is_reported_and_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let long = format!("{{\"x\":\"{}\"}}\n", "a".repeat(MAX_LINE_BYTES + 10));
    let path = write_input(dir.path(), 2, &format!("{long}not json\n"));
    let e = check(&path, &any, false).unwrap().unwrap_err();
    let at: Vec<usize> = e.errors.iter().map(|p| p.at).collect();
    assert_eq!(at, [3, 4], "{e}");
    assert!(e.errors[0].message.starts_with("longer than 8 MiB"), "{e}");
    assert_eq!(e.total, 4);
}

/// A file that changes between the passes is refused, not half-read.
#[tokio::test]
async fn a_file_changed_between_the_passes_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_input(dir.path(), 3, "");
    let checked = check(&path, &any, false).unwrap().unwrap();
    write_input(dir.path(), 3, "not json\n");
    let sink = |_: Vec<NewItem>| async { Ok(Vec::new()) };
    let e = enqueue(checked, &any, false, sink).await.unwrap_err();
    assert!(e.to_string().contains("changed while abide read it"), "{e}");
}

/// A named pipe (`<(generate)`) is read once and copied: the key probe and pass 2 read
/// the copy.
#[tokio::test]
async fn a_named_pipe_is_copied_for_the_second_pass() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("in.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let line = "{\"provider\":\"sms\",\"path\":\"/m\",\"idempotency_key\":\"k\"}\n";
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::write(fifo, line.repeat(3)).unwrap())
    };
    let checked = check(fifo.to_str().unwrap(), &any, false).unwrap().unwrap();
    writer.join().unwrap();
    let sink = |chunk: Vec<NewItem>| async move {
        Ok(vec![
            Enqueued {
                id: String::new(),
                created: true,
            };
            chunk.len()
        ])
    };
    // The copy is read three times: the key probe, then the enqueue, each from its start.
    let probed = RefCell::new(0);
    let probe = |chunk: Vec<NewItem>| {
        *probed.borrow_mut() += chunk.len();
        async { Ok(()) }
    };
    probe_keys(&checked, &any, probe).await.unwrap();
    assert_eq!(probed.into_inner(), 3);
    let s = enqueue(checked, &any, false, sink).await.unwrap();
    assert_eq!(s.items, 3);
}

#[test]
fn thousands_separators() {
    assert_eq!(thousands(0), "0");
    assert_eq!(thousands(999), "999");
    assert_eq!(thousands(1000), "1,000");
    assert_eq!(thousands(16_949_153), "16,949,153");
}

/// A line whose key the outbox holds for a different message: the read-only probe names
/// it before anything is enqueued, on a real store, past the first chunk; an input with
/// no explicit key is not even read again; the input can still be enqueued after a probe.
#[tokio::test]
async fn a_key_held_for_another_message_is_found_before_any_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("o.db")).await.unwrap();
    let held = r#"{"provider":"sms","path":"/m","body":{"to":"+1"},"idempotency_key":"k"}"#;
    let held = input::parse_batch(held, &any).unwrap();
    store.enqueue(&held, SystemTime::UNIX_EPOCH).await.unwrap();
    let other = r#"{"provider":"sms","path":"/m","body":{"to":"+2"},"idempotency_key":"k"}"#;
    let path = write_input(
        dir.path(),
        1499,
        &format!("{other}\n{{\"provider\":\"sms\",\"path\":\"/z\"}}\n"),
    );
    let checked = check(&path, &any, false).unwrap().unwrap();
    let calls = RefCell::new(0);
    let probe = |chunk: Vec<NewItem>| {
        *calls.borrow_mut() += 1;
        let store = store.clone();
        async move { Ok(store.check_keys(&chunk).await?) }
    };
    let e = probe_keys(&checked, &any, probe)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 1500: idempotency_key \"k\" already names a different message"),
        "{e}"
    );
    assert!(e.contains("nothing of the input was enqueued"), "{e}");
    assert_eq!(
        *calls.borrow(),
        1,
        "only the keyed lines are probed: one chunk"
    );
    assert_eq!(store.counts_by_state(None).await.unwrap().queued, 1);

    // No explicit key: nothing to probe. The same `Checked` still enqueues afterwards.
    let path = write_input(dir.path(), 3, "");
    let checked = check(&path, &any, false).unwrap().unwrap();
    let never = |_: Vec<NewItem>| async { panic!("probed an input without explicit keys") };
    probe_keys(&checked, &any, never).await.unwrap();
    let sink = |chunk: Vec<NewItem>| {
        let store = store.clone();
        async move { Ok(store.enqueue(&chunk, SystemTime::UNIX_EPOCH).await?) }
    };
    assert_eq!(
        enqueue(checked, &any, false, sink).await.unwrap().enqueued,
        3
    );
}

/// A key taken by another writer after the probe: the store refuses that chunk, and the
/// error names the line, the key, and exactly the lines committed before it.
#[tokio::test]
async fn a_key_refused_at_enqueue_names_the_lines_committed_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let keyed = r#"{"provider":"sms","path":"/m","body":{"to":"+2"},"idempotency_key":"k"}"#;
    let path = write_input(dir.path(), 1499, &format!("{keyed}\n{keyed}\n"));
    let checked = check(&path, &any, false).unwrap().unwrap();
    let sink = |chunk: Vec<NewItem>| async move {
        match chunk
            .iter()
            .position(|it| it.idempotency_key.as_deref() == Some("k"))
        {
            Some(index) => Err(abide_outbox::Error::KeyConflict {
                key: "k".into(),
                existing_id: "stored-id".into(),
                index,
            }
            .into()),
            None => Ok(vec![
                Enqueued {
                    id: String::new(),
                    created: true,
                };
                chunk.len()
            ]),
        }
    };
    let e = enqueue(checked, &any, false, sink)
        .await
        .unwrap_err()
        .to_string();
    for needle in [
        "line 1500: idempotency_key \"k\" already names a different message in the outbox (item stored-id)",
        // Chunks of 50, 100, 200, 400, 800 and 1000 lines: line 1500 is in the fifth.
        "lines 1-750 (750 items, 750 of them new) were enqueued",
        "nothing from line 751 on",
    ] {
        assert!(e.contains(needle), "missing {needle:?} in {e}");
    }
    assert!(!e.contains("run again to enqueue the rest"), "{e}");
}

/// A chunk that cannot be committed (a full disk): the error says how many items, and
/// through which line, went in before it.
#[tokio::test]
async fn a_failed_chunk_says_what_was_committed_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_input(dir.path(), 5_000, "");
    let checked = check(&path, &any, false).unwrap().unwrap();
    let calls = RefCell::new(0usize);
    let sink = |chunk: Vec<NewItem>| {
        *calls.borrow_mut() += 1;
        let n = *calls.borrow();
        async move {
            if n == 3 {
                anyhow::bail!("database or disk is full");
            }
            Ok(chunk
                .iter()
                .map(|_| Enqueued {
                    id: String::new(),
                    created: true,
                })
                .collect())
        }
    };
    let e = enqueue(checked, &any, false, sink).await.unwrap_err();
    let shown = format!("{e:#}");
    let first_two = FIRST_CHUNK + (FIRST_CHUNK * 2).min(CHUNK);
    assert!(
        shown.contains(&format!(
            "{first_two} of its 5000 items (lines 1-{first_two}) were committed"
        )),
        "{shown}"
    );
    assert!(shown.contains("disk is full"), "{shown}");
}
