use super::*;

fn base() -> reqwest::Url {
    reqwest::Url::parse("http://127.0.0.1:9/api").unwrap()
}

/// Every spelling from issue 11 and more: (path, rule).
const REFUSED: &[(&str, Rule)] = &[
    // Dot segments, as the URL Standard resolves them.
    ("/../v1/messages", Rule::DotSegment),
    ("/./v1", Rule::DotSegment),
    ("/v1/../../v1/messages", Rule::DotSegment),
    ("/%2e%2e/v1/messages", Rule::DotSegment),
    ("/%2E%2E/v1/messages", Rule::DotSegment),
    ("/%2E./v1/messages", Rule::DotSegment),
    ("/%2e./v1/messages", Rule::DotSegment),
    ("/.%2e/v1/messages", Rule::DotSegment),
    ("/.%2E/v1/messages", Rule::DotSegment),
    ("/%2e/v1", Rule::DotSegment),
    ("/v1/..", Rule::DotSegment),
    ("/v1/%2e%2e", Rule::DotSegment),
    ("/v1/..?x=1", Rule::DotSegment),
    // Decoded again by a proxy or server.
    ("/%252e%252e/v1", Rule::DotSegment),
    ("/%25252e%25252e/v1", Rule::DotSegment),
    ("/%252E./v1", Rule::DotSegment),
    // Encoded more times than any one proxy and server would decode (up to eight
    // layers): still dots.
    ("/%2525252e%2525252e/v1", Rule::DotSegment),
    ("/%252525252e./v1", Rule::DotSegment),
    ("/%252525252525252e%252525252525252e/v1", Rule::DotSegment),
    // Nine layers: no request needs it.
    ("/%2525252525252525252e/v1", Rule::BadEscape),
    ("/v1/x%2525252525252525252541", Rule::BadEscape),
    // `;` parameters cut before the dots are resolved (Tomcat `..;/`).
    ("/..;/v1", Rule::DotSegment),
    ("/..;jsessionid=x/v1", Rule::DotSegment),
    ("/%2e%2e;x=1/v1", Rule::DotSegment),
    ("/..%3b/v1", Rule::DotSegment),
    ("/.;/v1", Rule::DotSegment),
    // Look-alike dots (NFKC, best fit), raw and encoded.
    ("/\u{FF0E}\u{FF0E}/v1", Rule::DotSegment),
    ("/%EF%BC%8E%EF%BC%8E/v1", Rule::DotSegment),
    ("/\u{2025}/v1", Rule::DotSegment),
    ("/.\u{FE52}/v1", Rule::DotSegment),
    ("/\u{2024}\u{2024}/v1", Rule::DotSegment),
    ("/\u{3002}\u{3002}/v1", Rule::DotSegment),
    // Whose NFKC form is dots: two (U+FE30), three (U+2026, U+FE19), mixed, encoded.
    ("/\u{FE30}/v1", Rule::DotSegment),
    ("/\u{2026}/v1", Rule::DotSegment),
    ("/\u{FE19}/v1", Rule::DotSegment),
    ("/.\u{FE30}/v1", Rule::DotSegment),
    ("/v1/\u{2026}", Rule::DotSegment),
    ("/\u{FE30};x/v1", Rule::DotSegment),
    ("/%EF%B8%B0/v1", Rule::DotSegment),
    ("/%E2%80%A6/v1", Rule::DotSegment),
    ("/%EF%B8%99/v1", Rule::DotSegment),
    ("/%25EF%25B8%25B0/v1", Rule::DotSegment),
    ("/\u{FF61}\u{FF61}/v1", Rule::DotSegment),
    // NFKC slashes and backslashes.
    ("/..\u{FE68}v1", Rule::Backslash),
    // Dots and spaces (Windows strips trailing dots and spaces).
    ("/.../v1", Rule::DotSegment),
    ("/..%20/v1", Rule::DotSegment),
    ("/%20../v1", Rule::DotSegment),
    // Overlong UTF-8 and broken escapes.
    ("/%c0%ae%c0%ae/v1", Rule::BadEscape),
    ("/%e0%80%ae%e0%80%ae/v1", Rule::BadEscape),
    ("/%/v1", Rule::BadEscape),
    ("/%2/v1", Rule::BadEscape),
    ("/%zz/v1", Rule::BadEscape),
    ("/%+1/v1", Rule::BadEscape),
    ("/..%u2215v1", Rule::BadEscape),
    // Encoded or look-alike slashes.
    ("/..%2fv1", Rule::EncodedSlash),
    ("/..%2Fv1", Rule::EncodedSlash),
    ("/a%2f..%2f..%2fv1", Rule::EncodedSlash),
    ("/%2e%2e%2f%2e%2e%2fv1", Rule::EncodedSlash),
    ("/%252f/v1", Rule::EncodedSlash),
    ("/..\u{FF0F}v1", Rule::EncodedSlash),
    ("/a\u{2215}..\u{2215}v1", Rule::EncodedSlash),
    ("/%EF%BC%8F..%EF%BC%8Fv1", Rule::EncodedSlash),
    // Backslashes, raw, encoded, look-alike.
    ("/..\\v1", Rule::Backslash),
    ("/\\..\\v1", Rule::Backslash),
    ("/v1\\..\\..\\x", Rule::Backslash),
    ("/%5c..%5cv1", Rule::Backslash),
    ("/..%5Cv1", Rule::Backslash),
    ("/..\u{FF3C}v1", Rule::Backslash),
    ("/%255c/v1", Rule::Backslash),
    // Hosts, schemes, absolute and relative references.
    ("//evil.example/v1", Rule::NamesAHost),
    ("///evil.example/v1", Rule::NamesAHost),
    ("/x/http://evil.example/", Rule::NamesAHost),
    ("http://evil.example/v1", Rule::NotAPath),
    ("https://127.0.0.1:9/v1", Rule::NotAPath),
    ("\\\\evil.example\\v1", Rule::NotAPath),
    ("@evil.example/v1", Rule::NotAPath),
    ("v1/messages", Rule::NotAPath),
    ("../v1", Rule::NotAPath),
    ("", Rule::NotAPath),
    ("?x=1", Rule::NotAPath),
    // Empty segments.
    ("/v1//messages", Rule::EmptySegment),
    ("/v1//../x", Rule::EmptySegment),
    // Fragments, controls, spaces (raw or encoded).
    ("/v1/m#/../../x", Rule::Fragment),
    ("/v1/m?x=1#f", Rule::Fragment),
    ("/.\t./v1", Rule::Control),
    ("/.\n./v1", Rule::Control),
    ("/v1 /m", Rule::Control),
    ("/.%09./v1", Rule::Control),
    ("/..%00/v1", Rule::Control),
    ("/v1/m%0d%0aX-Injected:%201", Rule::Control),
    ("/v1?x=\r\nHost: evil", Rule::Control),
];

