//! Loading the providers file for the command line: the outbox parses and checks it
//! ([`abide_outbox::Config::load`], [`abide_outbox::preflight`]); this says what is wrong
//! in the terms of the file and the flags.

use std::path::{Path, PathBuf};
use std::time::Duration;

use abide_outbox::{Config, DispatcherOptions};

/// `providers file F: line N: message` for text that is not TOML of the expected shape,
/// `providers file F: ` and what is wrong for a file-level problem, otherwise
/// `providers file F: ` and the outbox's own error (naming the provider and the setting).
fn config_error(path: &Path, e: abide_outbox::Error) -> anyhow::Error {
    use abide_outbox::Error;
    let shown = path.display();
    match &e {
        Error::Toml {
            line: Some(line),
            message,
            ..
        } => {
            if let Some(what) = message.lines().rev().find(|l| !l.trim().is_empty()) {
                return anyhow::anyhow!("providers file {shown}: line {line}: {}", what.trim());
            }
        }
        Error::ReadConfig { source, .. } => {
            return anyhow::anyhow!("providers file {shown}: {source}");
        }
        Error::Config {
            provider: None,
            field,
            message,
        } => return anyhow::anyhow!("providers file {shown}: {field}: {message}"),
        _ => {}
    }
    anyhow::Error::new(e).context(format!("providers file {shown}"))
}

/// Why a provider of the providers file `path` cannot send with `--lease` and the
/// environment ([`abide_outbox::Preflight`]), said in the terms of the command line.
fn preflight_error(path: &Path, e: abide_outbox::Error) -> anyhow::Error {
    use abide_outbox::Preflight;
    let shown = path.display();
    let abide_outbox::Error::Preflight(p) = &e else {
        return anyhow::Error::new(e).context(format!("providers file {shown}"));
    };
    match p {
        Preflight::LeaseTooShort {
            provider,
            lease,
            attempt_timeout,
            least,
            ..
        } => anyhow::anyhow!(
            "--lease {lease:?} is too short for provider {provider:?} in {shown}: a claimed \
             item must outlast its request (timeout_secs {attempt_timeout:?}) plus {} s, or \
             it is handed back unsent every time; use --lease {}s or more",
            (*least - *attempt_timeout).as_secs_f64(),
            least.as_secs_f64().ceil()
        ),
        Preflight::CredentialMissing {
            provider,
            setting,
            variable,
            ..
        } => anyhow::anyhow!(
            "provider {provider:?} in {shown}: its {setting} variable {variable} is unset or \
             empty; export it (the value is never stored or logged)"
        ),
        Preflight::CredentialUnfit {
            provider,
            variable,
            header,
            why,
            ..
        } => anyhow::anyhow!(
            "provider {provider:?} in {shown}: the credential in its credentials_env variable \
             {variable} cannot be sent in header {header}: {why}; fix the value (it is never \
             shown)"
        ),
        Preflight::PasswordUnfit {
            provider,
            variable,
            max,
            ..
        } => anyhow::anyhow!(
            "provider {provider:?} in {shown}: the password in its password_env variable \
             {variable} is not 1-{max} printable ASCII characters, the most a bind carries \
             (SMPP 3.4 §4.1: 9 octets with the NUL); the SMSC would refuse every bind (the \
             value is never shown)"
        ),
        _ => anyhow::Error::new(e).context(format!("providers file {shown}")),
    }
}

/// Load the providers file, applying `--workers`, and check it against `--lease` and
/// the environment, by the outbox's preflight ([`abide_outbox::preflight`]), before
/// anything is enqueued or a database opened.
///
/// # Errors
/// The file is unreadable or invalid, or a provider cannot send as configured: `lease`
/// is too short for its request timeout, its credential is unset or empty, or an SMPP
/// password does not fit a bind. Errors name the variable, never a value.
pub(crate) fn load_config(
    path: &PathBuf,
    workers: Option<u16>,
    lease: Duration,
) -> anyhow::Result<Config> {
    let mut cfg = Config::load(path).map_err(|e| config_error(path, e))?;
    let opts = DispatcherOptions {
        lease,
        ..DispatcherOptions::default()
    };
    abide_outbox::preflight(&cfg, &opts).map_err(|e| preflight_error(path, e))?;
    if let Some(w) = workers {
        cfg.set_workers(usize::from(w));
    }
    Ok(cfg)
}
