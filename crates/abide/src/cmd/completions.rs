//! `abide completions`: a shell completion script, generated from the CLI's own definition.

use std::process::ExitCode;

const LONG_ABOUT: &str = "\
Print a completion script for SHELL on stdout, covering every subcommand, flag and value
list of this abide (generated from its own definition, so it never lags behind).

EXAMPLES
  abide completions bash > ~/.local/share/bash-completion/completions/abide
  abide completions zsh > \"${fpath[1]}/_abide\"
  abide completions fish > ~/.config/fish/completions/abide.fish
  abide completions elvish >> ~/.config/elvish/rc.elv
  abide completions powershell >> $PROFILE";

/// Arguments of `abide completions`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = LONG_ABOUT)]
pub(crate) struct Args {
    /// The shell the script is for.
    #[arg(value_enum, value_name = "SHELL")]
    pub(crate) shell: clap_complete::Shell,
}

/// Print the script for `args.shell` completing `cli` (the whole `abide` command).
///
/// # Errors
/// Writing stdout failed.
pub(crate) fn run(args: Args, mut cli: clap::Command) -> anyhow::Result<ExitCode> {
    // Generated into memory: the generators panic on a write error (a closed pipe).
    let mut script = Vec::new();
    let name = cli.get_name().to_owned();
    clap_complete::generate(args.shell, &mut cli, name, &mut script);
    crate::cmd::out(&String::from_utf8_lossy(&script))?;
    Ok(ExitCode::SUCCESS)
}
