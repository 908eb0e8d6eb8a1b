//! The live progress display of `send` and `demo`, on stderr.
//!
//! On a terminal: an indicatif bar redrawn a few times a second. Otherwise (a pipe, a CI
//! log): one plain line every few seconds, so logs stay readable. `--quiet`: nothing.

use std::io::IsTerminal;
use std::time::Duration;

use abide_outbox::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Mode {
    /// A bar on a terminal, plain lines otherwise.
    Auto,
    /// Always the bar.
    Bar,
    /// Always plain lines.
    Plain,
    /// Nothing.
    None,
}

/// Redraw period of the bar.
pub(crate) const BAR_TICK: Duration = Duration::from_millis(200);
/// Period of plain lines.
pub(crate) const PLAIN_EVERY: Duration = Duration::from_secs(2);

/// A display in one of the modes.
#[derive(Debug)]
pub(crate) struct Display {
    bar: Option<ProgressBar>,
    plain: bool,
}

impl Display {
    /// Resolve `Auto` against stderr and build the display.
    pub(crate) fn new(mode: Mode) -> Self {
        let mode = match mode {
            Mode::Auto if std::io::stderr().is_terminal() => Mode::Bar,
            Mode::Auto => Mode::Plain,
            m => m,
        };
        let bar = (mode == Mode::Bar).then(|| {
            let b = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30.cyan/blue} {pos}/{len} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            b.set_style(style.progress_chars("=> "));
            b
        });
        Self {
            bar,
            plain: mode == Mode::Plain,
        }
    }

    /// How often [`Display::update`] should be called.
    /// Plain lines (not a bar, not nothing): other lines may be printed between them.
    pub(crate) fn plain(&self) -> bool {
        self.plain
    }

    pub(crate) fn period(&self) -> Option<Duration> {
        if self.bar.is_some() {
            Some(BAR_TICK)
        } else if self.plain {
            Some(PLAIN_EVERY)
        } else {
            None
        }
    }

    /// Show `p`.
    pub(crate) fn update(&self, p: &Progress) {
        if let Some(b) = &self.bar {
            b.set_length(p.counts.total());
            b.set_position(finished(p));
            b.set_message(line(p));
        } else if self.plain {
            eprintln!(
                "abide: {}/{} finished · {}",
                finished(p),
                p.counts.total(),
                line(p)
            );
        }
    }

    /// Leave the last state on screen.
    pub(crate) fn finish(&self, p: &Progress) {
        self.update(p);
        if let Some(b) = &self.bar {
            b.finish();
        }
    }
}

/// Items in a final state (delivered, failed, or deferred for a person).
fn finished(p: &Progress) -> u64 {
    p.counts.submitted + p.counts.failed + p.counts.deferred
}

/// The one-line summary: done, on the wire, waiting, deferred, failed, pace, throttle
/// rate. The first five add up to every item: "on the wire" is requests sent and not yet
/// answered; items claimed (`IN_FLIGHT` in the store) but still waiting for a send slot
/// count as waiting, since nothing has been sent for them yet.
pub(crate) fn line(p: &Progress) -> String {
    let c = &p.counts;
    // The counts come from the store and `on_wire` from the senders, a moment apart: a
    // request sent for an item whose claim the counts do not show yet would be counted
    // twice (a trial saw "0/21 finished · on the wire 1 · waiting 21").
    let on_wire = p.totals.on_wire.min(c.in_flight);
    let waiting = c.queued + c.pending + c.in_flight.saturating_sub(on_wire);
    let pace: f64 = p.providers.iter().map(|x| x.rate).sum();
    let throttle = p
        .providers
        .iter()
        .map(|x| x.throttle_rate)
        .fold(0.0_f64, f64::max);
    let paused = p
        .providers
        .iter()
        .filter_map(|x| x.paused_for.map(|d| (x.name.as_str(), d)))
        .max_by_key(|(_, d)| *d);
    let mut s = format!(
        "done {} · on the wire {on_wire} · waiting {waiting} · deferred {} · failed {} · pace {pace:.1}/s · achieved {:.1}/s · throttled {:.1}%",
        c.submitted,
        c.deferred,
        c.failed,
        p.achieved_rate(),
        throttle * 100.0
    );
    if let Some((name, d)) = paused {
        s.push_str(&format!(" · {name} paused {:.1}s", d.as_secs_f64()));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use abide_outbox::{Counts, Totals};

    /// 280 claimed with 6 sent was shown as "in flight 280": claimed items waiting for a
    /// send slot are waiting, and only requests sent and unanswered are on the wire.
    #[test]
    fn claimed_items_waiting_for_a_slot_are_not_shown_on_the_wire() {
        let p = Progress {
            counts: Counts {
                queued: 100,
                in_flight: 280,
                pending: 20,
                submitted: 2600,
                ..Counts::default()
            },
            totals: Totals {
                on_wire: 6,
                ..Totals::default()
            },
            providers: Vec::new(),
            receipts: abide_outbox::ReceiptCounts::default(),
            elapsed: Duration::from_secs(50),
            oldest_pending_age: None,
        };
        let l = line(&p);
        assert!(
            l.starts_with("done 2600 · on the wire 6 · waiting 394 · deferred 0 · failed 0"),
            "{l}"
        );
    }

    /// The counts (store) and the requests on the wire (senders) are read a moment apart;
    /// the five figures still add up to every item.
    #[test]
    fn the_figures_add_up_when_the_counts_lag_the_senders() {
        let p = Progress {
            counts: Counts {
                queued: 21,
                ..Counts::default()
            },
            totals: Totals {
                on_wire: 1,
                ..Totals::default()
            },
            providers: Vec::new(),
            receipts: abide_outbox::ReceiptCounts::default(),
            elapsed: Duration::from_secs(1),
            oldest_pending_age: None,
        };
        let l = line(&p);
        assert!(
            l.starts_with("done 0 · on the wire 0 · waiting 21 · deferred 0 · failed 0"),
            "{l}"
        );
    }
}
