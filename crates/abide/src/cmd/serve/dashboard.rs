//! The dashboard `abide serve` shows at `/`: server-rendered HTML with the numbers of the
//! moment (readable without JavaScript), then live charts drawn by the vendored uPlot
//! (`assets/uplot/`, no CDN: it works offline) from `/dashboard/state.json`, polled. On
//! opening, the page first loads `/dashboard/history.json` (the last hour, sampled by serve
//! every 5 s: [`super::history`]), so a new tab or a reload does not start the charts empty.
//!
//! Read-only without the token: the page and its data carry counts, provider state and the
//! ids and reasons of recent `FAILED`/`DEFERRED` items, never request bodies or headers.
//! Actions (requeue) call `POST /v1/requeue` with the token the operator types into the
//! page (kept in the tab's `sessionStorage`, sent as `Authorization: Bearer`, so a
//! cross-site form cannot ride on it). With `--metrics-auth` the data needs the token too.

use std::fmt::Write as _;

use abide_outbox::{ListFilter, State as ItemState, Store};
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use super::history::{unix_secs, ProviderSample, Sample};
use super::state::{stats_value, Api};

/// Recent items of each of `FAILED` and `DEFERRED` shown on the page.
const RECENT: usize = 20;

const UPLOT_JS: &str = include_str!("../../../assets/uplot/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../../../assets/uplot/uPlot.min.css");
const UPLOT_LICENSE: &str = include_str!("../../../assets/uplot/LICENSE");
const DASHBOARD_JS: &str = include_str!("../../../assets/dashboard.js");
const DASHBOARD_CSS: &str = include_str!("../../../assets/dashboard.css");

/// Only our own files, no inline script, no framing (the requeue button must not be
/// clickjacked). uPlot sizes its elements through `element.style`, which `style-src
/// 'self'` allows (CSSOM, not markup).
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// The page and its static files (always open).
pub(crate) fn page_routes() -> Router<Api> {
    Router::new()
        .route("/", get(page))
        .route(
            "/assets/uplot.min.js",
            get(|| asset("text/javascript", UPLOT_JS)),
        )
        .route(
            "/assets/uplot.min.css",
            get(|| asset("text/css", UPLOT_CSS)),
        )
        .route(
            "/assets/uplot-LICENSE.txt",
            get(|| asset("text/plain", UPLOT_LICENSE)),
        )
        .route(
            "/assets/dashboard.js",
            get(|| asset("text/javascript", DASHBOARD_JS)),
        )
        .route(
            "/assets/dashboard.css",
            get(|| asset("text/css", DASHBOARD_CSS)),
        )
}

/// The page's data (open unless `--metrics-auth`, like `/metrics`).
pub(crate) fn data_routes() -> Router<Api> {
    Router::new()
        .route("/dashboard/state.json", get(data))
        .route("/dashboard/history.json", get(history))
}

async fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("max-age=3600"),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        body,
    )
        .into_response()
}

/// Recent `FAILED` and `DEFERRED` items: what an operator acts on. Ids, provider, reason,
/// attempts and times only (no request data).
async fn recent(api: &Api) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    for state in [ItemState::Deferred, ItemState::Failed] {
        let filter = ListFilter {
            state: Some(state),
            provider: None,
            limit: RECENT,
        };
        for it in api.store.list(&filter).await? {
            out.push(json!({
                "id": it.id,
                "provider": it.current_provider,
                "state": it.state.as_str(),
                "reason": it.reason,
                "last_provider_code": it.last_provider_code.map(|c| c.to_string()),
                "attempts": it.attempts,
                "created_at": abide_core::rfc3339::format(it.created_at),
            }));
        }
    }
    Ok(out)
}

async fn state_value(api: &Api) -> anyhow::Result<Value> {
    let mut v = stats_value(api).await?;
    v["recent"] = Value::Array(recent(api).await?);
    v["now"] = Value::String(abide_core::rfc3339::format(api.clock.now()));
    Ok(v)
}

/// `GET /dashboard/state.json`: `/v1/stats` plus recent failed and deferred items.
async fn data(State(api): State<Api>) -> Response {
    match state_value(&api).await {
        Ok(v) => Json(v).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "dashboard data failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(json!({"error": "internal"})),
            )
                .into_response()
        }
    }
}

