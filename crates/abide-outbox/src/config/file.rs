//! The providers file as written (TOML), and its reading into [`super::ProviderConfig`]:
//! the keys every provider shares are read here; the rest go to the provider's transport
//! ([`crate::transport::TransportSettings`], its `Kind`), which reads and checks them.

use std::fmt;
use std::time::Duration;

use abide_core::session::limits::FAILOVER_AFTER_PENDING;
use abide_core::{ClassifyOverrides, Dialect};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use toml::Spanned;

use super::provider::{FailoverConfig, ProviderConfig};
use super::session::{self, FileBudget, FilePacer, FileRetry};
use crate::echo::{self, clip};
use crate::error::Error;
use crate::model::MAX_PROVIDER_NAME_LEN;
use crate::toml_keys::{Keys, Span, TableError};
use crate::transport::{Kind, KINDS};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileConfig {
    #[serde(default)]
    pub(super) provider: Vec<FileProvider>,
    pub(super) coordination: Option<FileCoordination>,
}

/// `[coordination]`: how several nodes share each provider's limit. Without the `redis`
/// feature it is read only to be refused by name.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub(super) struct FileCoordination {
    pub(super) redis_url: Option<String>,
    pub(super) expected_nodes: Option<u32>,
    pub(super) key_prefix: Option<String>,
}

/// The keys every provider shares, read here; every other key is its transport's.
const SHARED_KEYS: &[&str] = &[
    "name",
    "transport",
    "rate_hint",
    "max_rate",
    "retry",
    "budget",
    "pacer",
    "classify",
    "rate_limit_dialect",
    "failover",
];

/// One `[[provider]]` table: the shared keys, typed, and its transport's keys with
/// their places in the file.
#[derive(Default)]
pub(super) struct FileProvider {
    name: Option<String>,
    transport: Option<Spanned<String>>,
    rate_hint: Option<f64>,
    max_rate: Option<f64>,
    retry: FileRetry,
    budget: FileBudget,
    pacer: FilePacer,
    classify: ClassifyOverrides,
    rate_limit_dialect: Option<String>,
    failover: Option<FileFailover>,
    rest: Keys,
}

impl<'de> Deserialize<'de> for FileProvider {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ProviderVisitor)
    }
}

struct ProviderVisitor;

impl<'de> Visitor<'de> for ProviderVisitor {
    type Value = FileProvider;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a [[provider]] table")
    }

    // Each shared value is read where it stands, so the parser's errors keep their
    // place; the others are kept, spanned, for the transport.
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FileProvider, A::Error> {
        let mut p = FileProvider::default();
        while let Some(key) = map.next_key::<Spanned<String>>()? {
            match key.get_ref().as_str() {
                "name" => p.name = Some(map.next_value()?),
                "transport" => p.transport = Some(map.next_value()?),
                "rate_hint" => p.rate_hint = Some(map.next_value()?),
                "max_rate" => p.max_rate = Some(map.next_value()?),
                "retry" => p.retry = map.next_value()?,
                "budget" => p.budget = map.next_value()?,
                "pacer" => p.pacer = map.next_value()?,
                "classify" => p.classify = map.next_value()?,
                "rate_limit_dialect" => p.rate_limit_dialect = Some(map.next_value()?),
                "failover" => p.failover = Some(map.next_value()?),
                _ => {
                    let value = map.next_value()?;
                    p.rest.0.push((key, value));
                }
            }
        }
        if p.name.is_none() {
            return Err(de::Error::missing_field("name"));
        }
        Ok(p)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileFailover {
    to: String,
    after_pending_secs: i64,
}

/// A file-level setting refused.
pub(super) fn invalid(field: &str, message: impl Into<String>) -> Error {
    Error::Config {
        provider: None,
        field: field.to_owned(),
        message: message.into(),
    }
}

/// An error for a key that the provider's transport does not use.
fn not_for(n: &str, field: &str, transport: &str) -> Error {
    Error::config(
        n,
        field,
        format!("is not used by transport = \"{transport}\"; remove it"),
    )
}

/// A TOML error at `span` of `text` (or without a place), its message redacted and
/// bounded; never the source line the parser would quote (a line may hold anything, a
/// password in a URL included).
pub(super) fn toml_error(text: &str, span: Option<Span>, message: &str) -> Error {
    let message = echo::truncate(
        &echo::redact_text(&without_quoted_value(message.trim_end())),
        echo::MAX_MESSAGE_BYTES,
    );
    let key_at = span.as_ref().map(|s| s.start);
    let (line, column) = match span {
        Some(span) => {
            let before = text.get(..span.start).unwrap_or("");
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            (Some(line), Some(column))
        }
        None => (None, None),
    };
    // The key of the offending line, when the parser's message does not name it ("number
    // too large to fit in target type" says nothing of where): a bare key only, never
    // the value.
    let key = key_at
        .and_then(|at| line_key(text, at))
        .filter(|k| !message.contains(k.as_str()));
    let message = match key {
        Some(k) => format!("{k}: {message}"),
        None => message,
    };
    Error::Toml {
        line,
        column,
        message,
    }
}

/// The key whose value starts at byte `at` of `text`, if the line reads plainly `key =`
/// right before it (whitespace and an opening `[` aside), the key is a bare or dotted one
/// of at most 64 bytes (TOML 1.0 §Keys: `A-Za-z0-9_-` and `.`), only whitespace, `{` or
/// `,` precede the key on its line (an inline table's key is named alone), and `at` is
/// not inside a multi-line string. Anything less plain names nothing: a key is shown,
/// never a value.
fn line_key(text: &str, at: usize) -> Option<String> {
    let before = text.get(..at)?;
    if before.matches("\"\"\"").count() % 2 == 1 || before.matches("\'\'\'").count() % 2 == 1 {
        return None;
    }
    let line = &before[before.rfind('\n').map_or(0, |i| i + 1)..];
    let (head, after) = line.rsplit_once('=')?;
    if !after.chars().all(|c| c.is_whitespace() || c == '[') {
        return None;
    }
    let head = head.trim_end();
    let bare = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    let start = head.rfind(|c: char| !bare(c)).map_or(0, |i| i + 1);
    let (lead, key) = head.split_at(start);
    let lead = lead.trim();
    let plain = lead.is_empty() || lead.ends_with('{') || lead.ends_with(',');
    (plain && !key.is_empty() && key.len() <= 64).then(|| key.to_owned())
}

/// The parser's message without a value it quotes: serde's `invalid type: string "…",
/// expected …` names what the file holds (a secret, perhaps, on the wrong key); the kind
/// of value is kept, its text is not.
fn without_quoted_value(message: &str) -> String {
    for lead in ["invalid type: string \"", "invalid value: string \""] {
        if let Some(i) = message.find(lead) {
            if let Some(end) = message.rfind("\", expected") {
                if end >= i + lead.len() - 1 {
                    let kind = &lead[..lead.len() - 1];
                    return format!(
                        "{}{}{}",
                        &message[..i],
                        kind.trim_end(),
                        &message[end + 1..]
                    );
                }
            }
        }
    }
    message.to_owned()
}

/// The transport `p` names (`http` when it names none).
fn kind_of(n: &str, p: &FileProvider) -> Result<&'static Kind, Error> {
    let name = p
        .transport
        .as_ref()
        .map_or("http", |t| t.get_ref().as_str());
    KINDS.iter().find(|k| k.name == name).ok_or_else(|| {
        let known: Vec<String> = KINDS.iter().map(|k| format!("{:?}", k.name)).collect();
        Error::config(
            n,
            "transport",
            format!(
                "{} is not a transport of this build; use {}",
                clip(name),
                known.join(" or ")
            ),
        )
    })
}

