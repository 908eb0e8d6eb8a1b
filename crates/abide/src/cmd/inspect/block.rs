//! Reading the header block `abide inspect` is given on stdin (what `curl -i` prints):
//! an optional status line, header fields, the end of the block; errors name the line and
//! never show a secret header's value.

use abide_core::retry_after::escape_raw;
use anyhow::{bail, Context};
use http::{HeaderMap, HeaderName, HeaderValue};

/// Largest header block read from stdin, in bytes (a real response head is a few KiB;
/// servers commonly refuse more than 64 KiB).
pub(super) const MAX_BLOCK_BYTES: usize = 1 << 20;

/// Most header lines accepted (far below `HeaderMap`'s hard limit, which panics).
const MAX_HEADERS: usize = 10_000;

pub(super) fn append(
    headers: &mut HeaderMap,
    name: HeaderName,
    value: HeaderValue,
) -> anyhow::Result<()> {
    if headers.len() >= MAX_HEADERS {
        bail!("more than {MAX_HEADERS} header lines");
    }
    headers
        .try_append(name, value)
        .map(drop)
        .with_context(|| format!("more than {MAX_HEADERS} header lines"))
}

/// Parse a raw header block into `headers`; returns the status of a leading status line and
/// where a body after the block starts, if the block ended.
///
/// The header fields are parsed by `httparse` (RFC 9112 §5: field names are tokens, values
/// visible bytes, obs-fold continuation lines joined with a space, lines ending in CRLF or
/// LF). The status line is read here: `httparse` knows only HTTP/1.x, and `HTTP/2 429` is
/// what `curl -i` prints.
///
/// # Errors
/// A malformed line (named by its number), more than [`MAX_HEADERS`] lines, or a block that
/// has not ended within [`MAX_BLOCK_BYTES`].
pub(super) fn parse_block(
    input: &[u8],
    headers: &mut HeaderMap,
) -> anyhow::Result<(Option<u16>, Option<usize>)> {
    // Leading blank lines are skipped; `n` is the number of the line at `at`.
    let (mut at, mut n) = (0usize, 1usize);
    while let Some(len) = [b"\r\n".as_slice(), b"\n"]
        .into_iter()
        .find(|nl| input[at..].starts_with(nl))
        .map(<[u8]>::len)
    {
        at += len;
        n += 1;
    }
    let mut status = None;
    if input[at..].starts_with(b"HTTP/") {
        let end = input[at..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(input.len(), |i| at + i);
        let line = &input[at..end];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        status = Some(
            parse_status_line(line)
                .with_context(|| format!("stdin line {n}: bad status line {}", shown(line)))?,
        );
        at = (end + 1).min(input.len());
        n += 1;
    }
    let fields = &input[at..];
    // Where the block ends: at its blank line, if the input has one.
    let ends = fields.starts_with(b"\n")
        || fields.starts_with(b"\r\n")
        || fields.windows(2).any(|w| w == b"\n\n")
        || fields.windows(3).any(|w| w == b"\n\r\n");
    if !ends && input.len() > MAX_BLOCK_BYTES {
        bail!("stdin: the header block is larger than {MAX_BLOCK_BYTES} bytes");
    }
    // httparse reads a response head: give it an HTTP/1.1 status line of its own, and an end
    // to a block that stops without its blank line.
    const HEAD: &[u8] = b"HTTP/1.1 200 OK\r\n";
    let mut head = Vec::with_capacity(HEAD.len() + fields.len() + 4);
    head.extend_from_slice(HEAD);
    head.extend_from_slice(fields);
    if !ends {
        if !head.ends_with(b"\n") {
            head.extend_from_slice(b"\r\n");
        }
        head.extend_from_slice(b"\r\n");
    }
    let mut slots = vec![httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut config = httparse::ParserConfig::default();
    config.allow_obsolete_multiline_headers_in_responses(true);
    let mut response = httparse::Response::new(&mut slots);
    let ended = match config.parse_response(&mut response, &head) {
        Ok(httparse::Status::Complete(len)) => ends.then(|| at + len - HEAD.len()),
        Ok(httparse::Status::Partial) => None,
        Err(httparse::Error::TooManyHeaders) => bail!("more than {MAX_HEADERS} header lines"),
        Err(e) => return Err(bad_line(fields, n, e)),
    };
    for h in response.headers.iter() {
        let name = HeaderName::from_bytes(h.name.as_bytes())
            .with_context(|| format!("invalid header name {}", escape_raw(h.name.as_bytes())))?;
        let value = HeaderValue::from_bytes(&unfold(h.value))
            .with_context(|| format!("{name}: invalid header value"))?;
        append(headers, name, value)?;
    }
    Ok((status, ended))
}

/// A value with its obs-fold line breaks (RFC 9112 §5.2) each replaced by one space.
fn unfold(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len());
    for (i, piece) in value.split(|&b| b == b'\n').enumerate() {
        let piece = trim(piece.strip_suffix(b"\r").unwrap_or(piece));
        if i > 0 && !piece.is_empty() {
            out.push(b' ');
        }
        out.extend_from_slice(piece);
    }
    out
}

/// The error for a header block `httparse` refused: the first line (numbered from
/// `first`) that is not a field on its own, shown redacted.
fn bad_line(fields: &[u8], first: usize, e: httparse::Error) -> anyhow::Error {
    let mut previous_field = false;
    for (i, line) in fields.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            break;
        }
        let n = first + i;
        if matches!(line.first(), Some(b' ' | b'\t')) {
            if !previous_field {
                return anyhow::anyhow!(
                    "stdin line {n}: continuation line with no header before it"
                );
            }
            continue;
        }
        let mut alone = line.to_vec();
        alone.extend_from_slice(b"\r\n\r\n");
        let mut slot = [httparse::EMPTY_HEADER; 1];
        if httparse::parse_headers(&alone, &mut slot).is_err() {
            return anyhow::anyhow!("stdin line {n} {}: {e}", shown(line));
        }
        previous_field = true;
    }
    anyhow::anyhow!("stdin line {first}: {e}")
}

