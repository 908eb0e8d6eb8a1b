//! Reading what the nodes share, from outside any node (`abide status --redis`), and
//! checking a Redis URL at start ([`probe`]): a rejected password or a wrong database is a
//! configuration error, only an unreachable or slow Redis is a reason to fall back.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use abide_core::NodeSeen;
use redis::AsyncCommands;

use super::HEARTBEAT_TTL;

/// Most provider keys [`look`] reports (a bound on what a shared store holds).
pub const MAX_KEYS: usize = 256;

/// What is wrong with a Redis URL, found by [`probe`].
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// Redis answered and refused us (a rejected password, `NOAUTH`, a database index out
    /// of range, a malformed URL, missing permissions): a configuration error, not a reason
    /// to fall back.
    #[error("{url}: {message}")]
    Config {
        /// The URL, password redacted.
        url: String,
        /// What Redis (or the URL parser) said, and what to check.
        message: String,
    },
    /// Redis did not answer (connection refused, reset, no answer in time, loading): the
    /// nodes fall back and rejoin when it answers.
    #[error("{url}: {message}")]
    Unreachable {
        /// The URL, password redacted.
        url: String,
        /// What went wrong.
        message: String,
    },
}

/// Whether `e` says Redis is away for now (to fall back) rather than refusing us.
pub fn is_transient(e: &redis::RedisError) -> bool {
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_refusal()
        || e.is_connection_dropped()
        || matches!(
            e.code(),
            Some("LOADING" | "TRYAGAIN" | "MASTERDOWN" | "BUSY" | "CLUSTERDOWN")
        )
}

/// Connect to `url` and `PING`, within `timeout`.
///
/// # Errors
/// [`ProbeError::Config`] when Redis refuses the URL's credentials (`WRONGPASS`,
/// `NOAUTH`, or `AUTH` with a password on a server that has none), its database
/// (`SELECT` out of range) or the URL itself; [`ProbeError::Unreachable`] when it does not
/// answer within `timeout` or the connection fails.
pub async fn probe(url: &str, timeout: Duration) -> Result<(), ProbeError> {
    let shown = abide_core::echo::redact_url(url);
    let text = |e: &redis::RedisError| abide_core::echo::redact_text(&e.to_string());
    let client = redis::Client::open(url).map_err(|e| ProbeError::Config {
        url: shown.clone(),
        message: format!("not a usable Redis URL: {}", text(&e)),
    })?;
    let check = async {
        let mut c = client.get_multiplexed_async_connection().await?;
        redis::cmd("PING").query_async::<String>(&mut c).await
    };
    match tokio::time::timeout(timeout, check).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) if is_transient(&e) => Err(ProbeError::Unreachable {
            url: shown,
            message: text(&e),
        }),
        Ok(Err(e)) => Err(ProbeError::Config {
            url: shown,
            message: format!("Redis refused this node: {}; {}", text(&e), hint(&e)),
        }),
        Err(_) => Err(ProbeError::Unreachable {
            url: shown,
            message: format!("no answer within {timeout:?}"),
        }),
    }
}

/// What to check for a refusal.
fn hint(e: &redis::RedisError) -> &'static str {
    let s = e.to_string();
    if e.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(e.code(), Some("WRONGPASS" | "NOAUTH"))
        || s.contains("AUTH")
    {
        "check the user and password in the URL against the server's requirepass or ACL"
    } else if s.contains("DB index") || s.contains("SELECT") {
        "check the database number at the end of the URL (the server's `databases` setting bounds it)"
    } else if matches!(e.code(), Some("NOPERM")) {
        "the ACL user lacks a permission abide needs (EVALSHA, PING, TIME and the commands of its script on the key prefix)"
    } else {
        "check the URL"
    }
}

/// One provider key's shared state as every node sees it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SharedLimit {
    /// The key (prefix, provider and, when credentials are known, their digest).
    pub key: String,
    /// The learned rate all nodes follow, requests per second.
    pub rate: Option<f64>,
    /// The learned ceiling, requests per second.
    pub ceiling: Option<f64>,
    /// The shared pause's end, if the host is paused now (the Redis server's clock).
    #[serde(serialize_with = "opt_unix")]
    pub paused_until: Option<SystemTime>,
    /// The node that set the pause, when known.
    pub pause_by: Option<String>,
    /// Live nodes (heartbeat not expired), at most [`abide_core::MAX_NODES_SHOWN`].
    pub nodes: Vec<NodeSeen>,
    /// Live nodes in all (the list may be cut).
    pub node_count: u64,
}

