//! The settings of a scripted provider from the providers file (`transport = "scripted"`):
//! every request answered in memory with one HTTP status after a fixed latency, nothing
//! sent anywhere. For trying a configuration, tests and benchmarks; a script of its own
//! is [`super::ScriptedTransport::new`] through [`crate::Dispatcher::with_transports`].
//!
//! ```toml
//! [[provider]]
//! name = "dry-run"
//! transport = "scripted"
//! status = 202        # the answer to every request
//! latency_ms = 20     # how long each answer takes
//! concurrency = 8     # concurrent senders
//! ```

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::ScriptedTransport;
use crate::credentials::CredentialSource;
use crate::error::{Error, Result};
use crate::model::NewItem;
use crate::toml_keys::{field_names, Keys, TableError};
use crate::transport::{BuildEnv, KindOf, Response, Transport, TransportSettings};

/// Longest `latency_ms`.
const MAX_LATENCY: Duration = Duration::from_secs(600);

/// A provider answered in memory.
///
/// # Default
/// - `status`: 202
/// - `latency`: none
/// - `concurrency`: 4 senders
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptedConfig {
    /// The HTTP status every request is answered with.
    pub status: u16,
    /// How long each answer takes (a tokio timer).
    pub latency: Duration,
    /// Concurrent senders.
    pub concurrency: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileScripted {
    status: Option<u16>,
    latency_ms: Option<u64>,
    concurrency: Option<usize>,
}

/// `transport = "scripted"`.
pub(crate) const KIND: KindOf<ScriptedConfig> = KindOf {
    name: "scripted",
    keys: field_names::<FileScripted>,
    unused_shared: &["classify.smpp"],
    read,
};

fn read(n: &str, keys: &Keys) -> std::result::Result<ScriptedConfig, TableError> {
    let f: FileScripted = keys.read()?;
    let status = f.status.unwrap_or(202);
    if !(100..=599).contains(&status) {
        return Err(Error::config(n, "status", "must be an HTTP status, 100..=599").into());
    }
    let latency = Duration::from_millis(f.latency_ms.unwrap_or(0));
    if latency > MAX_LATENCY {
        return Err(Error::config(n, "latency_ms", "must be at most 600000").into());
    }
    let concurrency = f.concurrency.unwrap_or(4);
    let max = crate::transport::http::MAX_CONCURRENCY;
    if !(1..=max).contains(&concurrency) {
        return Err(Error::config(n, "concurrency", format!("must be 1..={max}")).into());
    }
    Ok(ScriptedConfig {
        status,
        latency,
        concurrency,
    })
}

impl TransportSettings for ScriptedConfig {
    fn concurrency(&self) -> usize {
        self.concurrency
    }

    fn attempt_timeout(&self) -> Duration {
        self.latency
    }

    fn endpoint(&self) -> String {
        format!("scripted:{}", self.status)
    }

    fn check_item(&self, _provider: &str, item: &NewItem) -> Result<()> {
        item.validate()
    }

    fn account(&self, _credentials: &dyn CredentialSource) -> Option<String> {
        None
    }

    fn build(&self, _provider: &str, env: &BuildEnv) -> Arc<dyn Transport> {
        let status = self.status;
        let t =
            ScriptedTransport::new(Arc::clone(&env.clock), move |_, _| Response::status(status));
        Arc::new(t.with_latency(self.latency))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::transport::TransportConfig;

    #[test]
    fn a_scripted_provider_is_read_from_the_file() {
        let c = Config::from_toml_str(
            "[[provider]]\nname = \"dry\"\ntransport = \"scripted\"\nstatus = 429\n\
             latency_ms = 20\n",
        )
        .unwrap();
        let p = c.provider("dry").unwrap();
        assert_eq!(
            p.transport,
            TransportConfig::Scripted(ScriptedConfig {
                status: 429,
                latency: Duration::from_millis(20),
                concurrency: 4,
            })
        );
        let e = Config::from_toml_str(
            "[[provider]]\nname = \"dry\"\ntransport = \"scripted\"\nbase_url = \"http://h\"\n",
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("base_url: is not used by transport = \"scripted\""),
            "{e}"
        );
    }
}
