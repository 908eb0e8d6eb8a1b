//! An item's path, confined below its provider's base path.
//!
//! An item names a path, never a URL: with `base_url = "http://host/api"` the item path
//! `/v1/messages` is sent to `http://host/api/v1/messages`, with the provider's credential.
//! A path that reaches anything outside `/api` would carry that credential where the
//! operator did not send it. The HTTP client (the `url` crate under reqwest, following the
//! WHATWG URL Standard) resolves `..`, `%2e%2e`, `.%2E` and `%2e.` as dot segments (URL
//! Standard §4.4 "single-dot / double-dot URL path segment") and reads `\` as `/` in
//! `http(s)` URLs; servers and proxies behind it may decode once more (`%252e`, `%2f`),
//! cut `;` parameters (`..;/`, Tomcat), map full-width characters to ASCII (NFKC:
//! `．．` is `..`) or stop at a NUL. So a path is refused when any of these spellings could
//! move it, and the URL finally built is checked to lie under the base path as well.
//!
//! [`check`] applies the rules that need no provider (at [`crate::Request::validate`]);
//! [`confine`] applies them and builds the URL (at [`crate::Config::check_item`], and again
//! just before sending, so a row edited in the database cannot escape either).
//!
//! What is refused (each [`Rule`] has a stable name, shown in the error):
//! - not starting with `/` (an absolute URL, a scheme, a relative path), `//host`, an
//!   embedded `://`;
//! - control characters and spaces, raw anywhere (the query too) or percent-encoded in a
//!   path segment; a `#` fragment;
//! - `\` raw, percent-encoded or look-alike; `%2F` and `/` look-alikes;
//! - empty segments (`/a//b`);
//! - any segment that is `.`, `..` (or only dots and spaces) in any of its forms: as
//!   written, each layer of percent-decoding until nothing changes, each of those in NFKC
//!   (`\u{FE30}` is `..`, `\u{2026}` and `\u{FE19}` are `...`, `．` is `.`) and with
//!   best-fit dots (`。`) read as `.`, with `;` parameters cut; the same forms are searched
//!   for `/` and `\`;
//! - `%` not followed by two hex digits, escapes that do not encode UTF-8 (overlong
//!   `%c0%ae`), and a segment still percent-encoded after eight layers of decoding.
//!
//! A query (after the first `?`) may hold `..`, `/` and `@`: it never moves the path.

use std::borrow::Cow;
use std::fmt;

use unicode_normalization::UnicodeNormalization;

use crate::echo;

/// Longest accepted request path, in bytes.
pub const MAX_PATH_LEN: usize = 2048;

/// Most layers of percent-encoding a segment is decoded through before it is judged: it
/// is decoded until nothing changes (a proxy and a server may each decode once, and a
/// lenient one repeatedly), and a segment still encoded after this many layers is refused
/// ([`Rule::BadEscape`]): no request needs it.
const MAX_DECODE_LAYERS: usize = 8;

/// Characters that "best fit" code-page mapping (Windows, some proxies) turns into `.`,
/// beyond those whose NFKC form is dots (U+FF0E, U+FE52, U+2024, U+2025, U+2026, U+FE19,
/// U+FE30, ...), which [`check_form`] finds by normalising.
const DOT_LIKE: &[char] = &[
    '\u{3002}', // IDEOGRAPHIC FULL STOP
    '\u{FF61}', // HALFWIDTH IDEOGRAPHIC FULL STOP
];
/// Characters that best-fit map to `/` (beyond NFKC's, e.g. U+FF0F).
const SLASH_LIKE: &[char] = &['\u{2215}', '\u{2044}', '\u{29F8}'];
/// Characters that best-fit map to `\` (beyond NFKC's, e.g. U+FF3C, U+FE68).
const BACKSLASH_LIKE: &[char] = &['\u{2216}', '\u{29F9}'];

/// Why a path was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rule {
    /// Longer than [`MAX_PATH_LEN`] bytes.
    TooLong,
    /// Does not start with `/`: an absolute URL, a scheme or a relative path.
    NotAPath,
    /// Starts with `//` (a network-path reference names a host, RFC 3986 §4.2) or holds
    /// `://`.
    NamesAHost,
    /// A control character or a space.
    Control,
    /// A `#`: a fragment is never sent, and what follows it would be lost.
    Fragment,
    /// A `\`, raw, percent-encoded or look-alike: read as `/` by the URL Standard in
    /// `http(s)` URLs and by Windows servers.
    Backslash,
    /// `%2F` or a `/` look-alike: a server that decodes it sees another segment.
    EncodedSlash,
    /// An empty segment (`//` inside the path): some servers and proxies merge it.
    EmptySegment,
    /// A segment that is `.` or `..` in some spelling.
    DotSegment,
    /// A `%` not followed by two hex digits, escapes that do not encode UTF-8, or more than
    /// eight layers of percent-encoding.
    BadEscape,
    /// The URL built from it is not under the provider's base path.
    OutsideBase,
}

