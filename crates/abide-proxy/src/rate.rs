//! A minimum request-body rate: a client that sends its body slower than
//! [`MinBodyRate::bytes_per_sec`] after a grace period is cut off, so it cannot hold a
//! connection, a task and a share of the body budget for as long as it likes (Slowloris
//! with a body; the rule of Apache's `mod_reqtimeout`, `body=20,MinRate=500`).
//!
//! Only the time the proxy spends waiting for the client's bytes counts: while a request
//! is held (paced, paused) or its upstream is slow to read a streamed body, nobody polls
//! the body, and the client is not to blame for that.

use std::error::Error as StdError;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// The slowest request body the proxy accepts.
///
/// # Default
/// 1,024 bytes/s after a grace of 10 s: the body of an ordinary API call arrives within
/// milliseconds, and a 1 MiB one over a 1 Mbit/s link in 8 s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MinBodyRate {
    /// Waiting time allowed before the first byte must have come, and on top of what the
    /// rate allows later.
    pub grace: Duration,
    /// Bytes per second of waiting time the client must keep up, on average; `0`: no
    /// minimum (the grace still bounds a body that stops).
    pub bytes_per_sec: u64,
}

impl Default for MinBodyRate {
    fn default() -> Self {
        Self {
            grace: Duration::from_secs(10),
            bytes_per_sec: 1024,
        }
    }
}

impl MinBodyRate {
    /// Waiting time allowed once `received` bytes came: the grace plus `received` at the
    /// minimum rate (saturating: a huge body never overflows the clock).
    fn allowance(&self, received: u64) -> Duration {
        let earned = if self.bytes_per_sec == 0 {
            Duration::MAX
        } else {
            Duration::from_secs_f64(received as f64 / self.bytes_per_sec as f64)
        };
        self.grace.saturating_add(earned)
    }
}

/// The body came slower than the minimum rate.
#[derive(Debug, thiserror::Error)]
#[error(
    "the request body came slower than {bytes_per_sec} bytes/s ({received} bytes in {waited:.1} s of waiting)"
)]
pub(crate) struct TooSlow {
    pub(crate) bytes_per_sec: u64,
    pub(crate) received: u64,
    pub(crate) waited: f64,
}

/// Errors of a [`MinRate`] body: [`TooSlow`], or the inner body's own.
pub(crate) type BoxError = Box<dyn StdError + Send + Sync>;

/// `B`, cut off with [`TooSlow`] once the time spent waiting for it passes what
/// [`MinBodyRate`] allows for the bytes received so far.
pub(crate) struct MinRate<B> {
    inner: B,
    rule: MinBodyRate,
    received: u64,
    /// Waiting time spent, not counting the wait in progress.
    waited: Duration,
    /// Since when the wait in progress runs (a poll returned `Pending`).
    waiting_since: Option<Instant>,
    /// Fires when the wait in progress uses up the allowance.
    timer: Pin<Box<Sleep>>,
}

impl<B> MinRate<B> {
    pub(crate) fn new(inner: B, rule: MinBodyRate) -> Self {
        Self {
            inner,
            rule,
            received: 0,
            waited: Duration::ZERO,
            waiting_since: None,
            timer: Box::pin(tokio::time::sleep(Duration::ZERO)),
        }
    }

    /// End the wait in progress, if any, at `now`.
    fn stop_waiting(&mut self, now: Instant) {
        if let Some(since) = self.waiting_since.take() {
            self.waited += now.saturating_duration_since(since);
        }
    }
}

