//! Every message key the built-in catalog uses as a `label` has its English text in `docs/api.md`,
//! so that a client other than the playground can show words rather than `field.prompt`.

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use genjobs_domain::catalog::Catalog;

#[test]
fn every_built_in_label_key_is_in_the_api_docs() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/api.md")).unwrap();
    let table_rows: Vec<&str> = docs.lines().filter(|line| line.starts_with("| `")).collect();
    let mut keys = Vec::new();
    for document in Catalog::builtin_documents().unwrap() {
        let document = document.to_value();
        for field in document["fields"].as_array().unwrap() {
            keys.push(field["label"].as_str().unwrap().to_owned());
            for option in field["options"].as_array().into_iter().flatten() {
                keys.push(option["label"].as_str().unwrap().to_owned());
            }
        }
    }
    assert!(keys.len() > 20, "{keys:?}");
    for key in keys {
        let documented = table_rows.iter().any(|row| row.split(" | ").next().unwrap().contains(&format!("`{key}`")));
        assert!(documented, "label key {key} has no English text in docs/api.md");
    }
}