impl Rule {
    /// The rule's stable name, as shown in errors.
    pub fn name(self) -> &'static str {
        match self {
            Rule::TooLong => "too-long",
            Rule::NotAPath => "not-a-path",
            Rule::NamesAHost => "names-a-host",
            Rule::Control => "control-character",
            Rule::Fragment => "fragment",
            Rule::Backslash => "backslash",
            Rule::EncodedSlash => "encoded-slash",
            Rule::EmptySegment => "empty-segment",
            Rule::DotSegment => "dot-segment",
            Rule::BadEscape => "bad-escape",
            Rule::OutsideBase => "outside-base",
        }
    }

    fn why(self) -> &'static str {
        match self {
            Rule::TooLong => "longer than the limit",
            Rule::NotAPath => {
                "must start with '/': a path below the provider's base_url, never a URL"
            }
            Rule::NamesAHost => "'//' or '://' names a host",
            Rule::Control => {
                "control characters (raw, or percent-encoded in the path) and raw spaces are \
                 not allowed"
            }
            Rule::Fragment => "'#' starts a fragment, which is never sent",
            Rule::Backslash => {
                "'\\' (raw, %5C or a look-alike) is read as '/' by URL parsers and servers"
            }
            Rule::EncodedSlash => {
                "%2F or a '/' look-alike becomes a segment boundary once a server decodes it"
            }
            Rule::EmptySegment => "'//' inside a path is an empty segment servers may merge",
            Rule::DotSegment => {
                "a '.' or '..' segment in any spelling (%2e, encoded again and again, ';' \
                 parameters, full-width or other look-alike dots) moves the request out of \
                 the provider's base path"
            }
            Rule::BadEscape => {
                "'%' must start two hex digits that encode UTF-8, nested at most eight layers"
            }
            Rule::OutsideBase => "the URL built from it is outside the provider's base path",
        }
    }
}

/// A refused path: which rule, the path (clipped, see [`echo::clip`]), and the provider
/// whose base path it was judged against, when it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathError {
    /// The rule that refused it.
    pub rule: Rule,
    path: String,
    detail: Option<String>,
    below: Option<(String, String)>,
}

impl PathError {
    fn new(rule: Rule, path: &str) -> Self {
        Self {
            rule,
            path: echo::clip(path),
            detail: None,
            below: None,
        }
    }

    /// The same refusal, said of provider `provider`, which sends below `base` (shown as
    /// given: clipped and without a password).
    pub fn below(mut self, provider: &str, base: String) -> Self {
        self.below = Some((provider.to_owned(), base));
        self
    }

    fn detail(mut self, detail: String) -> Self {
        self.detail = Some(detail);
        self
    }
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "path {} refused by rule {}: {}",
            self.path,
            self.rule.name(),
            self.rule.why()
        )?;
        if let Some(d) = &self.detail {
            write!(f, " ({d})")?;
        }
        if let Some((provider, base)) = &self.below {
            write!(f, "; provider {provider:?} sends below {base}")?;
        }
        Ok(())
    }
}

impl std::error::Error for PathError {}

/// Check `path` against every rule that needs no provider.
///
/// # Errors
/// [`PathError`] naming the first rule broken.
pub fn check(path: &str) -> Result<(), PathError> {
    let refuse = |rule| Err(PathError::new(rule, path));
    if path.len() > MAX_PATH_LEN {
        return Err(PathError::new(Rule::TooLong, path)
            .detail(format!("{} bytes; the limit is {MAX_PATH_LEN}", path.len())));
    }
    if !path.starts_with('/') {
        return refuse(Rule::NotAPath);
    }
    if path.starts_with("//") || path.contains("://") {
        return refuse(Rule::NamesAHost);
    }
    if path.chars().any(|c| c.is_control() || c == ' ') {
        return refuse(Rule::Control);
    }
    if path.contains('#') {
        return refuse(Rule::Fragment);
    }
    if path.contains('\\') {
        return refuse(Rule::Backslash);
    }
    let (segments, _query) = path.split_once('?').unwrap_or((path, ""));
    let segments: Vec<&str> = segments.split('/').skip(1).collect();
    let last = segments.len().saturating_sub(1);
    for (i, seg) in segments.iter().enumerate() {
        if seg.is_empty() && i != last {
            return refuse(Rule::EmptySegment);
        }
        if let Err(rule) = check_segment(seg) {
            return Err(PathError::new(rule, path).detail(format!("segment {}", echo::clip(seg))));
        }
    }
    Ok(())
}

