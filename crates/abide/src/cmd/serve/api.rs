//! The HTTP API of `abide serve`: routes, bearer auth, Prometheus rendering.
//!
//! Kept apart from `mod.rs` (flags, start-up, shutdown) so the routes can be read in one
//! sitting.

use abide_core::Clock;
use abide_outbox::{echo, ListFilter, RequeueFilter, State as ItemState, Store};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::state::{ct_eq, digest, stats_value, Api};
use super::{dashboard, metrics as serve_metrics};
use crate::input;
use crate::report::Snapshot;

/// Most items one `POST /v1/items`, and most ids one `POST /v1/requeue`, may carry.
pub(crate) const MAX_BATCH: usize = 10_000;
/// Largest request body, bytes.
pub(crate) const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// The router. `/healthz` and the dashboard page (`/`, `/assets/*`) are always open;
/// `/metrics` and the dashboard's data are open unless `metrics_auth`.
pub(crate) fn router(api: Api) -> Router {
    let authed = Router::new()
        .route("/v1/items", post(enqueue).get(list))
        .route("/v1/items/{id}", get(item))
        .route("/v1/items/{id}/cancel", post(cancel))
        .route("/v1/stats", get(stats))
        .route("/v1/requeue", post(requeue));
    // The dashboard's data is as open as /metrics (counts, provider state, ids and reasons
    // of failed and deferred items; never request data).
    let metrics_route = Router::new()
        .route("/metrics", get(metrics))
        .merge(dashboard::data_routes());
    let (authed, open) = if api.metrics_auth {
        (authed.merge(metrics_route), Router::new())
    } else {
        (authed, metrics_route)
    };
    let authed = authed.layer(middleware::from_fn_with_state(api.clone(), auth));
    open.merge(authed)
        .merge(dashboard::page_routes())
        .route("/healthz", get(healthz))
        .route("/v1/openapi.json", get(openapi))
        .fallback(no_route)
        .method_not_allowed_fallback(wrong_method)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(api)
}

/// `404` with a body that says what was asked and where the routes are listed.
async fn no_route(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    error(
        StatusCode::NOT_FOUND,
        "not_found",
        format!(
            "no route {} {}; the routes are listed in GET /v1/openapi.json",
            short_method(&method),
            echo::clip(uri.path())
        ),
    )
}

/// A method as written when it is short (a token: no control or quote characters), else
/// clipped: hyper accepts a method of any length, and the answer must not reflect it.
fn short_method(m: &axum::http::Method) -> String {
    match m.as_str() {
        s if s.len() <= 32 => s.to_owned(),
        s => echo::clip_to(s, 32),
    }
}

/// `405` for a route that exists under other methods (axum adds `Allow`).
async fn wrong_method(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    error(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!(
            "{} does not answer {}; the methods it answers are in Allow and in GET \
             /v1/openapi.json",
            echo::clip(uri.path()),
            short_method(&method)
        ),
    )
}

/// `ok`, or 503 while results cannot be written (nothing is sent meanwhile).
async fn healthz(State(api): State<Api>) -> Response {
    match (api.store_fault)() {
        None => "ok".into_response(),
        Some((lasted, cause)) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_fault",
            format!(
                "results cannot be written to the database (for {} s: {cause}); sending is paused",
                lasted.as_secs()
            ),
        ),
    }
}

fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    (
        status,
        Json(json!({"error": code, "message": message.into()})),
    )
        .into_response()
}

async fn auth(
    State(api): State<Api>,
    headers: HeaderMap,
    req: axum::extract::Request,
    next: Next,
) -> Response {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, token) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        });
    match given {
        Some(t) if ct_eq(&digest(t), &api.token_digest) => next.run(req).await,
        _ => {
            let mut r = error(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "send `Authorization: Bearer <token>` (the value of --token-env)",
            );
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer realm=\"abide\""),
            );
            r
        }
    }
}

/// A body that could not be read, as JSON like every other error: over the limit it names
/// the limit (axum's own answer is plain text).
fn body_error(e: &BytesRejection) -> Response {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!(
                "request body over the limit of {MAX_BODY_BYTES} bytes ({} MiB); split the batch",
                MAX_BODY_BYTES >> 20
            ),
        );
    }
    error(e.status(), "unreadable_body", e.body_text())
}

