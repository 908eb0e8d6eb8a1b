//! `abide send`'s input in bounded memory: two streaming passes over its lines.
//!
//! Pass 1 ([`check`]) reads every line and checks it by the rules of a batch held in
//! memory ([`input::Collector`], the same one `serve` uses), keeping no item: a bad line
//! anywhere and nothing is enqueued, the database is not even opened. Standard input, and
//! a pipe given by name such as `<(generate)`, is copied on the way to an anonymous
//! temporary file (in `$TMPDIR`, deleted on exit), which pass 2 reads. Pass 2
//! ([`enqueue`]) reads the lines again, derives the keys of items that have none
//! ([`abide_outbox::ContentKeys`], the keys of [`abide_outbox::assign_content_keys`]) and
//! enqueues them in chunks of [`CHUNK`]
//! items (the first of [`FIRST_CHUNK`], doubling), one transaction per chunk; `send`
//! delivers while pass 2 runs.
//!
//! Memory: the read buffer (one line, at most [`MAX_LINE_BYTES`]), one chunk of items, the
//! listed problems, and one hash-map slot (40 bytes in pass 1, 24 in pass 2; 2-3 times that
//! in practice, as tables grow by doubling) per distinct explicit `idempotency_key` in
//! pass 1 and per distinct message without one in pass 2 (128-bit digests, for the
//! one-key-one-message rule and the occurrence count of derived keys). Identical lines
//! cost nothing more. See BENCHMARKS.md "Memory".
//!
//! Trade-off of one transaction per chunk: a concurrently running `abide serve` on the
//! same SQLite file waits at most one chunk for the write lock (before: the whole input,
//! up to minutes), but a database failure or `kill -9` during pass 2 leaves the chunks
//! committed so far enqueued. They are valid, checked messages, and a re-run enqueues only
//! the rest (stable keys), so nothing is lost or doubled; the error says how many went in.
//! Between the passes, when the input has explicit keys, [`probe_keys`] reads it once more
//! and checks them against the outbox (read only): a key the outbox holds for a different
//! message stops the run before any chunk is committed. A key taken by another writer after
//! that is refused by the store with its whole chunk ([`abide_outbox::Error::KeyConflict`]):
//! the run stops naming that line and the lines committed before it, not "run again".
//! A regular file changed between the passes is detected (size and mtime, and every line
//! is checked again in pass 2): the run stops with the same message.

use std::fs::File;
use std::future::Future;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Seek, Write};
use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use abide_core::{Clock as _, SystemClock};
use abide_outbox::{Enqueued, NewItem};
use anyhow::{bail, Context};

use crate::input::{self, BatchError, Check, Collector};
use crate::report::progress::PLAIN_EVERY;
use crate::report::InputSummary;

/// The longest line read: longer ones are malformed (a body is at most 1 MiB,
/// [`abide_outbox::MAX_BODY_BYTES`], and 32 headers 8 KiB each) and skipped unread.
pub(crate) const MAX_LINE_BYTES: usize = 8 << 20;

/// Items per enqueue transaction in pass 2.
pub(crate) const CHUNK: usize = 1000;

/// Items in pass 2's first transaction: `send` starts delivering once it is committed, so
/// it is short (a thousand inserts are tens of milliseconds before the first request, more
/// on PostgreSQL). Each next chunk is twice as long, up to [`CHUNK`]: enqueueing stays
/// ahead of sending from the first chunk on (one gap of a second showed on PostgreSQL
/// between a first chunk of 50 and a second of 1,000).
pub(crate) const FIRST_CHUNK: usize = 50;

/// Buffer of the readers.
const READ_BUFFER: usize = 256 * 1024;

/// An input that passed [`check`], ready for [`enqueue`].
#[derive(Debug)]
pub(crate) struct Checked {
    /// What the user named (`-` for stdin), for messages.
    name: String,
    source: Source,
    /// Items (non-blank lines).
    items: usize,
    /// Distinct explicit `idempotency_key`s: without any, [`probe_keys`] has nothing to
    /// check (a derived key hashes its content, so it cannot name another message).
    explicit_keys: usize,
}

