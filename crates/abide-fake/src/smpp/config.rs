//! [`SmppConfig`]: who may bind, when receipts go out, and the bounds on every connection.

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;

use crate::Error;

/// The system_id accepted when no SMPP account is configured.
pub const DEMO_SYSTEM_ID: &str = "demo";

/// The password of [`DEMO_SYSTEM_ID`] (SMPP 3.4 passwords hold at most 8 characters).
pub const DEMO_PASSWORD: &str = "demo-pw";

/// Largest `command_length` accepted, in bytes (64 KiB). A PDU announcing more is refused
/// with `generic_nack` (`ESME_RINVCMDLEN`) before its body is read, and the connection closed.
pub const MAX_PDU_BYTES: usize = 64 * 1024;

/// Largest `window_cap` (PDUs read and not yet answered on one connection).
pub const MAX_WINDOW_CAP: u32 = 10_000;

/// Largest `max_connections`.
pub const MAX_CONNECTIONS: u32 = 10_000;

/// Longest `receipt_delay_ms`, `bind_timeout_secs` and `idle_timeout_secs` (a day).
pub const MAX_DELAY_SECS: u64 = 86_400;

/// The SMPP listener's settings (TOML `[smpp]`).
///
/// # Default
/// One account `demo` / `demo-pw` (HTTP account `demo`); receipts 500 ms after acceptance
/// when the `submit_sm` asks for one (`registered_delivery`); an over-concurrency
/// `submit_sm` answered `ESME_RMSGQFUL` (0x14); at most 1,024 PDUs awaiting an answer per
/// connection (reading stops beyond); 256 connections; 30 s to bind; 300 s idle.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SmppConfig {
    /// Who may bind.
    pub accounts: Vec<SmppAccount>,
    /// Time from acceptance to the delivery receipt (`deliver_sm`), in milliseconds.
    pub receipt_delay_ms: u64,
    /// Which accepted messages get a receipt.
    pub receipts: ReceiptPolicy,
    /// `command_status` of a `submit_sm` refused by a concurrency gate (outstanding PDUs of
    /// the system_id or account over `key_concurrency` / `account_concurrency`): 20
    /// (`ESME_RMSGQFUL`, default) or 88 (`ESME_RTHROTTLED`). Over-rate refusals use
    /// `behaviour.smpp_status`.
    pub concurrency_status: u32,
    /// PDUs read but not yet answered on one connection, at most; beyond, the SMSC stops
    /// reading that socket until answers go out (at most [`MAX_WINDOW_CAP`]).
    pub window_cap: u32,
    /// Open connections at most; more are closed at once (at most [`MAX_CONNECTIONS`]).
    pub max_connections: u32,
    /// A connection that has not bound within this many seconds is closed.
    pub bind_timeout_secs: u64,
    /// A bound connection that sends nothing (not even `enquire_link`) for this many
    /// seconds is closed.
    pub idle_timeout_secs: u64,
}

impl Default for SmppConfig {
    fn default() -> Self {
        Self {
            accounts: vec![SmppAccount {
                system_id: DEMO_SYSTEM_ID.to_owned(),
                password: DEMO_PASSWORD.to_owned(),
                account: Some("demo".to_owned()),
            }],
            receipt_delay_ms: 500,
            receipts: ReceiptPolicy::Requested,
            concurrency_status: 0x14,
            window_cap: 1024,
            max_connections: 256,
            bind_timeout_secs: 30,
            idle_timeout_secs: 300,
        }
    }
}

impl SmppConfig {
    /// The checks serde cannot express.
    pub(crate) fn check(&self) -> Result<(), Error> {
        let bad = |what: String| Err(Error::Config(what));
        if self.accounts.is_empty() {
            return bad("smpp.accounts: at least one account is needed".into());
        }
        for (i, a) in self.accounts.iter().enumerate() {
            a.check()
                .map_err(|e| Error::Config(format!("smpp.accounts[{i}]: {e}")))?;
        }
        if !(1..=MAX_WINDOW_CAP).contains(&self.window_cap) {
            return bad(format!(
                "smpp.window_cap = {}: must lie within 1..={MAX_WINDOW_CAP}",
                self.window_cap
            ));
        }
        if !(1..=MAX_CONNECTIONS).contains(&self.max_connections) {
            return bad(format!(
                "smpp.max_connections = {}: must lie within 1..={MAX_CONNECTIONS}",
                self.max_connections
            ));
        }
        for (name, secs) in [
            ("bind_timeout_secs", self.bind_timeout_secs),
            ("idle_timeout_secs", self.idle_timeout_secs),
        ] {
            if !(1..=MAX_DELAY_SECS).contains(&secs) {
                return bad(format!(
                    "smpp.{name} = {secs}: must lie within 1..={MAX_DELAY_SECS}"
                ));
            }
        }
        if self.receipt_delay_ms > MAX_DELAY_SECS * 1000 {
            return bad(format!(
                "smpp.receipt_delay_ms = {}: at most {}",
                self.receipt_delay_ms,
                MAX_DELAY_SECS * 1000
            ));
        }
        Ok(())
    }
}