/// Paths that stay below the base path: (path, URL sent to).
const ACCEPTED: &[(&str, &str)] = &[
    ("/v1/messages", "http://127.0.0.1:9/api/v1/messages"),
    ("/", "http://127.0.0.1:9/api/"),
    ("/v1/messages/", "http://127.0.0.1:9/api/v1/messages/"),
    (
        "/v1/m?next=/../../admin&u=a@b",
        "http://127.0.0.1:9/api/v1/m?next=/../../admin&u=a@b",
    ),
    ("/@evil.example/x", "http://127.0.0.1:9/api/@evil.example/x"),
    (
        "/users/a@b.example",
        "http://127.0.0.1:9/api/users/a@b.example",
    ),
    ("/v1;v=2/m", "http://127.0.0.1:9/api/v1;v=2/m"),
    ("/.well-known/x", "http://127.0.0.1:9/api/.well-known/x"),
    ("/v1/a..b/..c", "http://127.0.0.1:9/api/v1/a..b/..c"),
    ("/v1/%2e%2e-x", "http://127.0.0.1:9/api/v1/%2e%2e-x"),
    ("/v1/100%25", "http://127.0.0.1:9/api/v1/100%25"),
    ("/v1/caf%C3%A9", "http://127.0.0.1:9/api/v1/caf%C3%A9"),
    ("/v1/café", "http://127.0.0.1:9/api/v1/caf%C3%A9"),
    ("/v1/a:b", "http://127.0.0.1:9/api/v1/a:b"),
    // Look-alikes inside a name, encoded spaces and literal percents: a name, not dots.
    ("/v1/a\u{2026}b", "http://127.0.0.1:9/api/v1/a%E2%80%A6b"),
    (
        "/v1/hello%20world",
        "http://127.0.0.1:9/api/v1/hello%20world",
    ),
    ("/v1/100%2525", "http://127.0.0.1:9/api/v1/100%2525"),
    ("/v1/m?q=a%20b%00", "http://127.0.0.1:9/api/v1/m?q=a%20b%00"),
];

#[test]
fn every_spelling_that_could_leave_the_base_path_is_refused() {
    for &(path, rule) in REFUSED {
        let e = confine(&base(), path).expect_err(path);
        assert_eq!(e.rule, rule, "{path:?}: {e}");
        let shown = e.to_string();
        assert!(shown.contains(rule.name()), "{shown}");
        assert!(shown.starts_with("path \""), "{shown}");
        // Refused without a provider too (enqueue validation).
        assert_eq!(check(path).map_err(|e| e.rule), Err(rule), "{path:?}");
    }
}

#[test]
fn the_issue_spelling_really_escapes_without_the_rules() {
    // What the HTTP client itself makes of `/%2e%2e/v1/messages`: the reason for all this.
    let naive = reqwest::Url::parse("http://127.0.0.1:9/api/%2e%2e/v1/messages").unwrap();
    assert_eq!(naive.path(), "/v1/messages");
    let naive = reqwest::Url::parse("http://127.0.0.1:9/api/..\\v1").unwrap();
    assert_eq!(naive.path(), "/v1");
}

#[test]
fn paths_below_the_base_are_built_as_the_client_sends_them() {
    for base in ["http://127.0.0.1:9/api", "http://127.0.0.1:9/api/"] {
        let base = reqwest::Url::parse(base).unwrap();
        for &(path, want) in ACCEPTED {
            let url = confine(&base, path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
            assert_eq!(url.as_str(), want, "{path:?}");
            assert!(url.path().starts_with("/api/"), "{url}");
            assert_eq!(url.host_str(), Some("127.0.0.1"));
        }
    }
    let root = reqwest::Url::parse("https://api.example").unwrap();
    assert_eq!(
        confine(&root, "/v1/m").unwrap().as_str(),
        "https://api.example/v1/m"
    );
}

#[test]
fn errors_quote_a_bounded_path() {
    let long = format!("/{}", "%2e".repeat(10_000));
    let e = confine(&base(), &long).unwrap_err().to_string();
    assert!(e.contains("too-long") && e.len() < 800, "{}", e.len());
    let dots = format!("/{}/v1", ".".repeat(1_000));
    let e = confine(&base(), &dots).unwrap_err().to_string();
    assert!(e.contains("dot-segment") && e.len() < 800, "{}", e.len());
}