/// What the charts show now, for the history: counts, oldest waiting age and each
/// provider's pace, limits and throttled fraction (the dispatcher's latest snapshot).
///
/// # Errors
/// Database errors.
pub(crate) async fn sample(api: &Api) -> anyhow::Result<Sample> {
    let now = api.clock.now();
    let counts = api.store.counts_by_state(None).await?;
    let age = api.store.oldest_pending_age(now).await?;
    let providers = api
        .live()
        .map(|p| p.providers.iter().map(ProviderSample::of).collect())
        .unwrap_or_default();
    Ok(Sample {
        at_secs: unix_secs(now),
        counts,
        oldest_pending_age_secs: age.map(|d| d.as_secs_f64()),
        providers,
    })
}

/// `GET /dashboard/history.json`: the samples kept, oldest first (no database read).
async fn history(State(api): State<Api>) -> Response {
    let mut r = Json(api.history.to_json()).into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// HTML-escape text for element content and quoted attribute values.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `GET /`: the dashboard. The first numbers are rendered here, so the page says something
/// without JavaScript (and before the first poll); the script then keeps them live.
async fn page(State(api): State<Api>) -> Response {
    // Without --metrics-auth the data is open: render it. With it, the page waits for the
    // token (the script fetches once one is entered).
    let data = if api.metrics_auth {
        None
    } else {
        state_value(&api).await.ok()
    };
    let mut r = Html(render(data.as_ref(), api.metrics_auth)).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn num(v: &Value) -> String {
    match v.as_f64() {
        Some(x) if x.fract() == 0.0 && x.abs() < 1e15 => format!("{x:.0}"),
        Some(x) => format!("{x:.2}"),
        None => "–".to_owned(),
    }
}

/// The page. `data` is the state to render first (none: placeholders).
fn render(data: Option<&Value>, data_needs_token: bool) -> String {
    let null = Value::Null;
    let d = data.unwrap_or(&null);
    let mut states = String::new();
    for st in ItemState::ALL {
        let key = st.as_str().to_ascii_lowercase();
        let _ = write!(
            states,
            r#"<tr><th scope="row">{name}</th><td id="count-{key}" data-state="{key}">{n}</td></tr>"#,
            name = st.as_str(),
            n = num(&d["counts"][key.as_str()]),
        );
    }
    let mut providers = String::new();
    for p in d["providers"].as_array().into_iter().flatten() {
        let name = esc(p["name"].as_str().unwrap_or("?"));
        let lp = &p["last_pause"];
        let _ = write!(
            providers,
            "<tr><th scope=\"row\">{name}</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            num(&p["in_flight"]["on_wire"]),
            num(&p["pace_per_sec"]),
            num(&p["ceiling_per_sec"]),
            num(&p["advertised_rate_per_sec"]),
            num(&p["paused_for_secs"]),
            esc(lp["reason"].as_str().unwrap_or("–")),
            esc(lp["retry_after_raw"].as_str().unwrap_or("–")),
            esc(lp["at"].as_str().unwrap_or("–")),
        );
    }
    let age = num(&d["oldest_pending_age_secs"]);
    format!(
        r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>abide outbox</title>
<link rel="stylesheet" href="/assets/uplot.min.css">
<link rel="stylesheet" href="/assets/dashboard.css">
</head>
<body data-needs-token="{data_needs_token}">
<a class="skip" href="#main">Skip to content</a>
<header>
<h1>abide outbox</h1>
<form id="token-form" autocomplete="off">
<label for="token">API token (needed for actions)</label>
<input id="token" name="token" type="password" spellcheck="false">
<button type="submit">Use token</button>
<button type="button" id="token-clear">Forget token</button>
</form>
<p id="status" role="status" aria-live="polite">Live updates start when JavaScript runs.</p>
</header>
<main id="main">
<section aria-labelledby="h-states">
<h2 id="h-states">Items per state</h2>
<table class="numbers"><caption>Items in the outbox now; oldest waiting item <span id="oldest-age">{age}</span> s. IN_FLIGHT counts items a sender has claimed (leased), most of them waiting for their slot in the pace; the requests on the wire are in Providers</caption>
<tbody>{states}</tbody></table>
<figure><div id="chart-states" class="chart" role="img" aria-label="Items per state over time"></div>
<figcaption id="chart-states-caption"></figcaption></figure>
<figure><div id="chart-age" class="chart" role="img" aria-label="Age of the oldest waiting item over time, seconds"></div>
<figcaption id="chart-age-caption"></figcaption></figure>
</section>
<section aria-labelledby="h-providers">
<h2 id="h-providers">Providers</h2>
<table class="grid" id="providers"><caption>Requests on the wire now; pace, learned ceiling and advertised limit (requests per second); the last throttle each provider sent, with the Retry-After exactly as heard</caption>
<thead><tr><th scope="col">Provider</th><th scope="col">On the wire</th><th scope="col">Pace</th><th scope="col">Learned ceiling</th><th scope="col">Advertised</th><th scope="col">Pause left (s)</th><th scope="col">Last throttle</th><th scope="col">Raw Retry-After</th><th scope="col">Heard at</th></tr></thead>
<tbody>{providers}</tbody></table>
<div id="provider-charts"></div>
<figure><div id="chart-throttle" class="chart" role="img" aria-label="Throttled fraction of responses per provider over time"></div>
<figcaption id="chart-throttle-caption"></figcaption></figure>
</section>
<section aria-labelledby="h-remote">
<h2 id="h-remote">Attempts per remote status</h2>
<table class="grid" id="remote"><caption>What the remote answered, all attempts recorded</caption>
<thead><tr><th scope="col">Remote status</th><th scope="col">Attempts</th></tr></thead><tbody></tbody></table>
</section>
<section aria-labelledby="h-recent">
<h2 id="h-recent">Recent failed and deferred items</h2>
<table class="grid" id="recent"><caption>Newest first; a deferred item can be requeued (needs the token)</caption>
<thead><tr><th scope="col">Item</th><th scope="col">Provider</th><th scope="col">State</th><th scope="col">Reason</th><th scope="col">Last remote code</th><th scope="col">Attempts</th><th scope="col">Action</th></tr></thead><tbody></tbody></table>
<h3 id="h-actions">Actions</h3>
<ul id="actions" aria-labelledby="h-actions" aria-live="polite"></ul>
</section>
</main>
<footer><p>Charts: uPlot (MIT, <a href="/assets/uplot-LICENSE.txt">licence</a>). Metrics: <a href="/metrics">/metrics</a>.</p></footer>
<script src="/assets/uplot.min.js"></script>
<script src="/assets/dashboard.js"></script>
</body>
</html>
"##
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            esc(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn renders_counts_and_provider_pause_escaped() {
        let d = json!({
            "counts": {"queued": 3, "deferred": 2},
            "oldest_pending_age_secs": 12.5,
            "providers": [{
                "name": "sms<script>",
                "pace_per_sec": 4.0,
                "in_flight": {"on_wire": 4, "limit": null},
                "last_pause": {"reason": "http_429", "retry_after_raw": "\"7\"", "at": "t"},
            }],
        });
        let html = render(Some(&d), false);
        assert!(
            html.contains(r#"<td id="count-queued" data-state="queued">3</td>"#),
            "{html}"
        );
        assert!(html.contains(r#"<td id="count-deferred" data-state="deferred">2</td>"#));
        assert!(html.contains(">12.50</span>"));
        assert!(html.contains("sms&lt;script&gt;") && !html.contains("sms<script>"));
        // Requests on the wire beside the pace, apart from the claimed (IN_FLIGHT) items.
        assert!(
            html.contains("<th scope=\"col\">On the wire</th>"),
            "{html}"
        );
        assert!(html.contains("</th><td>4</td><td>4</td>"), "{html}");
        assert!(html.contains("<td>&quot;7&quot;</td>"));
        assert!(html.contains(r#"data-needs-token="false""#));
        // Every input has a label; no inline script.
        assert!(html.contains(r#"<label for="token">"#));
        assert!(!html.contains("<script>"));
    }
}