impl<B> Body for MinRate<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.stop_waiting(Instant::now());
                if let Some(Ok(f)) = &frame {
                    if let Some(d) = f.data_ref() {
                        this.received = this.received.saturating_add(d.len() as u64);
                    }
                }
                Poll::Ready(frame.map(|r| r.map_err(Into::into)))
            }
            Poll::Pending => {
                let now = Instant::now();
                let allowance = this.rule.allowance(this.received);
                if this.waiting_since.is_none() {
                    this.waiting_since = Some(now);
                    let left = allowance.saturating_sub(this.waited);
                    // A deadline past tokio's range is no deadline: the body may wait.
                    if let Some(at) = now.checked_add(left) {
                        this.timer.as_mut().reset(at);
                    } else {
                        this.timer
                            .as_mut()
                            .reset(now + Duration::from_secs(86_400 * 365));
                    }
                }
                if this.timer.as_mut().poll(cx).is_ready() {
                    this.stop_waiting(now);
                    return Poll::Ready(Some(Err(Box::new(TooSlow {
                        bytes_per_sec: this.rule.bytes_per_sec,
                        received: this.received,
                        waited: this.waited.as_secs_f64(),
                    }))));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Whether `e` (or what it wraps) is [`TooSlow`].
pub(crate) fn is_too_slow(e: &(dyn StdError + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(x) = cur {
        if x.is::<TooSlow>() {
            return true;
        }
        cur = x.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use tokio::sync::mpsc;

    /// A body fed from a channel, as a client's bytes arrive.
    struct Fed(mpsc::Receiver<Bytes>);

    impl Body for Fed {
        type Data = Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            self.0.poll_recv(cx).map(|c| c.map(|b| Ok(Frame::data(b))))
        }
    }

    /// A client sending `chunks` of `size` bytes, one every `every`.
    fn client(size: usize, every: Duration, chunks: usize) -> Fed {
        let (tx, rx) = mpsc::channel(1);
        tokio::spawn(async move {
            for _ in 0..chunks {
                tokio::time::sleep(every).await;
                if tx.send(Bytes::from(vec![b'x'; size])).await.is_err() {
                    return;
                }
            }
        });
        Fed(rx)
    }

    const RULE: MinBodyRate = MinBodyRate {
        grace: Duration::from_secs(10),
        bytes_per_sec: 1000,
    };

    #[tokio::test(start_paused = true)]
    async fn a_body_slower_than_the_minimum_is_cut_off_after_the_grace() {
        let began = Instant::now();
        // 100 bytes/s: each second earns a tenth of a second, so the grace runs out after
        // about 11 s of the client's 60.
        let body = MinRate::new(client(100, Duration::from_secs(1), 60), RULE);
        let err = body.collect().await.expect_err("cut off");
        assert!(is_too_slow(&*err), "{err}");
        let took = began.elapsed();
        assert!(
            took > Duration::from_secs(10) && took < Duration::from_secs(13),
            "{took:?}"
        );
        assert!(err.to_string().contains("1000 bytes/s"), "{err}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_is_cut_off_by_the_grace_and_what_it_earned() {
        let (tx, rx) = mpsc::channel(1);
        tx.send(Bytes::from(vec![b'x'; 5000])).await.unwrap();
        let began = Instant::now();
        let err = MinRate::new(Fed(rx), RULE).collect().await.err();
        assert!(err.is_some_and(|e| is_too_slow(&*e)));
        // 10 s of grace and 5 s earned by 5,000 bytes.
        assert_eq!(began.elapsed(), Duration::from_secs(15));
        drop(tx);
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_at_the_minimum_or_faster_is_read_whole() {
        let body = MinRate::new(client(2000, Duration::from_secs(1), 30), RULE);
        let all = body.collect().await.expect("fast enough").to_bytes();
        assert_eq!(all.len(), 60_000);
    }

    #[tokio::test(start_paused = true)]
    async fn time_nobody_waits_for_the_body_is_not_counted() {
        // Every byte is there at once, but the proxy reads it only after a minute (the
        // request was held): the client kept up.
        let (tx, rx) = mpsc::channel(4);
        for _ in 0..3 {
            tx.send(Bytes::from_static(b"abc")).await.unwrap();
        }
        drop(tx);
        let mut body = MinRate::new(Fed(rx), RULE);
        let first = body.frame().await.unwrap().unwrap();
        assert_eq!(first.data_ref().map(|d| d.len()), Some(3));
        tokio::time::sleep(Duration::from_secs(60)).await;
        let rest = body
            .collect()
            .await
            .expect("not the client's fault")
            .to_bytes();
        assert_eq!(&rest[..], b"abcabc");
    }
}
