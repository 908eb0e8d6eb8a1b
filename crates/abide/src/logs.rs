//! The log flags shared by the subcommands that log (`send`, `serve`, `proxy`, `provider`,
//! `demo`).

/// How log lines are written on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// One human-readable line per event; coloured only on a terminal.
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target` and `fields` (the event's
    /// `message` and its key-value pairs), for log shippers.
    Json,
}

/// `--log-format`, flattened into each subcommand that logs.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct LogArgs {
    /// Log lines on stderr as `text` or `json` (one object a line: timestamp, level,
    /// target, fields). Which lines is up to RUST_LOG, a tracing EnvFilter directive:
    /// `RUST_LOG=debug`, `RUST_LOG=abide_outbox=debug,warn`; without it, this command's
    /// default (warn for send, error for demo, info for serve, proxy and provider). Logs never
    /// hold a credential.
    #[arg(
        long,
        value_enum,
        default_value = "text",
        value_name = "FORMAT",
        env = "ABIDE_LOG_FORMAT"
    )]
    pub(crate) log_format: LogFormat,
}

impl LogArgs {
    /// Install the logger on stderr, filtered by `RUST_LOG` or else `default` (e.g.
    /// `"warn"`). A second call does nothing.
    pub(crate) fn init(&self, default: &str) {
        use std::io::IsTerminal;
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
        let logs = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr);
        let _ = match self.log_format {
            // Colour only on a terminal, so a log file or a pipe gets no ANSI escapes.
            LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).try_init(),
            LogFormat::Json => logs.json().with_ansi(false).try_init(),
        };
    }
}
