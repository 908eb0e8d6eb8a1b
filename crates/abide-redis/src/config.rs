//! `[coordination]` of a providers file, checked: which Redis the nodes share their limits
//! through, how many nodes to assume before it answers, and the prefix of a deployment's
//! keys.
//!
//! ```toml
//! [coordination]
//! redis_url = "redis://127.0.0.1:6379"   # none: each node alone, in memory
//! expected_nodes = 2                     # assumed while Redis has not answered
//! key_prefix = "abide"                   # keys are <key_prefix>:coord:<limit key>
//! ```

use std::fmt;

use abide_core::echo::{self, clip};

use crate::{coordination_prefix, CoordinationTarget};

/// The Redis key prefix when none is configured.
pub const DEFAULT_KEY_PREFIX: &str = "abide";

/// Longest Redis key prefix accepted, in bytes.
pub const MAX_KEY_PREFIX: usize = 64;

/// Nodes assumed to share a limit when Redis is configured but has not answered yet:
/// configuring Redis means more than one node is meant to run.
pub const DEFAULT_EXPECTED_NODES: u32 = 2;

/// Most nodes `expected_nodes` may assume.
pub const MAX_EXPECTED_NODES: u32 = 1000;

/// A `redis://` or `rediss://` URL. It may hold a password: `Debug` and `Display` show it
/// redacted ([`echo::redact_url`]); [`RedisUrl::expose`] gives it whole, for connecting.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisUrl(String);

impl RedisUrl {
    /// Check that `url` names a Redis (`redis://` or `rediss://`; the rest is the redis
    /// crate's to parse when connecting).
    ///
    /// # Errors
    /// [`ConfigError`] for `redis_url`, the URL shown redacted.
    pub fn parse(url: impl Into<String>) -> Result<Self, ConfigError> {
        let url = url.into();
        if url.starts_with("redis://") || url.starts_with("rediss://") {
            Ok(Self(url))
        } else {
            Err(ConfigError {
                setting: "redis_url",
                problem: format!(
                    "{} is not a redis:// or rediss:// URL",
                    clip(&echo::redact_url(&url))
                ),
            })
        }
    }

    /// The URL, password included: for connecting only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Check that the redis crate can read the whole URL (host, port, database, user),
    /// without connecting: a URL that passes starts [`RedisCoordination`](crate::RedisCoordination)
    /// (whether the server answers is found out later, and only ever means fallback).
    ///
    /// # Errors
    /// [`ConfigError`] for `redis_url`: what the redis crate refused, password redacted.
    pub fn check(&self) -> Result<(), ConfigError> {
        redis::Client::open(self.0.as_str())
            .map(drop)
            .map_err(|e| ConfigError {
                setting: "redis_url",
                problem: format!(
                    "{}: {}",
                    clip(&echo::redact_url(&self.0)),
                    echo::redact_text(&e.to_string())
                ),
            })
    }
}

impl fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RedisUrl")
            .field(&echo::redact_url(&self.0))
            .finish()
    }
}

impl fmt::Display for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&echo::redact_url(&self.0))
    }
}

/// How several nodes (outbox nodes, in-process clients) share each limit through Redis.
///
/// # Default
/// No Redis (each node alone, in memory), [`DEFAULT_EXPECTED_NODES`] nodes assumed,
/// key prefix [`DEFAULT_KEY_PREFIX`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinationConfig {
    /// `redis_url`: the Redis through which the nodes share each limit; `None` = this node
    /// alone, in memory.
    pub redis_url: Option<RedisUrl>,
    /// `expected_nodes`: how many nodes a node assumes share each limit while Redis has
    /// not answered since it started (it sends `rate ÷ expected_nodes` then, never the
    /// whole rate alone); 1..=[`MAX_EXPECTED_NODES`].
    pub expected_nodes: u32,
    /// `key_prefix`: the first part of every Redis key this deployment's nodes share
    /// limits under (`<key_prefix>:coord:<limit key>`). Two unrelated deployments on one
    /// Redis that name a provider alike and use the same key share one limit unless their
    /// prefixes differ. Checked by [`check_key_prefix`].
    pub key_prefix: String,
}

impl Default for CoordinationConfig {
    fn default() -> Self {
        Self {
            redis_url: None,
            expected_nodes: DEFAULT_EXPECTED_NODES,
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
        }
    }
}

