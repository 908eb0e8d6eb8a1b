//! One [`Session`] per host key, shared by every clone and task that uses a policy.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use abide_core::{Session, Warning};

/// A host's shared state: its session (pacer, budget, classifier) and the
/// `Deprecation`/`Sunset` warnings already logged for it.
#[derive(Debug)]
pub(crate) struct Host {
    pub(crate) key: String,
    pub(crate) session: Session,
    warned: Mutex<HashSet<String>>,
}

impl Host {
    /// Log each distinct `Deprecation`/`Sunset` once per host (not once per response).
    pub(crate) fn warn(&self, path: &str, warnings: Vec<Warning>) {
        for w in warnings {
            let text = format!("{w:?}");
            let first = self
                .warned
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(text.clone());
            if first {
                match w {
                    Warning::Deprecation { .. } => tracing::warn!(
                        host = %self.key, path, warning = %text,
                        "the API marks this resource deprecated (Deprecation, RFC 9745)"
                    ),
                    _ => tracing::warn!(
                        host = %self.key, path, warning = %text,
                        "the API announces this resource will stop responding (Sunset, RFC 8594)"
                    ),
                }
            }
        }
    }
}

/// Host key → [`Host`]. Entries live as long as the policy (one per API host a process
/// talks to).
#[derive(Debug, Default)]
pub(crate) struct Registry {
    hosts: Mutex<HashMap<String, Arc<Host>>>,
}

impl Registry {
    /// Host `key`, its session made by `session` when it is the first request to it.
    pub(crate) fn host(&self, key: &str, session: impl FnOnce() -> Session) -> Arc<Host> {
        let mut hosts = self.hosts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(h) = hosts.get(key) {
            return Arc::clone(h);
        }
        let h = Arc::new(Host {
            key: key.to_owned(),
            session: session(),
            warned: Mutex::new(HashSet::new()),
        });
        hosts.insert(key.to_owned(), Arc::clone(&h));
        h
    }

    pub(crate) fn get(&self, key: &str) -> Option<Arc<Host>> {
        self.hosts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .cloned()
    }
}
