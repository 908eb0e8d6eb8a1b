//! `abide inspect` (not yet implemented).

use std::process::ExitCode;

/// Arguments of `abide inspect`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`abide inspect` is not implemented yet")
}
