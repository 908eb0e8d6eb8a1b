//! The published JSON Schemas (`schemas/`) against what abide reads: every example and
//! every snippet in the docs passes both the schema and abide's own reader, and inputs
//! abide refuses by name are refused by the schema too.

use std::path::{Path, PathBuf};

use abide_outbox::model::{MAX_IDEMPOTENCY_KEY_LEN, MAX_PATH_LEN, MAX_PROVIDER_NAME_LEN};
use abide_outbox::Config;
use jsonschema::Validator;
use serde_json::{json, Value};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    let p = root().join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn validator(name: &str) -> Validator {
    let schema: Value = serde_json::from_str(&read(&format!("schemas/{name}"))).unwrap();
    jsonschema::draft202012::new(&schema).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn errors(v: &Validator, instance: &Value) -> Vec<String> {
    v.iter_errors(instance).map(|e| e.to_string()).collect()
}

/// A providers file as the schema sees it: the TOML read as JSON.
fn as_json(toml_text: &str) -> Value {
    let t: toml::Value = toml::from_str(toml_text).unwrap();
    serde_json::to_value(t).unwrap()
}

/// The fenced blocks of `lang` in the README and every chapter of `docs/`, with where each
/// starts.
fn snippets(lang: &str) -> Vec<(String, String)> {
    let mut files = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let fence = format!("```{lang}\n");
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let mut rest = text.as_str();
        while let Some(start) = rest.find(&fence) {
            let body = &rest[start + fence.len()..];
            let end = body.find("```").expect("a closed fence");
            let line = text.len() - rest.len() + start;
            let at = format!("{}:{}", f.display(), text[..line].lines().count() + 1);
            out.push((at, body[..end].to_owned()));
            rest = &body[end..][3..];
        }
    }
    out
}

#[test]
fn every_example_and_docs_input_line_passes_the_input_schema() {
    let v = validator("input-line.schema.json");
    let mut lines = 0;
    for file in ["examples/messages.jsonl", "examples/sms.jsonl"] {
        for (i, line) in read(file).lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let item: Value = serde_json::from_str(line).unwrap();
            assert_eq!(errors(&v, &item), Vec::<String>::new(), "{file}:{}", i + 1);
            lines += 1;
        }
    }
    let blocks = snippets("json");
    assert!(blocks.len() >= 3, "the docs show input lines: {blocks:?}");
    for (at, block) in blocks {
        for line in block.lines().filter(|l| !l.trim().is_empty()) {
            let item: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{at}: {e}"));
            assert_eq!(errors(&v, &item), Vec::<String>::new(), "{at}: {line}");
            lines += 1;
        }
    }
    assert!(lines > 10, "{lines}");
}

#[test]
fn the_input_schema_refuses_lines_abide_refuses() {
    let v = validator("input-line.schema.json");
    let ok = json!({"provider": "sms", "path": "/v1/messages", "body": {"to": "+1"}});
    assert!(v.is_valid(&ok));
    let long_key = "k".repeat(MAX_IDEMPOTENCY_KEY_LEN + 1);
    let bad = [
        json!({"path": "/v1/messages"}),
        json!({"provider": "sms"}),
        json!({"provider": "sms", "path": "/v1", "url": "http://example.com"}),
        json!({"provider": "sms", "path": "v1/messages"}),
        json!({"provider": "sms", "path": "/v1", "method": "post"}),
        json!({"provider": "sms", "path": "/v1", "body": {}, "text": "hi"}),
        json!({"provider": "sms", "path": "/v1", "idempotency_key": "has space"}),
        json!({"provider": "sms", "path": "/v1", "idempotency_key": long_key}),
        json!({"provider": "sms", "path": "/v1", "headers": {"X-Trace": 42}}),
        json!({"provider": "s".repeat(MAX_PROVIDER_NAME_LEN + 1), "path": "/"}),
        json!({"provider": "a/b", "path": "/"}),
        json!({"provider": "sms", "path": format!("/{}", "a".repeat(MAX_PATH_LEN))}),
        json!(["not", "an", "object"]),
    ];
    for line in bad {
        assert!(!v.is_valid(&line), "accepted {line}");
    }
}

#[test]
fn every_example_and_docs_providers_file_passes_the_schema_and_the_reader() {
    let v = validator("providers.schema.json");
    let mut files: Vec<(String, String)> = ["examples/providers.toml", "examples/smpp.toml"]
        .iter()
        .map(|f| ((*f).to_owned(), read(f)))
        .collect();
    let blocks = snippets("toml");
    assert!(
        blocks.len() >= 3,
        "the docs show providers files: {blocks:?}"
    );
    for (at, block) in blocks {
        // A fragment of one provider's tables is shown inside a minimal provider.
        let whole = if block.contains("[[provider]]") {
            block
        } else {
            format!("[[provider]]\nname = \"sms\"\nbase_url = \"http://127.0.0.1:8080\"\n\n{block}")
        };
        files.push((at, whole));
    }
    for (at, text) in files {
        assert_eq!(errors(&v, &as_json(&text)), Vec::<String>::new(), "{at}");
        Config::from_toml_str(&text).unwrap_or_else(|e| panic!("{at}: {e}"));
    }
}

#[test]
fn the_providers_schema_refuses_what_the_reader_refuses_by_name() {
    let v = validator("providers.schema.json");
    let http = "[[provider]]\nname = \"sms\"\nbase_url = \"http://127.0.0.1:8080\"\n";
    let smpp = "[[provider]]\nname = \"smsc\"\ntransport = \"smpp\"\naddress = \"127.0.0.1:2775\"\nsystem_id = \"abide\"\n";
    for ok in [http, smpp] {
        assert_eq!(errors(&v, &as_json(ok)), Vec::<String>::new(), "{ok}");
        Config::from_toml_str(ok).unwrap();
    }
    let bad = [
        format!("{http}rate_hnt = 5.0\n"),
        format!("{http}rate_hint = \"fast\"\n"),
        "[[provider]]\nname = \"sms\"\n".to_owned(),
        format!("{http}address = \"127.0.0.1:2775\"\n"),
        format!("{smpp}base_url = \"http://127.0.0.1:8080\"\n"),
        format!("{smpp}rate_limit_dialect = \"ietf\"\n"),
        format!("{smpp}\n[provider.classify.http]\n403 = \"throttle\"\n"),
        format!("{http}\n[provider.classify.smpp]\n0x58 = \"throttle\"\n"),
        format!("{http}\n[provider.classify.http]\n403 = \"slow_down\"\n"),
        format!("{http}\n[provider.retry]\nmax_attempt = 3\n"),
        format!("{http}\n[provider.failover]\nto = \"b\"\n"),
        format!("{http}rate_limit_dialect = \"klingon\"\n"),
        http.replace("name = \"sms\"", "name = \"a/b\""),
        format!("{http}\n[coordination]\nredis = \"redis://127.0.0.1\"\n"),
    ];
    for text in bad {
        assert!(
            Config::from_toml_str(&text).is_err(),
            "the reader accepted:\n{text}"
        );
        assert!(!v.is_valid(&as_json(&text)), "the schema accepted:\n{text}");
    }
}