/// An error's text, bounded: serde quotes what it refuses (an unknown field) whole.
fn bounded(e: &impl std::fmt::Display) -> String {
    echo::truncate(&e.to_string(), echo::MAX_MESSAGE_BYTES)
}

fn internal(e: impl std::fmt::Display) -> Response {
    tracing::error!(error = %e, "request failed");
    error(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
}

/// How long a client is asked to wait when the database is at fault.
const STORE_RETRY_AFTER_SECS: u64 = 5;

/// A store error: the database at fault (unreachable, full, read-only, a failed
/// statement) is `503` with `Retry-After` (RFC 9110 §15.6.4, §10.2.3), the client's cue to
/// send the same request again later; nothing was stored.
fn store_error(e: abide_outbox::Error) -> Response {
    use abide_outbox::ErrorKind;
    match e.kind() {
        ErrorKind::Unavailable | ErrorKind::Database => {
            tracing::error!(error = %e, "the database failed a request; answered 503");
            let mut r = error(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                format!("the outbox database failed ({e}); nothing was stored, try again later"),
            );
            r.headers_mut().insert(
                header::RETRY_AFTER,
                header::HeaderValue::from(STORE_RETRY_AFTER_SECS),
            );
            r
        }
        _ => internal(e),
    }
}

/// `POST /v1/items`: one item (an object in the `abide send` line format) or a batch (an
/// array of them). Validated whole: any bad item rejects the request and nothing is
/// stored. An item without `idempotency_key` gets its new item id as key, so a client
/// that may retry the POST should send one. A known key with the same message answers
/// `created: false`; with a different message, 422 `idempotency_key_conflict` naming the
/// key and the stored item, and nothing of the request is enqueued.
async fn enqueue(State(api): State<Api>, body: Result<Bytes, BytesRejection>) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(e) => return body_error(&e),
    };
    // Each item is read from its own text (a `Value` would keep only the last of two
    // same-named keys, which an item may not have).
    let raw: &RawValue = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return error(StatusCode::BAD_REQUEST, "invalid_json", bounded(&e)),
    };
    let (values, single): (Vec<&RawValue>, bool) = match raw.get().as_bytes().first() {
        Some(b'[') => match serde_json::from_str(raw.get()) {
            Ok(a) => (a, false),
            Err(e) => return error(StatusCode::BAD_REQUEST, "invalid_json", bounded(&e)),
        },
        Some(b'{') => (vec![raw], true),
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_batch",
                "expected an item object or an array of them",
            )
        }
    };
    if values.len() > MAX_BATCH {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "batch_too_large",
            format!("at most {MAX_BATCH} items per request"),
        );
    }
    let check = input::configured(&api.config);
    let mut batch = input::Collector::new("index");
    for (i, v) in values.into_iter().enumerate() {
        batch.push(i, input::parse_line(v.get(), &check));
    }
    let items = match batch.finish() {
        Ok(items) => items,
        Err(e) => {
            let errors: Vec<Value> = e
                .errors
                .iter()
                .map(|p| json!({"index": p.at, "message": p.message}))
                .collect();
            return (
                StatusCode::UNPROCESSABLE_ENTITY,
                Json(json!({
                    "error": "invalid_batch",
                    "message": format!("{} item(s) invalid; nothing was enqueued", e.bad),
                    "invalid": e.bad,
                    "errors": errors,
                })),
            )
                .into_response();
        }
    };
    match api.store.enqueue(&items, api.clock.now()).await {
        Ok(done) => {
            let out: Vec<Value> = done
                .iter()
                .map(|e| json!({"id": e.id, "created": e.created}))
                .collect();
            let body = if single {
                out.into_iter().next().unwrap_or(Value::Null)
            } else {
                json!({ "items": out })
            };
            (StatusCode::ACCEPTED, Json(body)).into_response()
        }
        // draft-ietf-httpapi-idempotency-key-header §2.7 (Error Scenarios): a key reused
        // with a different payload is answered 422 (409 is for a request still being
        // processed, which enqueueing never is).
        Err(abide_outbox::Error::KeyConflict {
            key,
            existing_id,
            index,
        }) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({
                "error": "idempotency_key_conflict",
                "message": format!(
                    "idempotency_key {key:?} already names a different message (item \
                     {existing_id}); nothing was enqueued (one key names one message: give \
                     a new message a new key)"
                ),
                "idempotency_key": key,
                "existing_id": existing_id,
                "index": index,
            })),
        )
            .into_response(),
        Err(abide_outbox::Error::InvalidRequest(m)) => {
            error(StatusCode::UNPROCESSABLE_ENTITY, "invalid_batch", m)
        }
        Err(e) => store_error(e),
    }
}

