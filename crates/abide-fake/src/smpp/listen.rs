//! The fake SMSC's TCP listener: accepting connections (each served by `conn.rs`) and the
//! timers of scheduled drops.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::conn;
use super::Smsc;

/// A running SMPP listener.
#[derive(Debug)]
pub(crate) struct Listener {
    pub(crate) addr: SocketAddr,
    smsc: Arc<Smsc>,
    task: JoinHandle<()>,
    timers: Vec<JoinHandle<()>>,
}

impl Listener {
    /// Listen on `addr` for `smsc`.
    pub(crate) async fn start(smsc: Arc<Smsc>, addr: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let timers = drop_timers(&smsc);
        let s = Arc::clone(&smsc);
        let task = tokio::spawn(async move { accept_loop(s, listener).await });
        tracing::info!(%addr, "fake SMSC listening");
        Ok(Self {
            addr,
            smsc,
            task,
            timers,
        })
    }

    /// Stop accepting and close every connection.
    pub(crate) fn stop(&self) {
        self.smsc.shutdown.cancel();
        self.task.abort();
        for t in &self.timers {
            t.abort();
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One task per time-triggered `drop=all` entry, so it fires even when no PDU arrives.
fn drop_timers(smsc: &Arc<Smsc>) -> Vec<JoinHandle<()>> {
    let base = tokio::time::Instant::now();
    smsc.cfg
        .schedule
        .iter()
        .filter(|e| e.drop_connections == Some(true))
        .filter_map(|e| e.at_secs)
        .map(|at| {
            let s = Arc::clone(smsc);
            let at = Duration::try_from_secs_f64(at).unwrap_or(Duration::MAX);
            tokio::spawn(async move {
                tokio::time::sleep_until(base.checked_add(at).unwrap_or(base)).await;
                let _ = s.behaviour();
            })
        })
        .collect()
}

async fn accept_loop(smsc: Arc<Smsc>, listener: TcpListener) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // Out of descriptors and the like: wait a little rather than spin.
                tracing::warn!(error = %e, "smpp accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let admitted = smsc.with_stats(|s| {
            s.connections += 1;
            if s.open_connections >= u64::from(smsc.cfg.smpp.max_connections) {
                s.connections_refused += 1;
                false
            } else {
                s.open_connections += 1;
                true
            }
        });
        if !admitted {
            drop(stream);
            continue;
        }
        let s = Arc::clone(&smsc);
        tokio::spawn(async move {
            conn::serve(Arc::clone(&s), stream, peer).await;
            s.with_stats(|st| st.open_connections = st.open_connections.saturating_sub(1));
        });
    }
}