/// `HTTP/1.1 429 Too Many Requests` or `HTTP/2 429`.
fn parse_status_line(line: &[u8]) -> anyhow::Result<u16> {
    // A bare CR (old Mac line endings) would otherwise hide every following header in the
    // ignored reason phrase, silently dropping a Retry-After.
    if line.iter().any(u8::is_ascii_control) {
        bail!("control character in the status line (lines must end in LF or CRLF)");
    }
    let text = std::str::from_utf8(line).context("not UTF-8")?;
    let code = text
        .split_ascii_whitespace()
        .nth(1)
        .context("no status code")?;
    let n: u16 = code
        .parse()
        .ok()
        .filter(|c| (100..=599).contains(c) && code.len() == 3)
        .with_context(|| format!("{code:?} is not a status code"))?;
    Ok(n)
}

/// `Name: value` (one `--header` flag), parsed by `httparse` as one field line; the value
/// trimmed of OWS. Non-UTF-8 value bytes are kept (they are a real case for Retry-After
/// and are reported escaped).
pub(super) fn parse_header_line(line: &[u8]) -> anyhow::Result<(HeaderName, HeaderValue)> {
    let line = trim(line);
    if !line.contains(&b':') {
        bail!("expected `Name: value`");
    }
    let mut field = line.to_vec();
    field.extend_from_slice(b"\r\n\r\n");
    let mut slot = [httparse::EMPTY_HEADER; 1];
    let h = match httparse::parse_headers(&field, &mut slot) {
        Ok(httparse::Status::Complete((_, [h]))) => *h,
        Ok(_) | Err(httparse::Error::TooManyHeaders) => bail!("expected one `Name: value`"),
        Err(e) => bail!("{e} (expected `Name: value`)"),
    };
    let name = HeaderName::from_bytes(h.name.as_bytes()).context("invalid header name")?;
    let value = HeaderValue::from_bytes(trim(h.value))
        .context("invalid header value (control characters?)")?;
    Ok((name, value))
}