/// `GET /v1/items/{id}`: the item and its attempts, as `abide-outbox` serialises them
/// (times RFC 3339, durations `*_ms`), with each attempt's `remote` written the way
/// `/v1/stats` and `abide status` count it (`http_429`, `smpp_0x58`, `no_response`).
async fn item(State(api): State<Api>, Path(id): Path<String>) -> Response {
    let item = match api.store.get(&id).await {
        Ok(Some(item)) => item,
        Ok(None) => {
            return error(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("no item {}", echo::clip(&id)),
            )
        }
        Err(e) => return store_error(e),
    };
    let attempts = match api.store.attempts(&id).await {
        Ok(a) => a,
        Err(e) => return store_error(e),
    };
    let attempts: Result<Vec<Value>, _> = attempts
        .iter()
        .map(|a| {
            let mut v = serde_json::to_value(a)?;
            v["remote"] = Value::String(a.record.remote.to_string());
            Ok::<_, serde_json::Error>(v)
        })
        .collect();
    #[derive(Serialize)]
    struct ItemView {
        item: abide_outbox::Item,
        attempts: Vec<Value>,
    }
    match attempts {
        Ok(attempts) => Json(ItemView { item, attempts }).into_response(),
        Err(e) => internal(e),
    }
}

/// `POST /v1/items/{id}/cancel`: [`super::cancel::cancel_item`].
async fn cancel(State(api): State<Api>, Path(id): Path<String>) -> Response {
    super::cancel::cancel_item(&api.store, &id, api.clock.now())
        .await
        .unwrap_or_else(store_error)
}

/// `GET /v1/stats`: the database view plus the dispatcher's live per-provider view.
async fn stats(State(api): State<Api>) -> Response {
    match stats_value(&api).await {
        Ok(v) => Json(v).into_response(),
        Err(e) => internal(e),
    }
}

/// The query of `GET /v1/items`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    /// `queued`, `in_flight`, `pending`, `submitted`, `failed` or `deferred` (any case).
    state: String,
    /// Only items now targeting this provider.
    #[serde(default)]
    provider: Option<String>,
    /// Items per page, 1 to [`MAX_PAGE`]; default [`DEFAULT_PAGE`].
    #[serde(default)]
    limit: Option<usize>,
    /// Items of the listing to skip (newest first): the previous page's `next_offset`.
    #[serde(default)]
    offset: Option<usize>,
}

/// Items per page of `GET /v1/items` unless `limit` says otherwise.
const DEFAULT_PAGE: usize = 100;
/// Most items per page of `GET /v1/items`.
const MAX_PAGE: usize = 1000;

