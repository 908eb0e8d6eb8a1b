//! `abide demo` (not yet implemented).

use std::process::ExitCode;

/// Arguments of `abide demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`abide demo` is not implemented yet")
}
