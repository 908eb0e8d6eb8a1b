//! The settings of a provider reached over SMPP 3.4 (`transport = "smpp"`).
//!
//! ```toml
//! [[provider]]
//! name = "smsc"
//! transport = "smpp"
//! address = "127.0.0.1:2775"        # host:port of the SMSC
//! system_id = "abide"               # bind_transceiver system_id (1-15 characters)
//! password_env = "SMSC_PASSWORD"    # the variable's NAME; its value is never stored
//! system_type = ""                  # 0-12 characters
//! window = 10                       # outstanding submit_sm PDUs (and senders)
//! source_addr = "ACME"              # default sender when an item names none
//! source_addr_ton = 5               # SMPP 3.4 §5.2.5 type of number
//! source_addr_npi = 0               # SMPP 3.4 §5.2.6 numbering plan indicator
//! dest_addr_ton = 1
//! dest_addr_npi = 1
//! enquire_link_interval = 30        # seconds between keep-alives
//! pdu_timeout = 10                  # seconds to wait for one response PDU
//! max_text_octets = 1530            # longest text, encoded; beyond one SMS it goes in
//!                                   # the message_payload TLV
//! ```
//!
//! Limits are SMPP 3.4's own (§4.1, §5.2): `system_id` fits 16 octets with its NUL,
//! `password` 9, `system_type` 13, addresses 21.

use std::time::Duration;

use serde::Deserialize;

use crate::echo::clip;
use crate::error::{Error, Result};
use crate::toml_keys::field_names;
use crate::transport::KindOf;

fn invalid(provider: &str, field: &str, message: impl Into<String>) -> Error {
    Error::config(provider, field, message)
}

/// Longest `system_id`, in characters (SMPP 3.4 §4.1.1: 16 octets with the NUL).
pub const MAX_SYSTEM_ID_LEN: usize = 15;
/// Longest password, in characters (SMPP 3.4 §4.1.1: 9 octets with the NUL).
pub const MAX_PASSWORD_LEN: usize = 8;
/// Longest `system_type`, in characters (SMPP 3.4 §4.1.1: 13 octets with the NUL).
pub const MAX_SYSTEM_TYPE_LEN: usize = 12;
/// Longest address (`source_addr`, `destination_addr`), in characters (SMPP 3.4 §4.4.1:
/// 21 octets with the NUL).
pub const MAX_ADDR_LEN: usize = 20;
/// Largest `window`: outstanding PDUs on one bind.
pub const MAX_WINDOW: usize = 1024;
/// Default `max_text_octets`: ten concatenated GSM 7-bit parts of 153 septets (what
/// handsets commonly reassemble), or 765 UCS-2 characters.
pub const DEFAULT_MAX_TEXT_OCTETS: usize = 1530;
/// Largest `max_text_octets`: the `message_payload` TLV's 16-bit length (SMPP 3.4
/// §5.3.2.32), less room for the rest of the PDU within a 64 KiB `command_length`.
pub const MAX_TEXT_OCTETS: usize = 64_000;