/// `GET /v1/items?state=S[&provider=P][&limit=N][&offset=K]`: the items in one state,
/// newest first, a page at a time, as `abide status --list` shows them (ids, providers,
/// attempts, reason, the last provider code; never request data). `next_offset` names the
/// next page while one may follow. Pages reach back as far as the store lists at once
/// ([`ListFilter::MAX_LIMIT`] items, a person's view rather than an export).
async fn list(State(api): State<Api>, query: Result<Query<ListQuery>, QueryRejection>) -> Response {
    let q = match query {
        Ok(Query(q)) => q,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                bounded(&e.body_text()),
            )
        }
    };
    let Ok(state) = q.state.to_ascii_uppercase().parse::<ItemState>() else {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_query",
            format!(
                "state {} is not one of queued, in_flight, pending, submitted, failed, deferred",
                echo::clip(&q.state)
            ),
        );
    };
    let limit = q.limit.unwrap_or(DEFAULT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_query",
            format!("limit must be 1 to {MAX_PAGE}"),
        );
    }
    let offset = q.offset.unwrap_or(0);
    if offset.saturating_add(limit) > ListFilter::MAX_LIMIT {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_query",
            format!(
                "offset + limit must be at most {}: pages reach back that far; narrow the \
                 listing with provider",
                ListFilter::MAX_LIMIT
            ),
        );
    }
    let filter = ListFilter {
        state: Some(state),
        provider: q.provider,
        // One more than the page says whether another follows.
        limit: offset + limit + 1,
    };
    let mut items = match api.store.list(&filter).await {
        Ok(items) => items,
        Err(e) => return store_error(e),
    };
    let more = items.len() > offset + limit;
    items.truncate(offset + limit);
    let rows: Vec<Value> = items
        .iter()
        .skip(offset)
        .map(|it| {
            json!({
                "id": it.id,
                "provider": it.current_provider,
                "original_provider": it.provider,
                "state": it.state.as_str(),
                "attempts": it.attempts,
                "reason": it.reason,
                "last_provider_code": it.last_provider_code.map(|c| c.to_string()),
                "message_id": it.message_id,
                "created_at": abide_core::rfc3339::format(it.created_at),
            })
        })
        .collect();
    let next = (more && offset + limit < ListFilter::MAX_LIMIT).then_some(offset + limit);
    Json(json!({ "state": state.as_str(), "items": rows, "next_offset": next })).into_response()
}

/// The OpenAPI 3.1 description of `/v1`, `/healthz` and `/metrics`.
pub(crate) const OPENAPI: &str = include_str!("../../../assets/openapi.json");

/// `GET /v1/openapi.json`: [`OPENAPI`], open like `/healthz` (it says what the API is, not
/// what it holds).
async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequeueBody {
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    ids: Option<Vec<String>>,
    /// FAILED items instead of DEFERRED ones (a person overrules a terminal verdict), as
    /// `abide requeue --failed`.
    #[serde(default)]
    failed: bool,
}

/// `POST /v1/requeue`: DEFERRED (or, with `"failed": true`, FAILED) → QUEUED, optionally
/// only for a provider or some ids. An empty body requeues every deferred item. As `abide
/// requeue` exits 1 for them, a provider no item targets (a typo) and ids none of which is
/// in that state are 404s, not a quiet `{"requeued": 0}`.
async fn requeue(State(api): State<Api>, body: Result<Bytes, BytesRejection>) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(e) => return body_error(&e),
    };
    let b: RequeueBody = if body.iter().all(u8::is_ascii_whitespace) {
        RequeueBody::default()
    } else {
        match serde_json::from_slice(&body) {
            Ok(b) => b,
            Err(e) => return error(StatusCode::BAD_REQUEST, "invalid_json", bounded(&e)),
        }
    };
    // Each id is one statement inside one write transaction: a body of millions of ids
    // would hold the writer (and stall delivery) for as long as it takes.
    if b.ids.as_ref().is_some_and(|ids| ids.len() > MAX_BATCH) {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_many_ids",
            format!("at most {MAX_BATCH} ids per request"),
        );
    }
    let filter = RequeueFilter {
        provider: b.provider,
        ids: b.ids,
    };
    let (moved, state) = if b.failed {
        (
            api.store.requeue_failed(&filter, api.clock.now()).await,
            "FAILED",
        )
    } else {
        (
            api.store.requeue_deferred(&filter, api.clock.now()).await,
            "DEFERRED",
        )
    };
    let n = match moved {
        Ok(n) => n,
        Err(e) => return store_error(e),
    };
    if n == 0 {
        if let Some(p) = &filter.provider {
            match api.store.counts_by_state(Some(p)).await {
                Ok(c) if c.total() == 0 => {
                    return error(
                        StatusCode::NOT_FOUND,
                        "unknown_provider",
                        format!("no item targets provider `{}`", bounded(p)),
                    )
                }
                Ok(_) => {}
                Err(e) => return internal(e),
            }
        }
        if filter.ids.as_ref().is_some_and(|ids| !ids.is_empty()) {
            return error(
                StatusCode::NOT_FOUND,
                "no_such_items",
                format!("none of the given ids is {state}"),
            );
        }
    }
    Json(json!({"requeued": n})).into_response()
}

