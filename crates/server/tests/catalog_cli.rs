//! The operator's catalog workflow with the binary against a database: `models export`, an
//! edit, `models apply --dry-run` (a diff, nothing applied), `models apply` (one transaction),
//! and `models import fal` drafting a document from a schema genjobs holds.

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use std::process::{Command, Output};

use genjobs_test_postgres::TestDatabase;
use serde_json::{Value, json};

fn genjobs(args: &[&str], database: &TestDatabase) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_genjobs"))
        .args(args)
        .env_clear()
        .env("DATABASE_URL", &database.url)
        .output()
        .unwrap();
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    output
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn ids(catalog: &Value) -> Vec<&str> {
    catalog["models"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn export_edit_apply_and_import() {
    let database = TestDatabase::new().await;
    let exported: Value = serde_json::from_str(&stdout(&genjobs(&["models", "export"], &database))).unwrap();
    assert!(ids(&exported).contains(&"flux-pro") && ids(&exported).contains(&"hailuo-02"), "the built-in catalog");

    let mut draft: Value = serde_json::from_str(&stdout(&genjobs(
        &["models", "import", "fal", "fal-ai/minimax/hailuo-02/standard/image-to-video", "--id", "hailuo-i2v"],
        &database,
    )))
    .unwrap();
    assert_eq!((draft["id"].as_str(), draft["enabled"].as_bool()), (Some("hailuo-i2v"), Some(false)));
    draft["price"] = json!({"per": "second", "credits": 5});
    draft["enabled"] = json!(true);

    let mut edited = exported.clone();
    let models = edited["models"].as_array_mut().unwrap();
    models.retain(|m| m["id"] != "flux-pro");
    models[0]["price"]["credits"] = json!(99);
    models.push(draft);
    let file = std::env::temp_dir().join(format!("genjobs-catalog-{}.json", std::process::id()));
    std::fs::write(&file, edited.to_string()).unwrap();
    let path = file.to_str().unwrap();

    let planned = stdout(&genjobs(&["models", "apply", path, "--dry-run"], &database));
    assert!(planned.contains("flux-pro: deleted") && planned.contains("hailuo-i2v: added"), "{planned}");
    assert!(
        planned.contains("+    \"credits\": 99,") && planned.contains("dry run: 3 changes not applied"),
        "{planned}"
    );
    let unchanged: Value = serde_json::from_str(&stdout(&genjobs(&["models", "export"], &database))).unwrap();
    assert_eq!(unchanged, exported, "a dry run applies nothing");

    assert!(stdout(&genjobs(&["models", "apply", path], &database)).contains("3 changes applied"));
    let applied: Value = serde_json::from_str(&stdout(&genjobs(&["models", "export"], &database))).unwrap();
    assert_eq!(applied, edited);
    assert!(stdout(&genjobs(&["models", "apply", path], &database)).contains("already matches"));
    std::fs::remove_file(file).ok();
}
