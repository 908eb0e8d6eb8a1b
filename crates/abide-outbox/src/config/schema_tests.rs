//! `schemas/providers.schema.json` names exactly the keys this reader takes: a key added
//! here and not there (or the reverse) fails, so editors and CI pipelines that validate
//! against the schema never refuse a file abide reads, nor pass one it refuses by name.

use std::collections::BTreeSet;

use abide_core::{BodyRule, ClassifyOverrides, Dialect, HeaderRule, VerdictClass};
use serde_json::Value;

use super::session::{FileBudget, FilePacer, FileRetry};
use super::{FileCoordination, FileFailover, SHARED_KEYS};
use crate::toml_keys::field_names;
use crate::transport::KINDS;

fn schema() -> Value {
    serde_json::from_str(include_str!("../../../../schemas/providers.schema.json")).unwrap()
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

/// The names of an `enum` in the schema.
fn choices(v: &Value) -> BTreeSet<String> {
    let names = v["enum"].as_array().unwrap();
    names
        .iter()
        .map(|n| n.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_schema_names_every_table_and_key_the_reader_takes() {
    let s = schema();
    assert_eq!(keys(&s["properties"]), set(&["provider", "coordination"]));
    let coordination = &s["properties"]["coordination"]["properties"];
    assert_eq!(keys(coordination), set(field_names::<FileCoordination>()));

    let p = &s["$defs"]["provider"]["properties"];
    assert_eq!(keys(p), set(SHARED_KEYS));
    for (table, fields) in [
        ("retry", field_names::<FileRetry>()),
        ("budget", field_names::<FileBudget>()),
        ("pacer", field_names::<FilePacer>()),
        ("classify", field_names::<ClassifyOverrides>()),
        ("failover", field_names::<FileFailover>()),
    ] {
        assert_eq!(
            keys(&p[table]["properties"]),
            set(fields),
            "[provider.{table}]"
        );
    }
    let rules = &p["classify"]["properties"];
    let body = &rules["body"]["items"]["properties"];
    assert_eq!(keys(body), set(field_names::<BodyRule>()));
    let header = &rules["header"]["items"]["properties"];
    assert_eq!(keys(header), set(field_names::<HeaderRule>()));
}

#[test]
fn each_transport_has_its_keys_and_refuses_the_shared_ones_it_has_no_use_for() {
    let s = schema();
    let names: BTreeSet<String> = KINDS.iter().map(|k| k.name.to_owned()).collect();
    assert!(names.is_subset(&choices(&s["$defs"]["provider"]["properties"]["transport"])));
    for kind in KINDS {
        let def = &s["$defs"][kind.name]["properties"];
        let own: BTreeSet<String> = keys(def)
            .into_iter()
            .filter(|k| !SHARED_KEYS.contains(&k.as_str()))
            .collect();
        assert_eq!(own, set((kind.keys)()), "transport = {:?}", kind.name);
        // Each shared key the transport refuses is `false` in its branch.
        let mut refused = Vec::new();
        for (k, v) in def.as_object().unwrap() {
            if v == &Value::Bool(false) {
                refused.push(k.clone());
            }
            if let Some(inner) = v.get("properties").and_then(Value::as_object) {
                for (ik, iv) in inner {
                    if iv == &Value::Bool(false) {
                        refused.push(format!("{k}.{ik}"));
                    }
                }
            }
        }
        refused.sort();
        let mut expected = set(kind.unused_shared).into_iter().collect::<Vec<_>>();
        expected.sort();
        assert_eq!(refused, expected, "transport = {:?}", kind.name);
    }
}

#[test]
fn the_schema_lists_every_verdict_class_and_dialect() {
    let s = schema();
    let verdicts: BTreeSet<String> = VerdictClass::ALL
        .iter()
        .map(|v| v.as_str().into())
        .collect();
    assert_eq!(choices(&s["$defs"]["verdict"]), verdicts);
    let dialects: BTreeSet<String> = Dialect::ALL.iter().map(|d| d.as_str().into()).collect();
    let p = &s["$defs"]["provider"]["properties"];
    assert_eq!(choices(&p["rate_limit_dialect"]), dialects);
}
