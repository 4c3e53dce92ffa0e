//! What only the embedded default does.

use genjobs::Config;
use genjobs_tests::{fast_config, spawn_app_with};
use serde_json::Value;

#[tokio::test]
async fn the_demo_user_has_the_configured_credits() {
    let app = spawn_app_with(Config { demo_credits: 77, ..fast_config() }).await;
    let account: Value = app.get("/api/v1/account", &app.demo_key).await.json().await.unwrap();
    assert_eq!(account["credits_available"], 77);
}

#[tokio::test]
async fn output_urls_answer_with_real_files_of_the_stated_size() {
    let app = genjobs_tests::spawn_app().await;
    let body = serde_json::json!({"prompt": "a lighthouse", "model": "flux-pro", "aspect_ratio": "16:9"});
    let receipt = app.submit("images", &app.demo_key, body).await;
    let job = app.wait_final(&app.demo_key, receipt["job_id"].as_str().unwrap()).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let output = &job["outputs"][0];
    assert_eq!((output["meta"]["width"].as_u64(), output["meta"]["height"].as_u64()), (Some(1024), Some(576)));
    let file = app.client.get(output["url"].as_str().unwrap()).send().await.unwrap();
    assert_eq!(file.status(), 200);
    assert_eq!(file.headers()["content-type"], "image/png");
    let png = image::load_from_memory_with_format(&file.bytes().await.unwrap(), image::ImageFormat::Png).unwrap();
    assert_eq!((png.width(), png.height()), (1024, 576), "the meta tells the truth");

    let receipt = app.submit("video", &app.demo_key, serde_json::json!({"prompt": "waves"})).await;
    let job = app.wait_final(&app.demo_key, receipt["job_id"].as_str().unwrap()).await;
    let url = job["outputs"][0]["url"].as_str().unwrap().to_owned();
    assert_eq!(job["outputs"][0]["meta"]["content_type"], "video/mp4");
    let whole = app.client.get(&url).send().await.unwrap();
    assert_eq!((whole.status().as_u16(), whole.headers()["accept-ranges"].to_str().unwrap()), (200, "bytes"));
    let bytes = whole.bytes().await.unwrap();
    assert_eq!(&bytes[4..8], b"ftyp", "an MP4");
    let part = app.client.get(&url).header("range", "bytes=0-99").send().await.unwrap();
    assert_eq!(part.status(), 206);
    assert_eq!(part.headers()["content-range"], format!("bytes 0-99/{}", bytes.len()).as_str());
    assert_eq!(part.bytes().await.unwrap(), bytes.slice(0..100));
    let beyond = app.client.get(&url).header("range", format!("bytes={}-", bytes.len())).send().await.unwrap();
    assert_eq!(beyond.status(), 416);
}
