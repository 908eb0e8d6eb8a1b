//! Bodies that stream: a buffered start followed by the rest of a body, and the `Sync`
//! wrapper the HTTP client asks of a request body.
//!
//! A request body is read up to a bound so it can be resent; past the bound, what was read
//! and the rest are sent once as one stream ([`Prefixed`]). A response is read only as far
//! as the classifier needs and then streams back the same way, so a large export never sits
//! whole in memory.

use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};

/// `prefix`, then every frame of `rest`.
#[derive(Debug)]
pub(crate) struct Prefixed<B> {
    prefix: Option<Bytes>,
    rest: B,
}

impl<B> Prefixed<B> {
    pub(crate) fn new(prefix: Bytes, rest: B) -> Self {
        Self {
            prefix: (!prefix.is_empty()).then_some(prefix),
            rest,
        }
    }
}

impl<B> Body for Prefixed<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        if let Some(p) = self.prefix.take() {
            return Poll::Ready(Some(Ok(Frame::data(p))));
        }
        Pin::new(&mut self.rest).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.prefix.is_none() && self.rest.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let extra = self.prefix.as_ref().map_or(0, |p| p.len() as u64);
        let h = self.rest.size_hint();
        let mut out = SizeHint::new();
        out.set_lower(h.lower() + extra);
        if let Some(u) = h.upper() {
            out.set_upper(u + extra);
        }
        out
    }
}

/// A `Send` body made `Sync` (the HTTP client's request body must be): it is only ever
/// polled through `&mut`, so the mutex is never locked.
#[derive(Debug)]
pub(crate) struct SyncBody<B>(Mutex<B>);

impl<B> SyncBody<B> {
    pub(crate) fn new(b: B) -> Self {
        Self(Mutex::new(b))
    }
}

impl<B> Body for SyncBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let inner = self
            .get_mut()
            .0
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Pin::new(inner).poll_frame(cx)
    }
}

/// What reading the start of a body gave.
#[derive(Debug)]
pub(crate) enum Start<B> {
    /// The whole body, at most the bound.
    Whole(Bytes),
    /// The body is longer than the bound: what was read, and the rest.
    Longer(Prefixed<B>),
}

/// Read `body` until it ends or holds more than `bound` bytes.
///
/// # Errors
/// The body's own error (the peer went away mid-body).
pub(crate) async fn read_start<B>(mut body: B, bound: usize) -> Result<Start<B>, B::Error>
where
    B: Body<Data = Bytes> + Unpin,
{
    let mut kept = BytesMut::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            kept.extend_from_slice(&data);
            if kept.len() > bound {
                return Ok(Start::Longer(Prefixed::new(kept.freeze(), body)));
            }
        }
    }
    Ok(Start::Whole(kept.freeze()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Full;

    #[tokio::test]
    async fn a_body_longer_than_the_bound_keeps_every_byte_in_order() {
        let body = Full::new(Bytes::from(vec![7u8; 100]));
        match read_start(body, 10).await.unwrap() {
            Start::Longer(p) => {
                let all = p.collect().await.unwrap().to_bytes();
                assert_eq!(all.len(), 100);
            }
            Start::Whole(_) => panic!("100 bytes fit in 10"),
        }
        let body = Full::new(Bytes::from_static(b"short"));
        match read_start(body, 10).await.unwrap() {
            Start::Whole(b) => assert_eq!(&b[..], b"short"),
            Start::Longer(_) => panic!("5 bytes do not exceed 10"),
        }
    }
}
