//! The operator's catalog workflow with the binary against a database: `models export`, an
//! edit, `models apply --dry-run` (a diff, nothing applied), `models apply` (one transaction),
//! and `models import fal` drafting a document from a schema genjobs holds.

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use std::process::{Command, Output};

use genjobs_test_postgres::TestDatabase;
use serde_json::{Value, json};

/// The binary run with `args` on `database` alone, which must succeed.
fn genjobs(args: &[&str], database: &TestDatabase) -> Output {
    let output = genjobs_with(args, database, &[]);
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

/// fal's OpenAPI document of an endpoint genjobs does not ship, in the form fal serves it.
fn served_document() -> Value {
    serde_json::from_str(include_str!("../../upstream-fal/fixtures/fal-openapi-example.json")).unwrap()
}

/// Serves [`served_document`] for `?endpoint_id=fal-ai/example/turbo`, 404 for any other.
fn schema_server() -> String {
    let server = actix_web::HttpServer::new(|| {
        actix_web::App::new().route(
            "/openapi.json",
            actix_web::web::get().to(
                |query: actix_web::web::Query<std::collections::HashMap<String, String>>| async move {
                    match query.get("endpoint_id").map(String::as_str) {
                        Some("fal-ai/example/turbo") => actix_web::HttpResponse::Ok().json(served_document()),
                        _ => actix_web::HttpResponse::NotFound().finish(),
                    }
                },
            ),
        )
    })
    .workers(1)
    .bind(("127.0.0.1", 0))
    .unwrap();
    let url = format!("http://{}/openapi.json", server.addrs()[0]);
    tokio::spawn(server.run());
    url
}

/// The binary run with `args` on `database` and only the settings `envs`, whatever its exit.
fn genjobs_with(args: &[&str], database: &TestDatabase, envs: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_genjobs"))
        .args(args)
        .env_clear()
        .env("DATABASE_URL", &database.url)
        .envs(envs.iter().copied())
        .output()
        .unwrap()
}

// Multi-threaded: the schema server's accept loop runs while the test waits on the binary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_read_online_becomes_routable_through_the_operators_schemas() {
    let database = TestDatabase::new().await;
    let schema_url = schema_server();
    let schemas = std::env::temp_dir().join(format!("genjobs-fal-schemas-{}.json", std::process::id()));
    std::fs::remove_file(&schemas).ok();
    let schemas_path = schemas.to_str().unwrap();

    let import =
        ["models", "import", "fal", "fal-ai/example/turbo", "--id", "turbo", "--online", "--schemas", schemas_path];
    let output = genjobs_with(&import, &database, &[("GENJOBS_FAL_SCHEMA_URL", &schema_url)]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let mut draft: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(draft["routes"][0]["endpoint"], "fal-ai/example/turbo");
    assert_eq!(draft["routes"][0]["params"]["n"], "num_images", "{draft}");
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(&schemas).unwrap()).unwrap();
    assert_eq!(kept["endpoints"]["fal-ai/example/turbo"]["input"]["num_images"]["max"], 4.0, "{kept}");

    draft["price"] = json!({"per": "image", "credits": 2});
    draft["enabled"] = json!(true);
    let mut catalog: Value = serde_json::from_str(&stdout(&genjobs(&["models", "export"], &database))).unwrap();
    catalog["models"].as_array_mut().unwrap().push(draft);
    let file = std::env::temp_dir().join(format!("genjobs-catalog-turbo-{}.json", std::process::id()));
    std::fs::write(&file, catalog.to_string()).unwrap();
    let path = file.to_str().unwrap();

    let refused = genjobs_with(&["models", "apply", path], &database, &[]);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && said.contains("routes[0].endpoint"), "{said}");
    let applied = genjobs_with(&["models", "apply", path], &database, &[("GENJOBS_FAL_SCHEMAS", schemas_path)]);
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    let exported: Value = serde_json::from_str(&stdout(&genjobs(&["models", "export"], &database))).unwrap();
    assert!(ids(&exported).contains(&"turbo"), "{exported}");

    // Online is opt-in and never the reason for a refusal: unreachable, the held schema serves.
    let unreachable = "http://127.0.0.1:9/openapi.json";
    let held = genjobs_with(
        &["models", "import", "fal", "fal-ai/nano-banana", "--online", "--schema-url", unreachable],
        &database,
        &[],
    );
    let warned = String::from_utf8_lossy(&held.stderr);
    assert!(held.status.success() && warned.contains("could not be read online"), "{warned}");
    let unknown = genjobs_with(
        &["models", "import", "fal", "fal-ai/unheard-of", "--online", "--schema-url", unreachable],
        &database,
        &[],
    );
    assert!(!unknown.status.success(), "no schema held nor read");
    std::fs::remove_file(file).ok();
    std::fs::remove_file(schemas).ok();
}
