use crate::spawn_app;
use genjobs_tests::assert_error;
use genjobs_tests::snapshot;
use serde_json::Value;

#[tokio::test]
async fn the_models_list_describes_each_models_form() {
    let app = spawn_app().await;
    let models: Value = app.get("/api/v1/models", &app.demo_key).await.json().await.unwrap();
    snapshot!("models", models);
    for model in models["data"].as_array().unwrap() {
        assert_eq!(model["upstream"], "fal");
        for field in model["fields"].as_array().unwrap() {
            assert!(["text", "textarea", "number", "select", "image-url"].contains(&field["kind"].as_str().unwrap()));
            if field["kind"] == "select" {
                assert!(
                    field["options"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .all(|o| o["value"].is_string() && o["label"].is_string())
                );
            }
        }
    }
}

#[tokio::test]
async fn the_models_list_filters_by_modality() {
    let app = spawn_app().await;
    for (modality, at_least) in [("video", 2), ("image", 3), ("audio", 0), ("music", 0), ("speech", 0), ("3d", 0)] {
        let models: Value =
            app.get(&format!("/api/v1/models?modality={modality}"), &app.demo_key).await.json().await.unwrap();
        let data = models["data"].as_array().unwrap();
        assert!(data.len() >= at_least && data.iter().all(|m| m["modality"] == modality), "{modality}: {models}");
        if at_least == 0 {
            assert!(data.is_empty());
        }
    }
    let image_ids: Vec<_> =
        app.get("/api/v1/models?modality=image", &app.demo_key).await.json::<Value>().await.unwrap()["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_owned())
            .collect();
    assert_eq!(image_ids, ["nano-banana", "flux-pro", "ideogram-v3", "recraft-v3"]);
    let error = assert_error(
        app.get("/api/v1/models?modality=smell", &app.demo_key).await,
        400,
        "invalid_request",
        "INVALID_REQUEST",
    )
    .await;
    assert_eq!(error["param"], "modality");
}

#[tokio::test]
async fn a_replacement_catalog_file_is_served() {
    let mut models = genjobs_domain::catalog::Catalog::builtin_documents().unwrap();
    models.retain(|m| m.modality == genjobs_domain::modality::Modality::Image);
    models[0].display_name = "Renamed".into();
    let path = std::env::temp_dir().join(format!("genjobs-models-{}.json", std::process::id()));
    std::fs::write(&path, genjobs_domain::catalog::CatalogFile { models }.write()).unwrap();
    let app =
        crate::spawn_app_with(genjobs::Config { models_path: Some(path.clone()), ..genjobs_tests::fast_config() })
            .await;
    let models: Value = app.get("/api/v1/models", &app.demo_key).await.json().await.unwrap();
    std::fs::remove_file(path).ok();
    assert_eq!(models["data"].as_array().unwrap().len(), 4);
    assert_eq!(models["data"][0]["display_name"], "Renamed");
}
