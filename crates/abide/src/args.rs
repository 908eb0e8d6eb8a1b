//! Flag groups and value parsers that several subcommands share, flattened into their
//! `Args` (`#[command(flatten)]`), so a flag is spelled, checked and documented once.

use std::path::Path;
use std::time::Duration;

use abide_outbox::Config;

use crate::db;

/// `--db`, the outbox database of `send`, `serve`, `status` and `requeue`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct DbArgs {
    /// Outbox database: an SQLite file, `sqlite:PATH`, or `postgres://...`. `send` and
    /// `serve` create it when missing; `status` and `requeue` refuse a missing one.
    #[arg(long = "db", id = "db", default_value = db::DEFAULT_DB, value_name = "PATH|URL")]
    pub(crate) url: String,
}

/// `--redis` and `--redis-prefix` of a sending node (`send`, `serve`): the Redis its
/// providers' limits are shared on, and the deployment's key prefix there.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct RedisArgs {
    /// Share each provider's limit with the other nodes on this Redis (send schedule,
    /// pauses, learned rate, retry budget): `redis://[:PASSWORD@]HOST:PORT[/DB]`. Wins over
    /// `[coordination] redis_url` in the providers file. Prefer the environment variable to
    /// keep a password out of `ps`; it is shown redacted everywhere.
    #[arg(long = "redis", id = "redis", value_name = "URL", env = "ABIDE_REDIS_URL",
        hide_env_values = true, value_parser = parse_redis)]
    pub(crate) url: Option<String>,
    /// Redis key prefix of this deployment: nodes sharing limits use the same one, and an
    /// unrelated deployment on the same Redis (same provider name and key) another one.
    /// Keys are `PREFIX:coord:<provider>:<digest of its key>`. Wins over `[coordination]
    /// key_prefix` in the providers file; default `abide`. ASCII letters, digits, `_`,
    /// `-`, `.` and `:`, at most 64.
    #[arg(long = "redis-prefix", id = "redis_prefix", value_name = "PREFIX",
        env = "ABIDE_REDIS_PREFIX", value_parser = parse_redis_prefix)]
    pub(crate) prefix: Option<String>,
}

/// An item state as a flag value (`status --list failed`), in the order `--help` lists
/// them: the states a person acts on first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum StateArg {
    Failed,
    Deferred,
    Pending,
    Queued,
    #[value(name = "in_flight")]
    InFlight,
    Submitted,
}

impl From<StateArg> for abide_outbox::State {
    fn from(s: StateArg) -> Self {
        match s {
            StateArg::Failed => Self::Failed,
            StateArg::Deferred => Self::Deferred,
            StateArg::Pending => Self::Pending,
            StateArg::Queued => Self::Queued,
            StateArg::InFlight => Self::InFlight,
            StateArg::Submitted => Self::Submitted,
        }
    }
}

impl RedisArgs {
    /// The Redis of this node: `--redis`, else the providers file's (see [`redis_url`]).
    pub(crate) fn url(&self, cfg: &Config) -> Option<String> {
        redis_url(self.url.as_deref(), cfg)
    }

    /// The prefix of the coordination keys (see [`coordination_prefix`]).
    pub(crate) fn coordination_prefix(&self, cfg: &Config) -> String {
        coordination_prefix(self.prefix.as_deref(), cfg)
    }

    /// Check the Redis this node will use, if any (see [`check_redis`]).
    ///
    /// # Errors
    /// The configuration error, password redacted (exit code 2).
    pub(crate) async fn check(&self, config: &Path, cfg: &Config) -> anyhow::Result<()> {
        match self.url(cfg) {
            Some(url) => check_redis(self.url.as_deref(), config, &url).await,
            None => Ok(()),
        }
    }
}

