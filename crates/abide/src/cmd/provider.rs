//! `abide provider` (not yet implemented).

use std::process::ExitCode;

/// Arguments of `abide provider`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`abide provider` is not implemented yet")
}