#[derive(Debug)]
enum Source {
    /// A file read again in pass 2, with what it looked like in pass 1.
    File {
        path: PathBuf,
        len: u64,
        modified: Option<SystemTime>,
    },
    /// Standard input, copied.
    Spool(File),
}

/// A line's number and bytes, or `Err(())` when it was too long to read.
type NumberedLine<'a> = (usize, Result<&'a [u8], ()>);

/// Lines of a reader, numbered from 1, optionally copied to `copy` as read.
struct Lines<R> {
    r: R,
    buf: Vec<u8>,
    number: usize,
    bytes: u64,
    copy: Option<BufWriter<File>>,
}

impl<R: BufRead> Lines<R> {
    fn new(r: R, copy: Option<File>) -> Self {
        Self {
            r,
            buf: Vec::new(),
            number: 0,
            bytes: 0,
            copy: copy.map(|f| BufWriter::with_capacity(READ_BUFFER, f)),
        }
    }

    /// The next line's number and bytes (`\n` included), or `Err(())` when it is longer
    /// than [`MAX_LINE_BYTES`] (its rest was skipped); `None` at the end.
    fn next_line(&mut self) -> io::Result<Option<NumberedLine<'_>>> {
        self.buf.clear();
        let limit = MAX_LINE_BYTES as u64 + 1;
        let n = (&mut self.r).take(limit).read_until(b'\n', &mut self.buf)?;
        if n == 0 {
            return Ok(None);
        }
        self.number += 1;
        self.bytes += n as u64;
        if let Some(c) = &mut self.copy {
            c.write_all(&self.buf)?;
        }
        if self.buf.len() > MAX_LINE_BYTES && self.buf.last() != Some(&b'\n') {
            self.skip_rest()?;
            return Ok(Some((self.number, Err(()))));
        }
        Ok(Some((self.number, Ok(&self.buf))))
    }

    /// Skip to the end of the current line, copying what is skipped.
    fn skip_rest(&mut self) -> io::Result<()> {
        loop {
            let chunk = self.r.fill_buf()?;
            if chunk.is_empty() {
                return Ok(());
            }
            let (take, done) = match chunk.iter().position(|b| *b == b'\n') {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            if let Some(c) = &mut self.copy {
                c.write_all(&chunk[..take])?;
            }
            self.bytes += take as u64;
            self.r.consume(take);
            if done {
                return Ok(());
            }
        }
    }

    /// Flush the copy and hand its file back.
    fn into_copy(self) -> io::Result<Option<File>> {
        self.copy
            .map(|c| c.into_inner().map_err(io::IntoInnerError::into_error))
            .transpose()
    }
}

/// "read 5,000,000 lines" every [`PLAIN_EVERY`] on stderr, unless quiet.
struct Ticker {
    on: bool,
    last: Instant,
}

impl Ticker {
    fn new(on: bool) -> Self {
        Self {
            on,
            last: SystemClock.monotonic(),
        }
    }

    fn tick(&mut self, say: impl FnOnce() -> String) {
        if self.on && self.last.elapsed() >= PLAIN_EVERY {
            self.last = SystemClock.monotonic();
            eprintln!("abide: {}", say());
        }
    }
}

