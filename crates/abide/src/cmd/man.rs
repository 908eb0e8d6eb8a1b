//! `abide man`: a roff man page, generated from the CLI's own definition.

use std::process::ExitCode;

use anyhow::Context as _;

const LONG_ABOUT: &str = "\
Print a man page (roff) on stdout: abide(1), listing every subcommand, or with SUBCOMMAND
that subcommand's own page, abide-SUBCOMMAND(1), with all its flags and long help.

EXAMPLES
  abide man | man -l -
  abide man send | man -l -
  abide man > ~/.local/share/man/man1/abide.1
  for c in send check serve status; do abide man $c > ~/.local/share/man/man1/abide-$c.1; done";

/// Arguments of `abide man`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = LONG_ABOUT)]
pub(crate) struct Args {
    /// A subcommand whose own page to print (`send`, `check`, ...); default: abide(1).
    #[arg(value_name = "SUBCOMMAND")]
    pub(crate) subcommand: Option<String>,
}

/// Print the page of `cli` (the whole `abide` command) or of one of its subcommands.
///
/// # Errors
/// `args.subcommand` names no subcommand, or writing stdout failed.
pub(crate) fn run(args: Args, cli: clap::Command) -> anyhow::Result<ExitCode> {
    let page = match &args.subcommand {
        None => cli,
        Some(name) => {
            let names: Vec<String> = cli
                .get_subcommands()
                .map(|c| c.get_name().to_owned())
                .collect();
            let sub = cli.find_subcommand(name).with_context(|| {
                format!(
                    "abide has no subcommand {name:?}; one of: {}",
                    names.join(", ")
                )
            })?;
            let full = format!("{}-{}", cli.get_name(), sub.get_name());
            sub.clone().display_name(full.clone()).bin_name(full)
        }
    };
    let mut roff = Vec::new();
    clap_mangen::Man::new(page)
        .source(format!("abide {}", env!("CARGO_PKG_VERSION")))
        .render(&mut roff)
        .context("rendering the man page")?;
    crate::cmd::out(&String::from_utf8_lossy(&roff))?;
    Ok(ExitCode::SUCCESS)
}
