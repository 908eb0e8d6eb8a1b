//! # abide-sim
//!
//! Deterministic virtual-time replays of rate-limit incidents, comparing client policies.
//!
//! ```no_run
//! use abide_sim::Scenario;
//!
//! let report = Scenario::LimitAppears.run(42);
//! print!("{report}");
//! abide_sim::plot::write_svg(&report, std::path::Path::new("sim-out"))?;
//! # Ok::<(), abide_sim::SimError>(())
//! ```
//!
//! Hours of an incident run in milliseconds: events sit in a binary heap keyed by virtual
//! time (ties broken by a sequence number), randomness comes from one seeded ChaCha8 stream,
//! and no wall clock is read. Virtual time maps to `Instant` and `SystemTime`, so the `abide`
//! policy is the real [`abide_core::Session`] the outbox runs, not a model of it. Same seed, same numbers.
//!
//! Map:
//! - [`engine`]: the event loop, workers, queue and time mapping;
//! - [`provider`]: the simulated provider (GCRA limit, grace, abuse suspension, every
//!   `Retry-After` form, outages);
//! - [`policy`]: the client policies compared (four incident clients and abide);
//! - [`scenarios`]: the incident replays;
//! - [`gateway`]: the server's side, one population against three gateways side by side;
//! - [`report`]: what a run measured and the text table;
//! - [`plot`]: request and 429 rates over time, as SVG;
//! - [`replay`]: scripted answers to one item, traced (the outbox cross-check).

mod abide_policy;
pub mod engine;
pub mod gateway;
pub mod plot;
pub mod policy;
pub mod provider;
pub mod replay;
pub mod report;
pub mod scenarios;

pub use policy::PolicyKind;
pub use report::{Bucket, PolicyResult, ScenarioReport};
pub use scenarios::Scenario;

/// What can go wrong in abide-sim.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// Writing the plot failed.
    #[error("cannot write plot {path}: {message}")]
    Plot {
        /// File being written.
        path: std::path::PathBuf,
        /// What the drawing backend said.
        message: String,
    },
}