/// `1234567` as `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Pass 1: read and check every line of `src` (a path, or `-` for stdin); `progress`
/// prints how far it got every few seconds. The outer error is an unreadable input; the
/// inner one every problem found (then nothing may be enqueued).
///
/// # Errors
/// Reading `src`, or creating or writing the temporary copy of stdin.
pub(crate) fn check(
    src: &str,
    check: Check<'_>,
    progress: bool,
) -> anyhow::Result<Result<Checked, BatchError>> {
    let mut file_source = None;
    let spool = || -> anyhow::Result<(File, File)> {
        let spool = tempfile::tempfile().context("creating a temporary file for the input")?;
        let copy = spool.try_clone().context("opening the input copy")?;
        Ok((spool, copy))
    };
    let (reader, copy, source): (Box<dyn BufRead>, _, _) = if src == "-" {
        let (spool, copy) = spool()?;
        let stdin = BufReader::with_capacity(READ_BUFFER, io::stdin().lock());
        (Box::new(stdin), Some(copy), Some(spool))
    } else {
        let file = File::open(src).with_context(|| format!("reading {src}"))?;
        let meta = file.metadata().with_context(|| format!("reading {src}"))?;
        let r = Box::new(BufReader::with_capacity(READ_BUFFER, file));
        if meta.is_file() {
            file_source = Some(Source::File {
                path: PathBuf::from(src),
                len: meta.len(),
                modified: meta.modified().ok(),
            });
            (r, None, None)
        } else {
            // A pipe (`<(generate)`, a FIFO) cannot be read twice: copy it like stdin.
            let (spool, copy) = spool()?;
            (r, Some(copy), Some(spool))
        }
    };
    let what = if src == "-" { "stdin" } else { src };
    let mut lines = Lines::new(reader, copy);
    let mut batch = Collector::checking("line");
    let mut items = 0usize;
    let mut ticker = Ticker::new(progress);
    while let Some((number, line)) = lines
        .next_line()
        .with_context(|| format!("reading {what}"))?
    {
        let parsed = match line {
            Ok(raw) => input::read_line(number, raw, check),
            Err(()) => Some(Err(format!(
                "longer than {} MiB; not read",
                MAX_LINE_BYTES >> 20
            ))),
        };
        if let Some(parsed) = parsed {
            items += 1;
            batch.push(number, parsed);
        }
        let bytes = lines.bytes;
        ticker.tick(|| {
            format!(
                "{what}: checked {} lines ({} MB)…",
                thousands(number as u64),
                thousands(bytes / 1_000_000)
            )
        });
    }
    let copy = lines.into_copy().context("writing the input copy")?;
    let explicit_keys = batch.explicit_keys();
    if let Err(e) = batch.finish() {
        return Ok(Err(e));
    }
    drop(copy);
    let source = match (file_source, source) {
        (Some(s), _) => s,
        (None, Some(spool)) => Source::Spool(spool),
        (None, None) => bail!("internal: input read without a copy"),
    };
    Ok(Ok(Checked {
        name: what.to_owned(),
        source,
        items,
        explicit_keys,
    }))
}

/// A reader over `source` from its start; refuses a file changed since [`check`].
fn reopen(name: &str, source: &Source) -> anyhow::Result<Box<dyn BufRead>> {
    Ok(match source {
        Source::File {
            path,
            len,
            modified,
        } => {
            let file = File::open(path).with_context(|| format!("reading {name} again"))?;
            let meta = file.metadata().with_context(|| format!("reading {name}"))?;
            if meta.len() != *len || meta.modified().ok() != *modified {
                bail!("{name} changed while abide read it; nothing was enqueued; run again");
            }
            Box::new(BufReader::with_capacity(READ_BUFFER, file))
        }
        Source::Spool(f) => {
            // A clone shares the offset: rewinding it rewinds the copy for the next reader.
            let mut f = f.try_clone().context("reading the stdin copy")?;
            f.rewind().context("reading the stdin copy")?;
            Box::new(BufReader::with_capacity(READ_BUFFER, f))
        }
    })
}