fn trim(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

/// Headers whose values are secrets: never echoed, even in an error message.
fn is_sensitive(name: &[u8]) -> bool {
    let name = String::from_utf8_lossy(name).to_ascii_lowercase();
    matches!(
        name.as_str(),
        "authorization" | "proxy-authorization" | "cookie" | "set-cookie"
    ) || name.contains("api-key")
        || name.contains("apikey")
        || name.contains("token")
        || name.contains("secret")
}

/// A line for an error message: escaped, shortened, and with a secret value redacted.
pub(super) fn shown(line: &[u8]) -> String {
    // The name ends at ':' or, on a line missing its colon, at the first blank.
    let end = line
        .iter()
        .position(|&b| matches!(b, b':' | b' ' | b'\t'))
        .unwrap_or(line.len());
    let name = trim(&line[..end]);
    if is_sensitive(name) {
        return format!("({}: <redacted>)", escape_raw(name));
    }
    let cut = &line[..line.len().min(80)];
    format!("({})", escape_raw(cut))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn block_with_status_line_crlf_and_fold() {
        let mut h = HeaderMap::new();
        let input =
            b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 5\r\nX-Long: a\r\n  b\r\n\r\nbody: x\n";
        let (s, body_at) = parse_block(input, &mut h).unwrap();
        assert_eq!(s, Some(429));
        assert_eq!(&input[body_at.unwrap()..], b"body: x\n");
        assert_eq!(h.get("retry-after").unwrap(), "5");
        assert_eq!(h.get("x-long").unwrap(), "a b");
        assert!(h.get("body").is_none());
    }

    #[test]
    fn blocks_without_an_end_and_bad_lines_named_by_number() {
        // No blank line: what it holds is read, and there is no body.
        let mut h = HeaderMap::new();
        let (s, body_at) =
            parse_block(b"\n\nHTTP/2 429\nRetry-After: 3\nRetry-After: 9", &mut h).unwrap();
        assert_eq!((s, body_at), (Some(429), None));
        let all: Vec<_> = h.get_all("retry-after").iter().collect();
        assert_eq!(all, ["3", "9"]);
        // Lines are numbered from the first of the input, blank lines included.
        let e = parse_block(b"\nHTTP/1.1 429 x\nA: 1\nB C\n\n", &mut HeaderMap::new())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("stdin line 4 (B C)"), "{e}");
        let e = parse_block(b" folded: x\n\n", &mut HeaderMap::new())
            .unwrap_err()
            .to_string();
        assert!(e.contains("stdin line 1: continuation line"), "{e}");
        // A secret on a bad line is not echoed.
        let e = parse_block(b"X-Api-Key hunter2\n\n", &mut HeaderMap::new())
            .unwrap_err()
            .to_string();
        assert!(e.contains("<redacted>") && !e.contains("hunter2"), "{e}");
    }

    #[test]
    fn one_flag_is_one_field() {
        let (n, v) = parse_header_line(b"  Retry-After:  5 ").unwrap();
        assert_eq!((n.as_str(), v.as_bytes()), ("retry-after", b"5".as_slice()));
        assert!(parse_header_line(b"Retry-After 5").is_err());
        assert!(parse_header_line(b"Bad Name: 5").is_err());
        assert!(parse_header_line(b"A: 1\nB: 2").is_err());
    }

    #[test]
    fn secrets_are_redacted_in_errors() {
        assert_eq!(
            shown(b"Authorization: Bearer abc"),
            "(Authorization: <redacted>)"
        );
        assert_eq!(shown(b"X-Api-Key: k"), "(X-Api-Key: <redacted>)");
        assert_eq!(shown(b"Retry-After: 5"), "(Retry-After: 5)");
        assert_eq!(shown(b"Cookie sid=1"), "(Cookie: <redacted>)");
    }
}