/// How to reach and use one SMSC.
///
/// # Default
/// - `system_type`: empty
/// - `window`: 10 outstanding `submit_sm` (SMSCs commonly allow 10 per bind)
/// - `source_addr`: none (each item must name its `from`)
/// - `source_addr_ton` / `source_addr_npi`: 0 / 0 (unknown: the SMSC decides)
/// - `dest_addr_ton` / `dest_addr_npi`: 1 / 1 (international, ISDN E.164)
/// - `enquire_link_interval`: 30 s
/// - `pdu_timeout`: 10 s
/// - `max_text_octets`: [`DEFAULT_MAX_TEXT_OCTETS`]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmppConfig {
    /// `host:port` of the SMSC.
    pub address: String,
    /// `system_id` of `bind_transceiver`.
    pub system_id: String,
    /// Name of the environment variable (or credential) holding the password; never the
    /// password itself. `None` binds with an empty password.
    pub password_env: Option<String>,
    /// `system_type` of `bind_transceiver`.
    pub system_type: String,
    /// Most `submit_sm` PDUs outstanding on the bind at once; also the provider's senders.
    pub window: usize,
    /// Sender address used when an item names no `from`.
    pub source_addr: Option<String>,
    /// `source_addr_ton` of every `submit_sm`.
    pub source_addr_ton: u8,
    /// `source_addr_npi` of every `submit_sm`.
    pub source_addr_npi: u8,
    /// `dest_addr_ton` of every `submit_sm`.
    pub dest_addr_ton: u8,
    /// `dest_addr_npi` of every `submit_sm`.
    pub dest_addr_npi: u8,
    /// Time between `enquire_link` keep-alives on an idle or busy bind.
    pub enquire_link_interval: Duration,
    /// How long one request PDU waits for its response before its outcome counts as
    /// unknown (a transport failure after send; resent with the same key).
    pub pdu_timeout: Duration,
    /// Longest text of an item, in octets as encoded (GSM 7-bit: one per septet, so two
    /// for `€ [ { …`; UCS-2: two per character), 1-[`MAX_TEXT_OCTETS`]. Text that fits
    /// one SMS (160 septets, 70 UCS-2 characters) goes in `short_message`; longer, up to
    /// this, in the `message_payload` TLV with an empty `short_message` (SMPP 3.4
    /// §5.3.2.32), and the SMSC splits it. Longer still is refused at enqueue.
    pub max_text_octets: usize,
}

/// The `[[provider]]` keys of an SMPP provider, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSmpp {
    address: Option<String>,
    system_id: Option<String>,
    password_env: Option<String>,
    system_type: Option<String>,
    // Integers are read as TOML writes them (i64) and checked here, so a value outside
    // the narrower type (`window = -1`, `source_addr_ton = 300`) is refused naming its key
    // and range, as an out-of-range one is.
    window: Option<i64>,
    source_addr: Option<String>,
    source_addr_ton: Option<i64>,
    source_addr_npi: Option<i64>,
    dest_addr_ton: Option<i64>,
    dest_addr_npi: Option<i64>,
    enquire_link_interval: Option<f64>,
    pdu_timeout: Option<f64>,
    max_text_octets: Option<i64>,
}

/// `transport = "smpp"`.
pub(crate) const KIND: KindOf<SmppConfig> = KindOf {
    name: "smpp",
    keys: field_names::<FileSmpp>,
    unused_shared: &[
        "rate_limit_dialect",
        "pacer.use_rate_limit_headers",
        "classify.http",
        "classify.body",
        "classify.header",
    ],
    read: |n, keys| {
        let f: FileSmpp = keys.read()?;
        Ok(f.validate(n)?)
    },
};