/// A `DURATION` flag: a number with a unit, as `humantime` reads it (`500ms`, `30s`,
/// `1.5s`, `2m`, `1h30m`); a bare number is refused, since its unit would be a guess.
/// A negative one says so (humantime's own words would be "expected number at 0").
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    const FORMAT: &str = "a number with a unit, e.g. 500ms, 30s, 2m, 1h30m";
    if s.trim_start().starts_with('-') {
        return Err(format!(
            "{s:?} is a negative duration; give {FORMAT} (0s where the flag allows none)"
        ));
    }
    humantime::parse_duration(s).map_err(|e| format!("{s:?} is not a duration ({FORMAT}): {e}"))
}

/// `--lease`: a duration between 100 ms and 1 h.
pub(crate) fn parse_lease(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if !(Duration::from_millis(100)..=Duration::from_secs(3600)).contains(&d) {
        return Err("must be between 100ms and 1h".into());
    }
    Ok(d)
}

/// The Redis that coordinates this node with others: `--redis` (or `ABIDE_REDIS_URL`),
/// else the providers file's `[coordination] redis_url`, else none (local).
pub(crate) fn redis_url(flag: Option<&str>, cfg: &Config) -> Option<String> {
    flag.filter(|u| !u.trim().is_empty())
        .map(str::to_owned)
        .or_else(|| {
            cfg.coordination
                .redis_url
                .as_ref()
                .map(|s| s.expose().to_owned())
        })
}

/// The prefix of the coordination keys: `--redis-prefix` (or `ABIDE_REDIS_PREFIX`), else
/// the providers file's `[coordination] key_prefix` (default `abide`), then `:coord`.
pub(crate) fn coordination_prefix(flag: Option<&str>, cfg: &Config) -> String {
    abide_redis::coordination_prefix(flag.unwrap_or(&cfg.coordination.key_prefix))
}

/// `--redis-prefix`: a key prefix as `[coordination] key_prefix` accepts it.
pub(crate) fn parse_redis_prefix(s: &str) -> Result<String, String> {
    abide_redis::check_key_prefix(s)
        .map(|()| s.to_owned())
        .map_err(|why| format!("the Redis key prefix {why}"))
}

/// Check the coordination Redis at start: a refused password, `NOAUTH`, a database out of
/// range or an unusable URL is a configuration error naming where the URL came from
/// (`--redis`/`ABIDE_REDIS_URL`, else the providers file); an unreachable or slow Redis is
/// not (the nodes start in fallback, and the coordination warns once).
///
/// # Errors
/// The configuration error, password redacted (exit code 2).
pub(crate) async fn check_redis(
    flag: Option<&str>,
    config: &Path,
    url: &str,
) -> anyhow::Result<()> {
    let from_flag = flag.is_some_and(|u| !u.trim().is_empty());
    match abide_redis::probe(url, std::time::Duration::from_secs(2)).await {
        Err(e @ abide_redis::ProbeError::Config { .. }) => {
            let source = if from_flag {
                "--redis (or ABIDE_REDIS_URL)".to_owned()
            } else {
                format!("[coordination] redis_url in {}", config.display())
            };
            anyhow::bail!("{source}: {e}")
        }
        Err(abide_redis::ProbeError::Unreachable { .. }) | Ok(()) => Ok(()),
    }
}

/// `--redis`: a redis:// or rediss:// URL.
pub(crate) fn parse_redis(s: &str) -> Result<String, String> {
    if s.starts_with("redis://") || s.starts_with("rediss://") {
        Ok(s.to_owned())
    } else {
        Err(format!(
            "{} is not a redis:// or rediss:// URL",
            abide_outbox::echo::redact_url(s)
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn duration_flags_need_a_unit_and_keep_their_bounds() {
        assert_eq!(parse_lease("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_lease("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_lease("1.5s"), Ok(Duration::from_millis(1500)));
        let e = parse_lease("30").unwrap_err();
        assert!(e.contains("\"30\"") && e.contains("unit"), "{e}");
        assert_eq!(
            parse_lease("50ms").unwrap_err(),
            "must be between 100ms and 1h"
        );
    }
}
