//! `GET /v1/export?bytes=N`: a large download that streams (a paginated export, a report),
//! for clients and proxies that must pass a body on without holding it whole.
//!
//! Outside the limits and the statistics: it tests transfer, not politeness.

use axum::body::Body;
use axum::extract::Query;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Deserialize;

/// Largest export, in bytes: 1 GiB.
pub(crate) const MAX_EXPORT_BYTES: u64 = 1 << 30;

/// Size of each chunk sent, in bytes: 64 KiB.
const CHUNK: usize = 64 * 1024;

#[derive(Debug, Deserialize)]
pub(crate) struct ExportQuery {
    bytes: u64,
}

/// `bytes` bytes of `a`..`z` repeated, streamed in 64 KiB chunks with a `Content-Length`.
pub(crate) async fn export(Query(q): Query<ExportQuery>) -> Response {
    if q.bytes > MAX_EXPORT_BYTES {
        return (
            StatusCode::BAD_REQUEST,
            format!("bytes: {} is over the limit of {MAX_EXPORT_BYTES}", q.bytes),
        )
            .into_response();
    }
    let chunk: Bytes = (0..CHUNK).map(|i| b'a' + (i % 26) as u8).collect();
    let total = q.bytes;
    let stream = futures::stream::unfold(0u64, move |sent| {
        let chunk = chunk.clone();
        async move {
            if sent >= total {
                return None;
            }
            let n = (total - sent).min(CHUNK as u64) as usize;
            Some((
                Ok::<_, std::convert::Infallible>(chunk.slice(..n)),
                sent + n as u64,
            ))
        }
    });
    let mut r = Response::new(Body::from_stream(stream));
    r.headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(total));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    r
}