impl FileSmpp {
    /// Check every key; errors name provider `n` and the field.
    fn validate(self, n: &str) -> Result<SmppConfig> {
        let address = self
            .address
            .ok_or_else(|| invalid(n, "address", "required for transport = \"smpp\""))?;
        check_address(n, &address)?;
        let system_id = self
            .system_id
            .ok_or_else(|| invalid(n, "system_id", "required for transport = \"smpp\""))?;
        check_text(n, "system_id", &system_id, 1, MAX_SYSTEM_ID_LEN)?;
        if let Some(var) = &self.password_env {
            if var.is_empty() || var.len() > 256 || var.contains('=') || var.contains('\0') {
                return Err(invalid(
                    n,
                    "password_env",
                    "must be the NAME of an environment variable",
                ));
            }
        }
        let system_type = self.system_type.unwrap_or_default();
        check_text(n, "system_type", &system_type, 0, MAX_SYSTEM_TYPE_LEN)?;
        let window = usize::try_from(self.window.unwrap_or(10))
            .ok()
            .filter(|w| (1..=MAX_WINDOW).contains(w))
            .ok_or_else(|| invalid(n, "window", format!("must be 1..={MAX_WINDOW}")))?;
        if let Some(s) = &self.source_addr {
            check_text(n, "source_addr", s, 1, MAX_ADDR_LEN)?;
        }
        let ton = |field: &str, v: Option<i64>, default: u8| -> Result<u8> {
            // SMPP 3.4 §5.2.5: 0 unknown ... 6 abbreviated.
            v.map_or(Some(default), |v| u8::try_from(v).ok())
                .filter(|v| *v <= 6)
                .ok_or_else(|| invalid(n, field, "must be a TON of SMPP 3.4 §5.2.5 (0-6)"))
        };
        let npi = |field: &str, v: Option<i64>, default: u8| -> Result<u8> {
            // SMPP 3.4 §5.2.6.
            v.map_or(Some(default), |v| u8::try_from(v).ok())
                .filter(|v| [0, 1, 3, 4, 6, 8, 9, 10, 14, 18].contains(v))
                .ok_or_else(|| {
                    invalid(
                        n,
                        field,
                        "must be an NPI of SMPP 3.4 §5.2.6 (0, 1, 3, 4, 6, 8, 9, 10, 14 or 18)",
                    )
                })
        };
        let secs = |field: &str, v: Option<f64>, default: f64, lo: f64, hi: f64| {
            let v = v.unwrap_or(default);
            if !(v.is_finite() && (lo..=hi).contains(&v)) {
                return Err(invalid(
                    n,
                    field,
                    format!("must be in [{lo}, {hi}] seconds"),
                ));
            }
            Ok(Duration::from_secs_f64(v))
        };
        let max_text_octets = self
            .max_text_octets
            .map_or(Some(DEFAULT_MAX_TEXT_OCTETS), |v| usize::try_from(v).ok())
            .filter(|v| (1..=MAX_TEXT_OCTETS).contains(v))
            .ok_or_else(|| {
                invalid(
                    n,
                    "max_text_octets",
                    format!("must be 1..={MAX_TEXT_OCTETS} octets"),
                )
            })?;
        Ok(SmppConfig {
            max_text_octets,
            address,
            system_id,
            password_env: self.password_env,
            system_type,
            window,
            source_addr: self.source_addr,
            source_addr_ton: ton("source_addr_ton", self.source_addr_ton, 0)?,
            source_addr_npi: npi("source_addr_npi", self.source_addr_npi, 0)?,
            dest_addr_ton: ton("dest_addr_ton", self.dest_addr_ton, 1)?,
            dest_addr_npi: npi("dest_addr_npi", self.dest_addr_npi, 1)?,
            enquire_link_interval: secs(
                "enquire_link_interval",
                self.enquire_link_interval,
                30.0,
                1.0,
                3600.0,
            )?,
            pdu_timeout: secs("pdu_timeout", self.pdu_timeout, 10.0, 0.01, 290.0)?,
        })
    }
}

/// `host:port`: a host name or IP literal (IPv6 in brackets) and a non-zero port; nothing
/// else (no scheme, user, path).
fn check_address(n: &str, address: &str) -> Result<()> {
    let bad = || invalid(n, "address", format!("{} is not host:port", clip(address)));
    if address.len() > 300 || address.contains(['/', '@', '?', '#', ' ']) {
        return Err(bad());
    }
    let url = reqwest::Url::parse(&format!("smpp://{address}")).map_err(|_| bad())?;
    match (url.host_str(), url.port()) {
        (Some(h), Some(p)) if !h.is_empty() && p > 0 => Ok(()),
        _ => Err(bad()),
    }
}

/// Printable ASCII of `min..=max` characters: what a C-Octet String of SMPP 3.4 carries.
fn check_text(n: &str, field: &str, v: &str, min: usize, max: usize) -> Result<()> {
    if !(min..=max).contains(&v.len()) || !v.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        return Err(invalid(
            n,
            field,
            format!("must be {min}-{max} printable ASCII characters"),
        ));
    }
    Ok(())
}