/// Between [`check`] and [`enqueue`]: read `checked` again and hand its items that carry
/// an explicit `idempotency_key`, in chunks of [`CHUNK`], to `probe` (the store's
/// read-only [`abide_outbox::Store::check_keys`]), so that a key the outbox already holds
/// for a different message stops the run before ANY chunk is committed. Reads nothing
/// when the input has no explicit key. Not a lock: a key taken by another writer between
/// this and [`enqueue`] is still refused there, naming the lines committed before it.
///
/// # Errors
/// A conflict (naming the line, the key and the stored item; nothing was enqueued), the
/// input changed since [`check`], reading it, or the probe's database error.
pub(crate) async fn probe_keys<F, Fut>(
    checked: &Checked,
    check: Check<'_>,
    mut probe: F,
) -> anyhow::Result<()>
where
    F: FnMut(Vec<NewItem>) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    if checked.explicit_keys == 0 {
        return Ok(());
    }
    let name = &checked.name;
    let mut lines = Lines::new(reopen(name, &checked.source)?, None);
    let mut chunk = Vec::with_capacity(CHUNK);
    let mut chunk_lines: Vec<usize> = Vec::with_capacity(CHUNK);
    loop {
        let next = lines
            .next_line()
            .with_context(|| format!("reading {name}"))?;
        let last = next.is_none();
        if let Some((number, line)) = next {
            let parsed = line
                .ok()
                .and_then(|raw| input::read_line(number, raw, check));
            match parsed {
                None if line_is_blank(&lines) => {}
                Some(Ok(item)) if item.idempotency_key.is_some() => {
                    chunk.push(item);
                    chunk_lines.push(number);
                }
                Some(Ok(_)) => {}
                _ => bail!(
                    "{name} changed while abide read it (line {number} is now bad); nothing \
                     was enqueued; run again"
                ),
            }
        }
        if chunk.len() >= CHUNK || (last && !chunk.is_empty()) {
            let batch = std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK));
            if let Err(e) = probe(batch).await {
                let none = InputSummary::default();
                return Err(match key_conflict(&e, &chunk_lines, 0, &none) {
                    Some(why) => anyhow::anyhow!("{name}: {why}"),
                    None => e.context(format!(
                        "checking the keys of {name} against the outbox; nothing was enqueued"
                    )),
                });
            }
            chunk_lines.clear();
        }
        if last {
            return Ok(());
        }
    }
}

