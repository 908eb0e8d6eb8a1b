//! Completions planned before any SQL runs: checked against the state table, reduced to
//! column values, and cut into batches of a few fixed sizes.

use crate::error::Result;
use crate::model::{to_ms, AttemptRecord, Completion, Outcome};
use crate::state::{transition, Event, State};

/// Most completions in one batched `UPDATE` (8 parameters each, well under SQLite's
/// 32,766 and Postgres' 65,535).
pub(crate) const MAX_COMPLETE_ROWS: usize = 256;
/// Most attempts rows in one multi-row `INSERT` (11 parameters each).
pub(crate) const MAX_ATTEMPT_ROWS: usize = 256;

/// One completion, checked against the state table and reduced to its column values.
#[derive(Debug)]
pub(crate) struct Planned<'a> {
    pub(crate) index: usize,
    pub(crate) id: &'a str,
    pub(crate) owner: &'a str,
    pub(crate) event: Event,
    pub(crate) target: State,
    pub(crate) n: i64,
    pub(crate) next: Option<i64>,
    pub(crate) code: Option<String>,
    pub(crate) reason: Option<&'a str>,
    pub(crate) message_id: Option<&'a str>,
}

/// The target state and column values of completion `index`, or why the state table
/// refuses it (nothing is written for it then).
pub(crate) fn plan_completion(index: usize, c: &Completion) -> Result<Planned<'_>> {
    let (event, then) = match &c.outcome {
        Outcome::Submitted => (Event::Accept, None),
        Outcome::Retry { .. } => (Event::Retry, None),
        Outcome::Failed { .. } => (Event::Fail, None),
        Outcome::Deferred { .. } => (Event::Retry, Some(Event::Defer)),
    };
    let mut target = transition(State::InFlight, event)?;
    if let Some(e) = then {
        target = transition(target, e)?;
    }
    let (next, reason) = match &c.outcome {
        Outcome::Submitted => (None, None),
        Outcome::Retry {
            next_attempt_at,
            reason,
        } => (Some(to_ms(*next_attempt_at)), Some(reason.as_str())),
        Outcome::Failed { reason } | Outcome::Deferred { reason } => (None, Some(reason.as_str())),
    };
    Ok(Planned {
        index,
        id: &c.id,
        owner: &c.lease_owner,
        event,
        target,
        n: i64::try_from(c.attempts.len()).unwrap_or(i64::MAX),
        next,
        code: c.last_provider_code.map(|code| code.to_string()),
        reason,
        // Only an acceptance names the remote's id; anything else keeps what is stored.
        message_id: match c.outcome {
            Outcome::Submitted => c.message_id.as_deref(),
            _ => None,
        },
    })
}

/// Split into rounds in which every id occurs once, keeping order: a second completion
/// of the same item is applied after the first, exactly as one-by-one application would
/// (and is then refused, the item having left `IN_FLIGHT`). A joined `UPDATE` could not
/// promise that for two rows matching one item.
pub(crate) fn rounds(planned: Vec<Planned<'_>>) -> Vec<Vec<Planned<'_>>> {
    let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut rounds: Vec<Vec<Planned<'_>>> = Vec::new();
    for p in planned {
        let r = seen.entry(p.id).or_insert(0);
        if rounds.len() <= *r {
            rounds.push(Vec::new());
        }
        rounds[*r].push(p);
        *r += 1;
    }
    rounds
}

/// Consecutive chunks whose lengths are powers of two (at most `max`, itself a power of
/// two): batched statements come in at most log2(max) + 1 shapes, so the per-connection
/// prepared-statement cache keeps them all instead of re-preparing every odd size.
pub(crate) fn pow2_chunks<T>(items: &[T], max: usize) -> impl Iterator<Item = &[T]> {
    let mut rest = items;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let len = rest.len().min(max);
        let len = 1usize << (usize::BITS - 1 - len.leading_zeros());
        let (head, tail) = rest.split_at(len);
        rest = tail;
        Some(head)
    })
}

/// One attempts row waiting for the multi-row insert.
#[derive(Debug)]
pub(crate) struct AttemptRow<'a> {
    pub(crate) item_id: &'a str,
    pub(crate) attempt_no: i64,
    pub(crate) record: &'a AttemptRecord,
    pub(crate) key: String,
}
