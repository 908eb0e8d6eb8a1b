//! One module per subcommand. Each exposes `Args` (clap) and `run(Args) -> Result<ExitCode>`;
//! async commands build their own tokio runtime inside `run`.

pub(crate) mod coord_view;
pub(crate) mod db;
pub(crate) mod deliver;
pub(crate) mod demo;
pub(crate) mod demo_phases;
pub(crate) mod demo_run;
pub(crate) mod demo_smpp;
pub(crate) mod input;
pub(crate) mod input_stream;
pub(crate) mod inspect;
pub(crate) mod progress;
pub(crate) mod provider;
pub(crate) mod report;
pub(crate) mod requeue;
pub(crate) mod send;
pub(crate) mod serve;
pub(crate) mod serve_api;
pub(crate) mod serve_dashboard;
pub(crate) mod serve_metrics;
pub(crate) mod sim;
pub(crate) mod status;