impl SmppConfig {
    /// How long one attempt may take at most: waiting for the bind (up to one
    /// `pdu_timeout`) and then for the `submit_sm_resp` (another).
    pub fn attempt_timeout(&self) -> Duration {
        self.pdu_timeout.saturating_mul(2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::transport::TransportConfig;

    const SMSC: &str = r#"
        [[provider]]
        name = "smsc"
        transport = "smpp"
        address = "127.0.0.1:2775"
        system_id = "abide"
        password_env = "SMSC_PASSWORD"
        window = 64
        source_addr = "ACME"
        source_addr_ton = 5
        enquire_link_interval = 15
        pdu_timeout = 2.5
    "#;

    fn err_of(text: &str) -> (String, String, String) {
        match Config::from_toml_str(text) {
            Err(Error::Config {
                provider: Some(provider),
                field,
                message,
            }) => (provider, field, message),
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn an_smpp_provider_parses_with_defaults() {
        let c = Config::from_toml_str(SMSC).unwrap();
        let p = c.provider("smsc").unwrap();
        let TransportConfig::Smpp(s) = &p.transport else {
            panic!("{p:?}")
        };
        assert_eq!(s.address, "127.0.0.1:2775");
        assert_eq!(s.password_env.as_deref(), Some("SMSC_PASSWORD"));
        assert_eq!((s.window, p.concurrency()), (64, 64));
        assert_eq!((s.source_addr_ton, s.source_addr_npi), (5, 0));
        assert_eq!((s.dest_addr_ton, s.dest_addr_npi), (1, 1));
        assert_eq!(s.enquire_link_interval, Duration::from_secs(15));
        assert_eq!(s.pdu_timeout, Duration::from_millis(2500));
        let timeout = p.transport.settings().attempt_timeout();
        assert_eq!(timeout, Duration::from_secs(5), "bind wait + pdu_timeout");
        assert_eq!(p.transport.settings().endpoint(), "smpp://127.0.0.1:2775");
        assert_eq!(s.system_type, "");
        let minimal = "[[provider]]\nname = \"s\"\ntransport = \"smpp\"\n\
                       address = \"smsc.example:2775\"\nsystem_id = \"x\"\n";
        let c = Config::from_toml_str(minimal).unwrap();
        let TransportConfig::Smpp(s) = &c.providers[0].transport else {
            panic!("{c:?}")
        };
        assert_eq!((s.window, s.pdu_timeout), (10, Duration::from_secs(10)));
        assert_eq!(s.password_env, None);
        assert_eq!(s.max_text_octets, 1530);
        // Without `transport`, a provider is HTTP.
        let http = "[[provider]]\nname = \"h\"\nbase_url = \"http://127.0.0.1:9\"\n";
        let c = Config::from_toml_str(http).unwrap();
        assert!(matches!(c.providers[0].transport, TransportConfig::Http(_)));
    }

    #[test]
    fn errors_name_the_field() {
        for (from, to, field) in [
            (
                "address = \"127.0.0.1:2775\"",
                "address = \"127.0.0.1\"",
                "address",
            ),
            (
                "address = \"127.0.0.1:2775\"",
                "address = \"smpp://h:1\"",
                "address",
            ),
            (
                "address = \"127.0.0.1:2775\"",
                "address = \"u@h:1\"",
                "address",
            ),
            ("address = \"127.0.0.1:2775\"", "", "address"),
            (
                "system_id = \"abide\"",
                "system_id = \"abcdefghijklmnop\"",
                "system_id",
            ),
            ("system_id = \"abide\"", "", "system_id"),
            ("window = 64", "window = 0", "window"),
            ("window = 64", "window = 1025", "window"),
            (
                "source_addr = \"ACME\"",
                "source_addr = \"\"",
                "source_addr",
            ),
            (
                "source_addr_ton = 5",
                "source_addr_ton = 7",
                "source_addr_ton",
            ),
            (
                "source_addr_ton = 5",
                "source_addr_npi = 2",
                "source_addr_npi",
            ),
            ("source_addr_ton = 5", "dest_addr_ton = 9", "dest_addr_ton"),
            ("source_addr_ton = 5", "dest_addr_npi = 5", "dest_addr_npi"),
            ("pdu_timeout = 2.5", "pdu_timeout = 0", "pdu_timeout"),
            ("pdu_timeout = 2.5", "pdu_timeout = 291", "pdu_timeout"),
            (
                "enquire_link_interval = 15",
                "enquire_link_interval = 0.5",
                "enquire_link_interval",
            ),
            (
                "password_env = \"SMSC_PASSWORD\"",
                "password_env = \"A=B\"",
                "password_env",
            ),
            (
                "window = 64",
                "system_type = \"way-too-long-type\"",
                "system_type",
            ),
            ("transport = \"smpp\"", "transport = \"smtp\"", "transport"),
            ("window = 64", "max_text_octets = 0", "max_text_octets"),
            ("window = 64", "max_text_octets = 64001", "max_text_octets"),
        ] {
            let text = SMSC.replace(from, to);
            let (p, f, m) = err_of(&text);
            assert_eq!((p.as_str(), f.as_str()), ("smsc", field), "{to}: {m}");
        }
    }

    #[test]
    fn keys_of_the_other_transport_are_refused_by_name() {
        for (key, field) in [
            ("base_url = \"http://127.0.0.1:9\"", "base_url"),
            ("credentials_env = \"TOKEN\"", "credentials_env"),
            ("auth_header = \"X-Key\"", "auth_header"),
            (
                "idempotency_key_header = \"X-Id\"",
                "idempotency_key_header",
            ),
            ("timeout_secs = 3", "timeout_secs"),
            ("concurrency = 3", "concurrency"),
            ("rate_limit_dialect = \"ietf\"", "rate_limit_dialect"),
            (
                "[provider.pacer]\nuse_rate_limit_headers = false",
                "pacer.use_rate_limit_headers",
            ),
            ("[provider.classify.http]\n409 = \"retry\"", "classify.http"),
        ] {
            let (p, f, m) = err_of(&format!("{SMSC}\n{key}\n"));
            assert_eq!((p.as_str(), f.as_str()), ("smsc", field), "{m}");
            assert!(m.contains("transport = \"smpp\""), "{m}");
        }
        let http = "[[provider]]\nname = \"h\"\nbase_url = \"http://127.0.0.1:9\"\n";
        for (key, field) in [
            ("address = \"h:1\"", "address"),
            ("system_id = \"x\"", "system_id"),
            ("password_env = \"P\"", "password_env"),
            ("window = 3", "window"),
            ("source_addr_ton = 1", "source_addr_ton"),
            ("pdu_timeout = 1", "pdu_timeout"),
            ("enquire_link_interval = 10", "enquire_link_interval"),
            ("max_text_octets = 200", "max_text_octets"),
            (
                "[provider.classify.smpp]\n0x45 = \"retry\"",
                "classify.smpp",
            ),
        ] {
            let (p, f, m) = err_of(&format!("{http}{key}\n"));
            assert_eq!((p.as_str(), f.as_str()), ("h", field), "{m}");
        }
        let (_, f, _) = err_of("[[provider]]\nname = \"h\"\n");
        assert_eq!(f, "base_url");
    }

    #[test]
    fn smpp_items_are_checked_at_enqueue() {
        let c = Config::from_toml_str(SMSC).unwrap();
        let ok = crate::Request::post_json("/", serde_json::json!({"to": "+1555", "text": "hi"}));
        assert!(c.check_item(&crate::NewItem::new("smsc", ok)).is_ok());
        let bad = crate::Request::post_json("/", serde_json::json!({"to": "+1555", "text": ""}));
        let err = c.check_item(&crate::NewItem::new("smsc", bad)).unwrap_err();
        let err = err.to_string();
        assert!(err.contains("empty") && err.contains("\"smsc\""), "{err}");
    }
}
