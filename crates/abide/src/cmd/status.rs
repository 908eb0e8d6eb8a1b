//! `abide status` (not yet implemented).

use std::process::ExitCode;

/// Arguments of `abide status`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`abide status` is not implemented yet")
}
