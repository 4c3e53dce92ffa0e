//! `GENJOBS_LINK_SECRET`, not the admin token, signs output links; unset, each store's own kept
//! key does. Embedded default only: the services here differ in their admin tokens, which the
//! Postgres harness shares.

use genjobs::Config;
use genjobs_tests::{assert_error, fast_config};
use serde_json::json;

use crate::spawn_app_with;

const SHARED: &str = "a shared link secret, 32 characters or more";
const ANOTHER: &str = "another link secret, 32 characters or more";
const TOKEN_A: &str = "admin token a, 32 characters or more";
const TOKEN_B: &str = "admin token b, 32 characters or more";

fn configured(link_secret: &str, admin_token: &str) -> Config {
    let mut config = fast_config();
    config.link_secret = Some(link_secret.to_owned());
    config.admin_token = Some(admin_token.to_owned());
    config
}

/// A service with the same link secret and another admin token takes a link's signature (and
/// answers that it holds no such file, each service's store being its own); one with another
/// link secret refuses it.
#[tokio::test]
async fn output_links_are_signed_with_the_link_secret_not_the_admin_token() {
    let minting = spawn_app_with(configured(SHARED, TOKEN_A)).await;
    let receipt = minting.submit("images", &minting.demo_key, json!({"prompt": "a kite"})).await;
    let job = minting.wait_final(&minting.demo_key, receipt["job_id"].as_str().unwrap()).await;
    let url = job["outputs"][0]["url"].as_str().unwrap();
    let path = url.strip_prefix(&minting.url("")).unwrap();
    assert_eq!(minting.client.get(url).send().await.unwrap().status(), 200);

    let same_secret = spawn_app_with(configured(SHARED, TOKEN_B)).await;
    let elsewhere = same_secret.client.get(same_secret.url(path)).send().await.unwrap();
    assert_error(elsewhere, 404, "not_found", "FILE_NOT_FOUND").await;
    let other_secret = spawn_app_with(configured(ANOTHER, TOKEN_A)).await;
    let refused = other_secret.client.get(other_secret.url(path)).send().await.unwrap();
    assert_error(refused, 403, "forbidden", "INVALID_SIGNATURE").await;
}

/// Without `GENJOBS_LINK_SECRET`, two services that share their admin token still sign apart:
/// the key comes from each store's own random key, never from the token.
#[tokio::test]
async fn without_a_link_secret_the_admin_token_signs_nothing() {
    let token_only = || {
        let mut config = fast_config();
        config.admin_token = Some(TOKEN_A.to_owned());
        config
    };
    let minting = spawn_app_with(token_only()).await;
    let receipt = minting.submit("images", &minting.demo_key, json!({"prompt": "a kite"})).await;
    let job = minting.wait_final(&minting.demo_key, receipt["job_id"].as_str().unwrap()).await;
    let url = job["outputs"][0]["url"].as_str().unwrap();
    let path = url.strip_prefix(&minting.url("")).unwrap();
    let same_token = spawn_app_with(token_only()).await;
    let refused = same_token.client.get(same_token.url(path)).send().await.unwrap();
    assert_error(refused, 403, "forbidden", "INVALID_SIGNATURE").await;
}
