//! `abide send` (not yet implemented).

use std::process::ExitCode;

/// Arguments of `abide send`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`abide send` is not implemented yet")
}