/// Pass 2: read `checked` again and hand its items, keys derived, to `sink` in chunks of
/// [`CHUNK`] (the first of [`FIRST_CHUNK`], each next one twice as long); `sink` enqueues
/// one chunk in one transaction.
///
/// # Errors
/// The input changed since [`check`] (a line is now bad, or lines were added or
/// removed), reading it, or the sink's error; the error says how many items were
/// enqueued before it (a re-run enqueues only the rest).
pub(crate) async fn enqueue<F, Fut>(
    checked: Checked,
    check: Check<'_>,
    progress: bool,
    mut sink: F,
) -> anyhow::Result<InputSummary>
where
    F: FnMut(Vec<NewItem>) -> Fut,
    Fut: Future<Output = anyhow::Result<Vec<Enqueued>>>,
{
    let Checked {
        name,
        source,
        items: total,
        ..
    } = checked;
    let reader = reopen(&name, &source)?;
    let mut lines = Lines::new(reader, None);
    let mut keys = abide_outbox::ContentKeys::default();
    let mut summary = InputSummary::default();
    let mut chunk = Vec::with_capacity(CHUNK);
    // The line of each item of `chunk`, and the last line of the chunks committed so far:
    // a refused key is reported by line, with exactly which lines went in before it.
    let mut chunk_lines: Vec<usize> = Vec::with_capacity(CHUNK);
    let mut committed_through = 0usize;
    let mut chunks = 0u32;
    let mut ticker = Ticker::new(progress);
    let changed = |summary: &InputSummary, why: String| {
        anyhow::anyhow!(
            "{name} changed while abide read it ({why}); {} of its {total} items were \
             enqueued before this (a re-run enqueues only the rest)",
            summary.items
        )
    };
    loop {
        let next = lines
            .next_line()
            .with_context(|| format!("reading {name}"))?;
        let last = next.is_none();
        if let Some((number, line)) = next {
            let parsed = line
                .ok()
                .and_then(|raw| input::read_line(number, raw, check));
            match parsed {
                None if line_is_blank(&lines) => {}
                Some(Ok(mut item)) => {
                    keys.assign(&mut item);
                    chunk.push(item);
                    chunk_lines.push(number);
                }
                _ => return Err(changed(&summary, format!("line {number} is now bad"))),
            }
        }
        // The first chunk is short, delivery starts when it is committed; then doubling.
        let size = FIRST_CHUNK
            .checked_shl(chunks)
            .map_or(CHUNK, |n| n.min(CHUNK));
        if chunk.len() >= size || (last && !chunk.is_empty()) {
            chunks += 1;
            let batch = std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK));
            let done = match sink(batch).await {
                Ok(done) => done,
                // Running again would be refused the same way: say so, not "run again".
                Err(e) => match key_conflict(&e, &chunk_lines, committed_through, &summary) {
                    Some(why) => bail!("{name}: {why}"),
                    None => {
                        let lines = match committed_through {
                            0 => "no line".to_owned(),
                            n => format!("lines 1-{n}"),
                        };
                        return Err(e.context(format!(
                            "enqueueing {name}: {} of its {total} items ({lines}) were \
                             committed before this error (one transaction per chunk of up to \
                             {CHUNK} items); run again to enqueue the rest (their keys are \
                             stable: nothing is enqueued twice)",
                            summary.items
                        )));
                    }
                },
            };
            summary.add(&done);
            committed_through = chunk_lines.last().copied().unwrap_or(committed_through);
            chunk_lines.clear();
            ticker.tick(|| {
                format!(
                    "{name}: enqueued {} of {} items…",
                    thousands(summary.items as u64),
                    thousands(total as u64)
                )
            });
        }
        if last {
            break;
        }
    }
    if summary.items != total {
        return Err(changed(
            &summary,
            format!("{} items, {total} before", summary.items),
        ));
    }
    Ok(summary)
}

/// The refusal of a chunk whose item at some index reuses a stored key for a different
/// message ([`abide_outbox::Error::KeyConflict`]), said by line: which line, which key,
/// which stored item, and exactly which lines were enqueued before it (the chunks
/// committed so far: through line `committed_through`). `None` for any other error.
fn key_conflict(
    e: &anyhow::Error,
    chunk_lines: &[usize],
    committed_through: usize,
    summary: &InputSummary,
) -> Option<String> {
    let abide_outbox::Error::KeyConflict {
        key,
        existing_id,
        index,
    } = e
        .chain()
        .find_map(|c| c.downcast_ref::<abide_outbox::Error>())?
    else {
        return None;
    };
    let line = chunk_lines.get(*index).copied().unwrap_or(0);
    let first_unsent = chunk_lines.first().copied().unwrap_or(line);
    let before = if committed_through == 0 {
        "nothing of the input was enqueued".to_owned()
    } else {
        format!(
            "lines 1-{committed_through} ({} items, {} of them new) were enqueued before \
             this (one transaction per chunk of up to {CHUNK} items) and are in the outbox \
             (some may be sent already), nothing from line {first_unsent} on",
            summary.items, summary.enqueued
        )
    };
    Some(format!(
        "line {line}: idempotency_key {key:?} already names a different message in the \
         outbox (item {existing_id}); {before}; nothing was sent (one key names one message: \
         give the new message a new key, then run again)"
    ))
}

/// Whether the line just read is blank (a skipped line, not a bad one).
fn line_is_blank<R>(lines: &Lines<R>) -> bool {
    let text = String::from_utf8_lossy(&lines.buf);
    let text = if lines.number == 1 {
        text.trim_start_matches('\u{feff}')
    } else {
        &text
    };
    text.trim().is_empty()
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
