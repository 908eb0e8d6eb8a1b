//! Which request bodies can be sent more than once.

use bytes::Bytes;
use http_body_util::{Empty, Full};

/// A request body that may be copied for a retry. A body that cannot (a stream) answers
/// `None`: the request is then sent once and never retried, whatever the answer (the
/// error says [`StopReason::BodyNotReplayable`](crate::StopReason::BodyNotReplayable)).
///
/// Implemented for the buffered bodies; implement it for your own body type.
pub trait TryCloneBody: Sized {
    /// A copy of the body, or `None` when it cannot be copied.
    fn try_clone_body(&self) -> Option<Self>;
}

macro_rules! clone_body {
    ($($t:ty),* $(,)?) => {$(
        impl TryCloneBody for $t {
            fn try_clone_body(&self) -> Option<Self> {
                Some(self.clone())
            }
        }
    )*};
}

clone_body!(String, Vec<u8>, Bytes, (), Full<Bytes>, Empty<Bytes>);

/// A type-erased body is a stream as far as abide can tell: sent once.
impl<E> TryCloneBody for http_body_util::combinators::UnsyncBoxBody<Bytes, E> {
    fn try_clone_body(&self) -> Option<Self> {
        None
    }
}

/// A type-erased body is a stream as far as abide can tell: sent once.
impl<E> TryCloneBody for http_body_util::combinators::BoxBody<Bytes, E> {
    fn try_clone_body(&self) -> Option<Self> {
        None
    }
}