/// `GET /metrics`: Prometheus text. Database gauges are refreshed on every scrape.
async fn metrics(State(api): State<Api>) -> Response {
    let snap = Snapshot::load(&api.store, api.clock.now()).await.ok();
    let live = api.live();
    let fault = (api.store_fault)().map(|(lasted, _)| lasted);
    serve_metrics::record(snap.as_ref(), live.as_ref(), fault);
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        api.metrics.render(),
    )
        .into_response()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_store_at_fault_is_503_with_retry_after() {
        let full = abide_outbox::Error::from(sqlx::Error::Io(std::io::Error::other(
            "database or disk is full",
        )));
        let r = store_error(full);
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.headers()[header::RETRY_AFTER], "5");
        let r = store_error(abide_outbox::Error::InvalidRequest("x".into()));
        assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }

    /// `(METHOD, path)` of every `.route(..)` in `src`, the router's own text, with
    /// axum's `{id}` captures as OpenAPI spells them.
    fn routes_in(src: &str) -> std::collections::BTreeSet<(String, String)> {
        let mut out = std::collections::BTreeSet::new();
        for part in src.split(".route(").skip(1) {
            let Some(part) = part.trim_start().strip_prefix('"') else {
                continue;
            };
            let Some((path, rest)) = part.split_once('"') else {
                continue;
            };
            // The handlers up to the `)` that closes `.route(`.
            let mut depth = 1;
            let end = rest
                .char_indices()
                .find(|&(_, ch)| {
                    match ch {
                        '(' => depth += 1,
                        ')' => depth -= 1,
                        _ => {}
                    }
                    depth == 0
                })
                .map_or(rest.len(), |(i, _)| i);
            for method in ["get", "post", "put", "patch", "delete"] {
                let handlers = &rest[..end];
                let called = handlers
                    .match_indices(&format!("{method}("))
                    .any(|(i, _)| i == 0 || !handlers.as_bytes()[i - 1].is_ascii_alphanumeric());
                if called {
                    out.insert((method.to_ascii_uppercase(), path.to_owned()));
                }
            }
        }
        out
    }

    #[test]
    fn the_openapi_description_names_exactly_the_routes_of_the_router() {
        let doc: Value = serde_json::from_str(OPENAPI).unwrap();
        assert_eq!(doc["openapi"], "3.1.0");
        let mut described = std::collections::BTreeSet::new();
        for (path, ops) in doc["paths"].as_object().unwrap() {
            for method in ops.as_object().unwrap().keys() {
                described.insert((method.to_ascii_uppercase(), path.clone()));
            }
        }
        // Every file that routes: the API, the dashboard's page, files and data.
        let mut routed = std::collections::BTreeSet::new();
        for src in [include_str!("api.rs"), include_str!("dashboard.rs")] {
            let router = &src[..src.find("#[cfg(test)]").unwrap_or(src.len())];
            routed.extend(routes_in(router));
        }
        for (method, path) in [
            ("GET", "/v1/items/{id}"),
            ("POST", "/v1/items/{id}/cancel"),
            ("GET", "/"),
            ("GET", "/dashboard/state.json"),
            ("GET", "/assets/dashboard.js"),
        ] {
            assert!(
                routed.contains(&(method.to_owned(), path.to_owned())),
                "{path}"
            );
        }
        assert_eq!(described, routed);
        // Every reference resolves to a schema of the document.
        let text = OPENAPI;
        for r in text.split("\"$ref\": \"#/components/schemas/").skip(1) {
            let name = &r[..r.find('"').unwrap()];
            assert!(doc["components"]["schemas"].get(name).is_some(), "{name}");
        }
    }

    #[test]
    fn digests_compare_in_constant_time_and_correctly() {
        assert!(ct_eq(&digest("s3cret"), &digest("s3cret")));
        assert!(!ct_eq(&digest("s3cret"), &digest("s3cres")));
        assert!(!ct_eq(&digest(""), &digest("s3cret")));
    }
}