/// Split `p`'s own keys off by transport: a key of another transport is refused by name,
/// a key of none is a TOML error at its place.
fn transport_keys(n: &str, kind: &Kind, p: &mut FileProvider) -> Result<Keys, TableError> {
    let own = (kind.keys)();
    let mut keys = Keys::default();
    for (key, value) in std::mem::take(&mut p.rest.0) {
        let k = key.get_ref().as_str();
        if own.contains(&k) {
            keys.0.push((key, value));
        } else if KINDS.iter().any(|other| (other.keys)().contains(&k)) {
            return Err(not_for(n, k, kind.name).into());
        } else {
            let expected: Vec<String> = SHARED_KEYS
                .iter()
                .chain(own)
                .map(|k| format!("`{k}`"))
                .collect();
            return Err(TableError::At {
                span: key.span(),
                message: format!(
                    "unknown field `{}`, expected one of {}",
                    clip(k),
                    expected.join(", ")
                ),
            });
        }
    }
    let shared = [
        ("rate_limit_dialect", p.rate_limit_dialect.is_some()),
        (
            "pacer.use_rate_limit_headers",
            p.pacer.use_rate_limit_headers.is_some(),
        ),
        ("classify.http", !p.classify.http.is_empty()),
        ("classify.smpp", !p.classify.smpp.is_empty()),
        ("classify.body", !p.classify.body.is_empty()),
        ("classify.header", !p.classify.header.is_empty()),
    ];
    for (field, set) in shared {
        if set && kind.unused_shared.contains(&field) {
            return Err(not_for(n, field, kind.name).into());
        }
    }
    Ok(keys)
}

pub(super) fn validate_provider(mut p: FileProvider) -> Result<ProviderConfig, TableError> {
    let name = p.name.take().unwrap_or_default();
    if name.is_empty()
        || name.len() > MAX_PROVIDER_NAME_LEN
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
    {
        // The error quotes the name (`provider "…"`): bounded, like every echo.
        let shown = echo::truncate(&name, echo::MAX_ECHO_BYTES);
        let why = format!("must be 1-{MAX_PROVIDER_NAME_LEN} characters of A-Z a-z 0-9 - _ .");
        return Err(Error::config(&shown, "name", why).into());
    }
    let n = name.as_str();
    let kind = kind_of(n, &p)?;
    let keys = transport_keys(n, kind, &mut p)?;
    let transport = (kind.read)(n, &keys)?;
    let rate_limit_dialect = match &p.rate_limit_dialect {
        Some(v) => v
            .parse::<Dialect>()
            .map_err(|e| Error::config(n, "rate_limit_dialect", e.to_string()))?,
        None => Dialect::Auto,
    };
    let (retry, budget, mut pacer) = session::rules(n, &p.retry, &p.budget, &p.pacer)?;
    pacer.rate_hint = p.rate_hint;
    pacer.max_rate = p.max_rate;
    let failover = p
        .failover
        .map(|f| {
            let field = "failover.after_pending_secs";
            let range = FAILOVER_AFTER_PENDING;
            let after_pending = session::duration(
                n,
                field,
                Some(f.after_pending_secs),
                Duration::ZERO,
                Duration::from_secs,
                range,
            )?;
            if !range.contains(&after_pending) {
                let why = format!("{} is outside {range}", f.after_pending_secs);
                return Err(Error::config(n, field, why));
            }
            Ok::<_, Error>(FailoverConfig {
                to: f.to,
                after_pending,
            })
        })
        .transpose()?;
    let cfg = ProviderConfig {
        transport,
        retry,
        budget,
        pacer,
        classify: p.classify,
        rate_limit_dialect,
        failover,
        name,
    };
    session::check(&cfg)?;
    Ok(cfg)
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod schema_tests;
