//! `abide serve` (not yet implemented).

use std::process::ExitCode;

/// Arguments of `abide serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`abide serve` is not implemented yet")
}