/// An SMPP login: `system_id` and `password` as sent in a bind, and the account whose
/// limits it shares with HTTP keys. `Debug` never shows the password.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SmppAccount {
    /// The ESME's system_id (1 to 15 characters).
    pub system_id: String,
    /// Its password (1 to 8 characters, SMPP 3.4 §5.2.2).
    pub password: String,
    /// The account (binds of one account share the account limits).
    #[serde(default)]
    pub account: Option<String>,
}

impl SmppAccount {
    fn check(&self) -> Result<(), String> {
        let printable = |s: &str| s.bytes().all(|b| b.is_ascii_graphic());
        if !(1..=15).contains(&self.system_id.len()) || !printable(&self.system_id) {
            return Err(format!(
                "system_id {:?}: 1 to 15 printable ASCII characters",
                self.system_id
            ));
        }
        if !(1..=8).contains(&self.password.len()) || !printable(&self.password) {
            return Err("password: 1 to 8 printable ASCII characters".into());
        }
        Ok(())
    }
}

impl fmt::Debug for SmppAccount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SmppAccount")
            .field("system_id", &self.system_id)
            .field("password", &"<redacted>")
            .field("account", &self.account)
            .finish()
    }
}

impl FromStr for SmppAccount {
    type Err = Error;

    /// `SYSTEM_ID:PASSWORD` or `SYSTEM_ID:PASSWORD:ACCOUNT`.
    fn from_str(s: &str) -> Result<Self, Error> {
        let mut parts = s.splitn(3, ':');
        let (Some(system_id), Some(password)) = (parts.next(), parts.next()) else {
            return Err(Error::Config(
                "SMPP account: expected SYSTEM_ID:PASSWORD[:ACCOUNT]".into(),
            ));
        };
        let a = Self {
            system_id: system_id.to_owned(),
            password: password.to_owned(),
            account: parts.next().map(str::to_owned),
        };
        a.check()
            .map_err(|e| Error::Config(format!("SMPP account: {e}")))?;
        Ok(a)
    }
}

/// Which accepted messages get a delivery receipt (`deliver_sm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReceiptPolicy {
    /// Those whose `registered_delivery` asks for an SMSC delivery receipt on success
    /// (its low two bits 01 or 11), as SMSCs do.
    Requested,
    /// Every accepted message.
    Always,
    /// None.
    Never,
}

impl FromStr for ReceiptPolicy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "requested" => Ok(Self::Requested),
            "always" => Ok(Self::Always),
            "never" => Ok(Self::Never),
            _ => Err(Error::Config(format!(
                "receipts {s:?}: expected requested, always or never"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounts_parse_and_hide_the_password() {
        let a: SmppAccount = "esme1:s3cret:acme".parse().unwrap();
        assert_eq!(a.account.as_deref(), Some("acme"));
        assert!(!format!("{a:?}").contains("s3cret"));
        assert!("esme1".parse::<SmppAccount>().is_err());
        assert!("esme1:waytoolongpassword".parse::<SmppAccount>().is_err());
        assert!(":pw".parse::<SmppAccount>().is_err());
    }

    #[test]
    fn bounds_are_checked() {
        assert!(SmppConfig::default().check().is_ok());
        let c = SmppConfig {
            window_cap: 0,
            ..SmppConfig::default()
        };
        assert!(c.check().unwrap_err().to_string().contains("window_cap"));
        let c = SmppConfig {
            idle_timeout_secs: 0,
            ..SmppConfig::default()
        };
        assert!(c.check().unwrap_err().to_string().contains("idle_timeout"));
        assert_eq!(
            "always".parse::<ReceiptPolicy>().unwrap(),
            ReceiptPolicy::Always
        );
        assert!("sometimes".parse::<ReceiptPolicy>().is_err());
    }
}
