//! `abide sim` (not yet implemented).

use std::process::ExitCode;

/// Arguments of `abide sim`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`abide sim` is not implemented yet")
}
