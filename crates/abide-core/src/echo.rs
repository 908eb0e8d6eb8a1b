//! What may be shown of a value we were given: bounded, and without credentials.
//!
//! An error quotes what it refuses so the user can find it, but a quote must not become
//! the problem: a 50 MB header name echoed whole is a 50 MB error line, and a URL echoed
//! whole may carry a password (`http://user:PASS@host`). Every value echoed into an error,
//! a log or a report therefore passes [`clip`], and every URL passes [`redact_url`] (or
//! [`redact_text`] for a message that may contain one, such as a parser's error).
//!
//! Redaction works on the text, not on a parsed URL: the URLs that most need it are those
//! that do not parse (`http://user:PASS@127.0.0.1:99999`, a port out of range), and a
//! password may hold characters a parser reads as the end of the authority (`/`, `#`,
//! `?`). So everything between the first `:` after `scheme://` and the *last* `@` of the
//! URL is hidden. This errs on hiding too much: a URL with a port and an `@` in its path
//! (`http://h:8080/u/a@b`) shows as `http://h:***@b`, which is only a display.

/// Most bytes of a value quoted in an error or a log (before escaping).
pub const MAX_ECHO_BYTES: usize = 128;

/// Most bytes of a whole message from elsewhere (a parser's error) shown to the user.
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// Query parameters whose values are credentials (compared in ASCII lower case).
const SECRET_PARAMS: &[&str] = &[
    "password",
    "passwd",
    "pass",
    "pwd",
    "secret",
    "token",
    "access_token",
    "api_key",
    "apikey",
    "key",
    "sslpassword",
];

/// `value` quoted (Rust `Debug` escaping, so control characters stay visible), cut after
/// [`MAX_ECHO_BYTES`] bytes with a marker naming its full length and the limit:
/// `"aaaa…" (50000000 bytes; first 128 shown)`.
pub fn clip(value: &str) -> String {
    clip_to(value, MAX_ECHO_BYTES)
}

/// [`clip`] with another limit, in bytes.
pub fn clip_to(value: &str, max_bytes: usize) -> String {
    if value.len() <= max_bytes {
        return format!("{value:?}");
    }
    let head = &value[..floor_char_boundary(value, max_bytes)];
    format!(
        "{:?} ({} bytes; first {} shown)",
        format!("{head}…"),
        value.len(),
        head.len()
    )
}

/// `message` unquoted, cut after `max_bytes` bytes with a marker naming the full length.
pub fn truncate(message: &str, max_bytes: usize) -> String {
    if message.len() <= max_bytes {
        return message.to_owned();
    }
    let head = &message[..floor_char_boundary(message, max_bytes)];
    format!(
        "{head}… ({} bytes; first {} shown)",
        message.len(),
        head.len()
    )
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// `url` with any password and credential-like query values replaced by `***`. The user
/// name stays (it says who connects); everything from the first `:` after `scheme://` to
/// the last `@` goes, and so does the value of a `password=`, `token=`, `key=`... query
/// parameter. Works on text that does not parse as a URL. Not clipped: see [`clip`].
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_owned();
    };
    let start = scheme_end + 3;
    let rest = &url[start..];
    let mut out = String::with_capacity(url.len());
    out.push_str(&url[..start]);
    let after_userinfo = match rest.rfind('@') {
        Some(at) => {
            let userinfo = &rest[..at];
            match userinfo.find(':') {
                Some(colon) => {
                    out.push_str(&userinfo[..colon]);
                    out.push_str(":***@");
                }
                None => {
                    out.push_str(userinfo);
                    out.push('@');
                }
            }
            &rest[at + 1..]
        }
        None => rest,
    };
    match after_userinfo.split_once('?') {
        None => out.push_str(after_userinfo),
        Some((before, query)) => {
            out.push_str(before);
            out.push('?');
            out.push_str(&redact_query(query));
        }
    }
    out
}

