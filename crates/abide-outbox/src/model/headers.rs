//! Header names by what they are for: the connection's and the request framing's (never
//! an item's, never a setting's), and credentials (never stored in an item, which is kept
//! in plain text and shown by `status`).

/// Headers that belong to the connection or frame the request, not the call: one set by
/// an item or a setting would break the request (a wrong `Content-Length`, a second
/// framing), route it elsewhere (`Host`) or change the connection. Compared in lower case;
/// every `Proxy-*` name is refused as well. Hop-by-hop headers: RFC 9110 §7.6.1;
/// `Content-Length` / `Transfer-Encoding`: RFC 9112 §6; `Expect`: RFC 9110 §10.1.1.
pub const CONNECTION_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "trailer",
    "keep-alive",
    "expect",
];

/// Credential headers refused in items, by name (compared in lower case). Beside these, any
/// name with a segment (split at `-` and `_`) that says it holds a credential is refused
/// too ([`is_credential`]): `auth`, `authorization`, `cookie`, `session`, `password`,
/// `passwd`, `secret`, `credential(s)`, a segment containing `token` or `apikey`, or the
/// pairs `api key`, `access key`, `subscription key`, `auth key`, `private key`.
///
/// Sources: RFC 9110 §11.6.2 and §11.7.2 (`Authorization`, `Proxy-Authorization`),
/// RFC 6265 (`Cookie`); vendor docs: Google Cloud API keys (`X-Goog-Api-Key`), Azure API
/// Management (`Ocp-Apim-Subscription-Key`), GitLab (`Private-Token`, `Job-Token`), AWS
/// SigV4 temporary credentials (`X-Amz-Security-Token`), HashiCorp Vault
/// (`X-Vault-Token`), OpenStack Keystone (`X-Auth-Token`, `X-Subject-Token`), Azure
/// OpenAI (`Api-Key`), Azure Functions (`X-Functions-Key`), Cloudflare (`X-Auth-Key`),
/// Shopify (`X-Shopify-Access-Token`).
pub const CREDENTIAL_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-api-key",
    "api-key",
    "apikey",
    "x-apikey",
    "x-auth-token",
    "x-auth-key",
    "x-subject-token",
    "x-goog-api-key",
    "ocp-apim-subscription-key",
    "private-token",
    "job-token",
    "x-amz-security-token",
    "x-vault-token",
    "x-functions-key",
    "x-access-token",
    "x-shopify-access-token",
    "x-csrf-token",
];

/// Segments of a header name that say it holds a credential (see [`CREDENTIAL_HEADERS`]).
const CREDENTIAL_SEGMENTS: &[&str] = &[
    "auth",
    "authorization",
    "cookie",
    "session",
    "password",
    "passwd",
    "secret",
    "credential",
    "credentials",
];

/// Two segments in a row that say so (`X-Goog-Api-Key`, `Ocp-Apim-Subscription-Key`).
const CREDENTIAL_PAIRS: &[(&str, &str)] = &[
    ("api", "key"),
    ("access", "key"),
    ("subscription", "key"),
    ("auth", "key"),
    ("private", "key"),
];

/// What makes `value` unfit for a header (RFC 9110 §5.5: visible characters, spaces and
/// tabs), naming the first byte that cannot be sent and where it is, never the value
/// itself (it may be a credential): "contains a line feed (0x0A) at byte 12". `None` when
/// every byte may be sent.
pub fn value_fault(value: &str) -> Option<String> {
    let (at, b) = value
        .bytes()
        .enumerate()
        .find(|&(_, b)| (b < 0x20 && b != b'\t') || b == 0x7f)?;
    let what = match b {
        b'\n' => "a line feed",
        b'\r' => "a carriage return",
        0 => "a NUL byte",
        0x7f => "a DEL",
        _ => "a control byte",
    };
    Some(format!("contains {what} (0x{b:02X}) at byte {at}"))
}

/// Whether `name` belongs to the connection or the request framing
/// ([`CONNECTION_HEADERS`], or a `Proxy-*` name).
pub fn is_connection(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    CONNECTION_HEADERS.contains(&lower.as_str()) || lower.starts_with("proxy-")
}

/// Whether `name` carries a credential: one of [`CREDENTIAL_HEADERS`], or a name whose
/// segments say so (see there).
pub fn is_credential(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    if CREDENTIAL_HEADERS.contains(&lower.as_str()) {
        return true;
    }
    let segments: Vec<&str> = lower.split(['-', '_']).collect();
    segments
        .iter()
        .any(|s| CREDENTIAL_SEGMENTS.contains(s) || s.contains("token") || s.contains("apikey"))
        || segments
            .windows(2)
            .any(|w| CREDENTIAL_PAIRS.contains(&(w[0], w[1])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_credential_headers_are_known_and_others_are_not() {
        for name in [
            "Authorization",
            "Proxy-Authorization",
            "Cookie",
            "X-Api-Key",
            "X-Auth-Token",
            "X-Goog-Api-Key",
            "Ocp-Apim-Subscription-Key",
            "Private-Token",
            "X-Amz-Security-Token",
            "X-Vault-Token",
            "Api-Key",
            "X-Shopify-Access-Token",
            "X-Postmark-Server-Token",
            "X-Client-Secret",
            "X_API_KEY",
            "X-Session-Id",
            "X-Auth-Email",
        ] {
            assert!(is_credential(name), "{name}");
        }
        for name in [
            "X-Trace",
            "X-Tenant",
            "Accept",
            "Content-Type",
            "X-Request-Id",
            "X-Author",
            "Tenant",
            "X-Keyword",
        ] {
            assert!(!is_credential(name), "{name}");
        }
    }

    #[test]
    fn connection_headers_are_known() {
        for name in ["Host", "Transfer-Encoding", "TE", "Proxy-Foo", "Expect"] {
            assert!(is_connection(name), "{name}");
        }
        for name in ["Tenant", "X-Host", "Content-Type"] {
            assert!(!is_connection(name), "{name}");
        }
    }
}