/// The URL `path` is sent to below `base`: `base` with its trailing `/` dropped, then
/// `path`, parsed as the HTTP client parses it.
///
/// # Errors
/// [`PathError`] naming the first rule broken: any of [`check`]'s, or
/// [`Rule::OutsideBase`] when the URL built leaves `base`'s origin or path.
pub fn confine(base: &reqwest::Url, path: &str) -> Result<reqwest::Url, PathError> {
    check(path)?;
    let base_path = base.path().trim_end_matches('/');
    let outside = |shown: &str| {
        PathError::new(Rule::OutsideBase, path).detail(format!(
            "would be {}, base path {:?}",
            echo::clip(shown),
            if base_path.is_empty() { "/" } else { base_path }
        ))
    };
    let joined = format!("{}{}", base.as_str().trim_end_matches('/'), path);
    let url = reqwest::Url::parse(&joined).map_err(|_| outside("unparseable"))?;
    let same_origin = url.scheme() == base.scheme()
        && url.host() == base.host()
        && url.port_or_known_default() == base.port_or_known_default()
        && url.username() == base.username()
        && url.password() == base.password()
        && url.fragment().is_none();
    let under = url
        .path()
        .strip_prefix(base_path)
        .is_some_and(|rest| rest.starts_with('/'));
    if !(same_origin && under) {
        return Err(outside(url.path()));
    }
    Ok(url)
}

/// Judge one path segment in every form a server may see: as written, then each layer of
/// percent-decoding until nothing changes (at most [`MAX_DECODE_LAYERS`]).
fn check_segment(seg: &str) -> Result<(), Rule> {
    let mut form: Cow<'_, str> = Cow::Borrowed(seg);
    for layer in 0..=MAX_DECODE_LAYERS {
        check_form(&form)?;
        if !form.contains('%') {
            return Ok(());
        }
        // What is sent must be well formed; later layers are what a lenient server might
        // make of it, so a stray '%' there is left as is.
        let decoded = percent_decode(&form, layer == 0)?;
        if decoded == form {
            return Ok(());
        }
        form = Cow::Owned(decoded);
    }
    Err(Rule::BadEscape)
}

/// Rules on one form of a segment, as written and in its NFKC form (what a server that
/// normalises Unicode sees: `\u{FE30}` is `..`, `\u{2026}` is `...`).
fn check_form(form: &str) -> Result<(), Rule> {
    check_chars(form)?;
    if !form.is_ascii() {
        let nfkc: String = form.nfkc().collect();
        check_chars(&nfkc)?;
    }
    Ok(())
}

fn check_chars(form: &str) -> Result<(), Rule> {
    if form.chars().any(char::is_control) {
        return Err(Rule::Control);
    }
    if form.contains('\\') || form.contains(BACKSLASH_LIKE) {
        return Err(Rule::Backslash);
    }
    if form.contains('/') || form.contains(SLASH_LIKE) {
        return Err(Rule::EncodedSlash);
    }
    // Tomcat and others cut `;` parameters before resolving dots (`..;x` is `..`).
    let name = form.split(';').next().unwrap_or(form);
    let mut dots = 0usize;
    let mut other = false;
    for c in name.chars() {
        if c == '.' || DOT_LIKE.contains(&c) {
            dots += 1;
        } else if c != ' ' {
            other = true;
        }
    }
    // Only dots (and spaces, which Windows strips at the end of a name): `.`, `..`, `...`.
    if dots > 0 && !other {
        return Err(Rule::DotSegment);
    }
    Ok(())
}

/// Percent-decode `s` (UTF-8; the `percent-encoding` crate of rust-url, which keeps a `%`
/// not followed by two hex digits as is). With `strict`, such a `%` is an error.
fn percent_decode(s: &str, strict: bool) -> Result<String, Rule> {
    let b = s.as_bytes();
    let stray = |i: usize| {
        !b.get(i + 1..i + 3)
            .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
    };
    if strict && b.iter().enumerate().any(|(i, &c)| c == b'%' && stray(i)) {
        return Err(Rule::BadEscape);
    }
    percent_encoding::percent_decode(b)
        .decode_utf8()
        .map(Cow::into_owned)
        .map_err(|_| Rule::BadEscape)
}

/// `base` + `path`, or `None` for a path that could leave `base`'s path (see
/// [`confine`], which says which rule).
pub fn target_url(base: &reqwest::Url, path: &str) -> Option<reqwest::Url> {
    confine(base, path).ok()
}

#[cfg(test)]
mod tests;