impl CoordinationConfig {
    /// The settings as a file gives them (each optional), checked; absent ones take their
    /// defaults.
    ///
    /// # Errors
    /// [`ConfigError`] naming the setting: a key prefix [`check_key_prefix`] refuses,
    /// `expected_nodes` outside 1..=[`MAX_EXPECTED_NODES`], a URL that is not `redis://`
    /// or `rediss://`.
    pub fn new(
        redis_url: Option<String>,
        expected_nodes: Option<u32>,
        key_prefix: Option<String>,
    ) -> Result<Self, ConfigError> {
        let key_prefix = key_prefix.unwrap_or_else(|| DEFAULT_KEY_PREFIX.to_owned());
        check_key_prefix(&key_prefix).map_err(|problem| ConfigError {
            setting: "key_prefix",
            problem,
        })?;
        let expected_nodes = match expected_nodes {
            None => DEFAULT_EXPECTED_NODES,
            Some(n @ 1..=MAX_EXPECTED_NODES) => n,
            Some(n) => {
                return Err(ConfigError {
                    setting: "expected_nodes",
                    problem: format!("{n} is out of range: 1..={MAX_EXPECTED_NODES} nodes"),
                })
            }
        };
        Ok(Self {
            redis_url: redis_url.map(RedisUrl::parse).transpose()?,
            expected_nodes,
            key_prefix,
        })
    }

    /// The prefix of this deployment's coordination keys: `<key_prefix>:coord`.
    pub fn coordination_prefix(&self) -> String {
        coordination_prefix(&self.key_prefix)
    }

    /// Where node `node` (unique per process) shares its limits; `None` without a Redis.
    pub fn target(&self, node: &str) -> Option<CoordinationTarget> {
        self.redis_url.as_ref().map(|url| CoordinationTarget {
            url: url.expose().to_owned(),
            prefix: self.coordination_prefix(),
            node: node.to_owned(),
            expected_nodes: self.expected_nodes,
        })
    }
}

/// A coordination setting that cannot work, named by its key in `[coordination]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting}: {problem}")]
#[non_exhaustive]
pub struct ConfigError {
    /// The setting: `redis_url`, `expected_nodes` or `key_prefix`.
    pub setting: &'static str,
    /// What is wrong with it (a value quoted is clipped, a URL redacted).
    pub problem: String,
}

/// Check a Redis key prefix (`[coordination] key_prefix`, `--redis-prefix`): 1 to
/// [`MAX_KEY_PREFIX`] characters among ASCII letters, digits, `_`, `-`, `.` and `:` (no
/// spaces and no glob characters, which `abide status` would read as a pattern).
///
/// # Errors
/// A sentence saying what is wrong with it.
pub fn check_key_prefix(prefix: &str) -> Result<(), String> {
    if prefix.is_empty() {
        return Err("is empty: give a name such as \"abide\" or \"billing-prod\"".into());
    }
    if prefix.len() > MAX_KEY_PREFIX {
        return Err(format!(
            "is {} bytes long: at most {MAX_KEY_PREFIX}",
            prefix.len()
        ));
    }
    if let Some(c) = prefix
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')))
    {
        return Err(format!(
            "{} holds {c:?}: use ASCII letters, digits, '_', '-', '.' and ':' only",
            clip(prefix)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_bounds_name_the_setting() {
        let c = CoordinationConfig::new(None, None, None).unwrap();
        assert_eq!(c, CoordinationConfig::default());
        assert_eq!(c.coordination_prefix(), "abide:coord");
        assert!(c.target("n").is_none());
        for (n, ok) in [(0, false), (1, true), (1000, true), (1001, false)] {
            let r = CoordinationConfig::new(None, Some(n), None);
            assert_eq!(r.is_ok(), ok, "{n}: {r:?}");
            if let Err(e) = r {
                assert_eq!(e.setting, "expected_nodes");
            }
        }
        let e = CoordinationConfig::new(None, None, Some("a b".into())).unwrap_err();
        assert_eq!(e.setting, "key_prefix");
        assert!(e.problem.contains("holds ' '"), "{e}");
        assert_eq!(check_key_prefix(&"x".repeat(64)), Ok(()));
        assert!(check_key_prefix(&"x".repeat(65)).is_err());
        assert!(check_key_prefix("").is_err());
        assert!(check_key_prefix("a\u{e9}")
            .unwrap_err()
            .contains("ASCII letters"));
    }

    #[test]
    fn a_url_is_checked_and_never_shown_with_its_password() {
        let e = CoordinationConfig::new(Some("http://u:PASS@h".into()), None, None).unwrap_err();
        assert_eq!(e.setting, "redis_url");
        assert!(!e.to_string().contains("PASS"), "{e}");
        let c = CoordinationConfig::new(
            Some("redis://:PASS@127.0.0.1:6379/2".into()),
            Some(3),
            Some("billing".into()),
        )
        .unwrap();
        let url = c.redis_url.as_ref().unwrap();
        assert_eq!(url.expose(), "redis://:PASS@127.0.0.1:6379/2");
        assert!(!format!("{url} {url:?} {c:?}").contains("PASS"));
        assert_eq!(url.check(), Ok(()));
        let bad = RedisUrl::parse("redis://:PASS@127.0.0.1:99999999").unwrap();
        let e = bad.check().unwrap_err();
        assert_eq!(e.setting, "redis_url");
        assert!(!e.to_string().contains("PASS"), "{e}");
        let t = c.target("node-1").unwrap();
        assert_eq!(
            (t.prefix.as_str(), t.node.as_str(), t.expected_nodes),
            ("billing:coord", "node-1", 3)
        );
    }
}