/// A query string with the values of credential-like parameters replaced by `***`.
fn redact_query(query: &str) -> String {
    let (query, fragment) = match query.split_once('#') {
        Some((q, f)) => (q, Some(f)),
        None => (query, None),
    };
    let mut out = String::with_capacity(query.len());
    for (i, pair) in query.split('&').enumerate() {
        if i > 0 {
            out.push('&');
        }
        match pair.split_once('=') {
            Some((k, _)) if SECRET_PARAMS.contains(&k.to_ascii_lowercase().as_str()) => {
                out.push_str(k);
                out.push_str("=***");
            }
            _ => out.push_str(pair),
        }
    }
    if let Some(f) = fragment {
        out.push('#');
        out.push_str(f);
    }
    out
}

/// `text` with every URL in it (a word containing `://`) passed through [`redact_url`];
/// words end at whitespace, quotes, `<`, `>` and backticks. For messages from elsewhere
/// (a parser's or a driver's error) that may quote a URL.
pub fn redact_text(text: &str) -> String {
    if !text.contains("://") {
        return text.to_owned();
    }
    let is_sep = |c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>');
    let mut out = String::with_capacity(text.len());
    let mut word_start = None;
    for (i, c) in text.char_indices() {
        if is_sep(c) {
            if let Some(s) = word_start.take() {
                out.push_str(&redact_url(&text[s..i]));
            }
            out.push(c);
        } else if word_start.is_none() {
            word_start = Some(i);
        }
    }
    if let Some(s) = word_start {
        out.push_str(&redact_url(&text[s..]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_bounds_and_says_so() {
        assert_eq!(clip("abc"), "\"abc\"");
        let big = "é".repeat(1_000_000);
        let c = clip(&big);
        assert!(c.len() < 400, "{}", c.len());
        assert!(c.contains("(2000000 bytes; first 128 shown)"), "{c}");
        assert!(c.starts_with("\"éé") && c.contains("…\""), "{c}");
        // Control characters stay visible, not interpreted by a terminal.
        assert_eq!(clip("a\u{1b}[2J"), "\"a\\u{1b}[2J\"");
        let t = truncate(&"x".repeat(5000), MAX_MESSAGE_BYTES);
        assert!(
            t.len() < 1100 && t.ends_with("(5000 bytes; first 1024 shown)"),
            "{t}"
        );
    }

    #[test]
    fn passwords_never_survive_in_any_spelling() {
        let cases = [
            (
                "http://user:PASS@127.0.0.1:99999",
                "http://user:***@127.0.0.1:99999",
            ),
            ("https://user:PASS@h/api", "https://user:***@h/api"),
            ("http://user:PA/SS@h/api", "http://user:***@h/api"),
            ("http://user:PA#SS@h", "http://user:***@h"),
            ("http://user:PA?SS@h", "http://user:***@h"),
            ("http://user:PA@SS@h", "http://user:***@h"),
            ("http://:PASS@h", "http://:***@h"),
            (
                "postgres://abide:PASS@db:5432/o?sslmode=require&password=PASS",
                "postgres://abide:***@db:5432/o?sslmode=require&password=***",
            ),
            (
                "redis://:PASS@127.0.0.1:6379/0",
                "redis://:***@127.0.0.1:6379/0",
            ),
            ("http://h/x?Token=PASS#f", "http://h/x?Token=***#f"),
            ("postgres://abide@db/o", "postgres://abide@db/o"),
            ("abide.db", "abide.db"),
        ];
        for (raw, want) in cases {
            assert_eq!(redact_url(raw), want, "{raw}");
        }
        let msg = "invalid value \"http://u:PASS@h:1/\" for base_url, also <redis://:PASS@r>";
        let shown = redact_text(msg);
        assert!(!shown.contains("PASS"), "{shown}");
        assert!(
            shown.starts_with("invalid value \"http://u:***@h:1/\""),
            "{shown}"
        );
    }
}
