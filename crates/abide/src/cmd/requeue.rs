//! `abide requeue` (not yet implemented).

use std::process::ExitCode;

/// Arguments of `abide requeue`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`abide requeue` is not implemented yet")
}