fn opt_unix<S: serde::Serializer>(t: &Option<SystemTime>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.serialize_f64(
            t.duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
        ),
        None => s.serialize_none(),
    }
}

/// Every provider key under `prefix` on `url` (at most [`MAX_KEYS`], sorted), read
/// without writing anything.
///
/// # Errors
/// [`ProbeError`] as for [`probe`]; Redis errors while reading are
/// [`ProbeError::Unreachable`].
pub async fn look(
    url: &str,
    prefix: &str,
    timeout: Duration,
) -> Result<Vec<SharedLimit>, ProbeError> {
    probe(url, timeout).await?;
    let shown = abide_core::echo::redact_url(url);
    let read = async {
        let client = redis::Client::open(url)?;
        let mut c = client.get_multiplexed_async_connection().await?;
        let mut keys: Vec<String> = Vec::new();
        {
            let mut it = c
                .scan_match::<_, String>(format!("{prefix}:*:state"))
                .await?;
            while let Some(k) = it.next_item().await {
                keys.push(k);
                if keys.len() >= MAX_KEYS {
                    break;
                }
            }
        }
        keys.sort();
        let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(&mut c).await?;
        let now_us = secs.saturating_mul(1_000_000).saturating_add(micros);
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            let base = k.trim_end_matches(":state").to_owned();
            out.push(read_one(&mut c, base, now_us).await?);
        }
        Ok::<_, redis::RedisError>(out)
    };
    match tokio::time::timeout(timeout, read).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(ProbeError::Unreachable {
            url: shown,
            message: abide_core::echo::redact_text(&e.to_string()),
        }),
        Err(_) => Err(ProbeError::Unreachable {
            url: shown,
            message: format!("no answer within {timeout:?}"),
        }),
    }
}

async fn read_one(
    c: &mut redis::aio::MultiplexedConnection,
    key: String,
    now_us: u64,
) -> redis::RedisResult<SharedLimit> {
    let (rate, ceil, pause, pause_by): (
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
    ) = redis::cmd("HMGET")
        .arg(format!("{key}:state"))
        .arg(&["rate", "ceil", "pause", "pause_by"])
        .query_async(c)
        .await?;
    let now_s = now_us.to_string();
    let node_count: u64 = c
        .zcount(format!("{key}:nodes"), now_s.as_str(), "+inf")
        .await?;
    let live: Vec<(String, f64)> = redis::cmd("ZRANGEBYSCORE")
        .arg(format!("{key}:nodes"))
        .arg(&now_s)
        .arg("+inf")
        .arg("WITHSCORES")
        .arg("LIMIT")
        .arg(0)
        .arg(abide_core::MAX_NODES_SHOWN)
        .query_async(c)
        .await?;
    let ttl_us = u64::try_from(HEARTBEAT_TTL.as_micros()).unwrap_or(u64::MAX);
    let mut seen = Vec::with_capacity(live.len() * 3);
    for (node, expiry) in live {
        let info: Option<String> = c.hget(format!("{key}:info"), &node).await?;
        // Scores are whole microseconds far below 2^53.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let beat = (expiry.max(0.0) as u64).saturating_sub(ttl_us);
        seen.push(node);
        seen.push(now_us.saturating_sub(beat).to_string());
        seen.push(info.unwrap_or_default());
    }
    let pause_us = pause
        .and_then(|p| p.parse::<u64>().ok())
        .filter(|p| *p > now_us);
    Ok(SharedLimit {
        key,
        rate: rate.as_deref().and_then(super::sync::parse_rate),
        ceiling: ceil.as_deref().and_then(super::sync::parse_rate),
        paused_until: pause_us.map(|p| UNIX_EPOCH + Duration::from_micros(p)),
        pause_by: pause_us.and(pause_by).filter(|b| !b.is_empty()),
        nodes: super::sync::peers(seen.into_iter()),
        node_count,
    })
}
