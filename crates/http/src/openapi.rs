//! The OpenAPI 3.1 document, generated from the handlers' `#[utoipa::path]` annotations and the
//! `ToSchema` derives of `genjobs-api`'s wire types; the interactive documentation over it at
//! `/docs` is one of the service's pages (`crate::pages`).
//!
//! What every operation shares is added once, by a `Modify` of the document, rather than repeated
//! on each handler: the security schemes, `X-Request-Id` on every response, the 401 and 429 of the
//! authenticated routes, the 413 of the authenticated routes that read a body and the 415 of those
//! that read JSON (a route that answers them otherwise declares its own), and the 500 and 503 of
//! the routes that reach the store.

use std::sync::LazyLock;

use actix_web::HttpResponse;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::Operation;
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi as Document, Ref, ResponseBuilder};
use utoipa::{Modify, OpenApi};

use genjobs_api::{BatchWebhookPayload, ProviderStatus, ServiceIndex, Status, StreamEvent, WebhookPayload};

use crate::error::Envelope;
use crate::handlers;
use crate::openai::OpenAiEnvelope;
use crate::openai::handlers as openai;
use crate::pages::{self, DocsAsset, PlaygroundAsset};

/// The API's document.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "genjobs",
        description = "The gateway for asynchronous image and video generation: submit a request and get a job id at once with credits held, then read, long-poll, stream or cancel the job.",
    ),
    paths(
        handlers::create_video,
        handlers::create_image,
        handlers::quote_video,
        handlers::quote_image,
        handlers::create_batch,
        handlers::list_batches,
        handlers::get_batch,
        handlers::batch_items,
        handlers::batch_results,
        handlers::cancel_batch,
        handlers::admin_batches,
        handlers::admin_batch,
        handlers::admin_batch_items,
        handlers::get_job,
        handlers::list_jobs,
        handlers::stream_job,
        handlers::cancel_job,
        handlers::list_models,
        handlers::account,
        handlers::account_ledger,
        handlers::account_usage,
        handlers::account_issue_key,
        handlers::account_keys,
        handlers::account_revoke_key,
        handlers::webhook_secret,
        handlers::rotate_webhook_secret,
        handlers::job_webhooks,
        handlers::redeliver_webhook,
        handlers::output_file,
        handlers::upload_image,
        handlers::uploaded_image,
        handlers::upstream_webhook,
        handlers::admin_create_user,
        handlers::admin_user,
        handlers::admin_users,
        handlers::admin_change_user,
        handlers::admin_issue_key,
        handlers::admin_keys,
        handlers::admin_grant,
        handlers::admin_revoke_key,
        handlers::admin_jobs,
        handlers::admin_job,
        handlers::admin_cancel_job,
        handlers::admin_change_key,
        handlers::admin_usage,
        handlers::admin_reconciliation,
        handlers::admin_models,
        handlers::admin_providers,
        handlers::admin_put_model,
        handlers::admin_delete_model,
        handlers::healthz,
        handlers::readyz,
        handlers::metrics,
        openapi_json,
        pages::front_page,
        pages::favicon,
        pages::docs_page,
        pages::docs_asset,
        pages::playground,
        pages::playground_account,
        pages::playground_asset,
        pages::console,
        openai::create_image,
        crate::openai::edits::edit_image,
        openai::create_video,
        openai::list_videos,
        openai::get_video,
        openai::delete_video,
        openai::video_content,
        openai::list_models,
        crate::openai::files::create_file,
        crate::openai::files::get_file,
        crate::openai::files::file_content,
        crate::openai::batches::create_batch,
        crate::openai::batches::list_batches,
        crate::openai::batches::get_batch,
        crate::openai::batches::cancel_batch,
    ),
    components(schemas(StreamEvent, Envelope, Status, ProviderStatus, DocsAsset, PlaygroundAsset, OpenAiEnvelope, WebhookPayload, BatchWebhookPayload, ServiceIndex)),
    modifiers(&Conventions),
    tags(
        (name = "generations", description = "Submit image and video jobs"),
        (name = "jobs", description = "Read, wait for, stream and cancel jobs"),
        (name = "batches", description = "Many generations as one unit: accepted whole, run on idle capacity at the batch price, read back as one result file"),
        (name = "models", description = "The model catalog and each model's form"),
        (name = "account", description = "The caller's credits and limits"),
        (name = "uploads", description = "Images a client uploads, to pass among a job's `image_inputs`"),
        (name = "webhooks", description = "Webhooks to clients: the signing secret, a job's deliveries, redelivery. A job submitted with `webhook_url` has its end POSTed there as the `WebhookPayload` schema, and a batch submitted with one its end as the `BatchWebhookPayload` schema, signed by the Standard Webhooks scheme (`webhook-id`, `webhook-timestamp`, `webhook-signature`)"),
        (name = "admin", description = "Users, keys, credits, every user's jobs and the model catalog, with the admin token"),
        (name = "operations", description = "Health, readiness, metrics, this document, and the provider's webhooks"),
        (name = "openai", description = "OpenAI's image, video and Batch API over the same jobs, batches and credits; errors in OpenAI's shape"),
    )
)]
pub struct ApiDoc;

/// What every operation shares; see the module's documentation.
struct Conventions;

/// The error schema of the routes under `path`: the native envelope, or OpenAI's under
/// `/openai/`.
fn error_schema(path: &str) -> &'static str {
    if path.starts_with("/openai/") { "OpenAiError" } else { "Error" }
}

fn error_response(schema: &str, description: &str) -> utoipa::openapi::Response {
    ResponseBuilder::new()
        .description(description)
        .content("application/json", ContentBuilder::new().schema(Some(Ref::from_schema_name(schema))).build())
        .build()
}

fn string_header(description: &str) -> utoipa::openapi::header::Header {
    HeaderBuilder::new()
        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
        .description(Some(description))
        .build()
}

fn requires(operation: &Operation, scheme: &str) -> bool {
    operation
        .security
        .iter()
        .flatten()
        .any(|requirement| serde_json::to_value(requirement).is_ok_and(|value| value.get(scheme).is_some()))
}

impl Modify for Conventions {
    fn modify(&self, openapi: &mut Document) {
        let components = openapi.components.get_or_insert_with(Default::default);
        let bearer = |description: &str| {
            SecurityScheme::Http(
                HttpBuilder::new().scheme(HttpAuthScheme::Bearer).description(Some(description)).build(),
            )
        };
        components.add_security_scheme("api_key", bearer("A user's API key: `Authorization: Bearer gj_…`"));
        components.add_security_scheme("admin_token", bearer("The operators' token, GENJOBS_ADMIN_TOKEN"));

        for (path, item) in &mut openapi.paths.paths {
            let reaches_store = (path.starts_with("/api/") && path != "/api/v1/openapi.json")
                || path.starts_with("/openai/")
                || path == "/readyz"
                || path == "/metrics";
            let schema = error_schema(path);
            let operations = [&mut item.get, &mut item.post, &mut item.put, &mut item.patch, &mut item.delete];
            for operation in operations.into_iter().flatten() {
                let (user, operator) = (requires(operation, "api_key"), requires(operation, "admin_token"));
                let reads_body = (user || operator) && operation.request_body.is_some();
                // Only a JSON body is refused as another type: an upload takes whatever bytes come.
                let reads_json = reads_body
                    && operation.request_body.as_ref().is_some_and(|body| match body {
                        utoipa::openapi::RefOr::T(body) => body.content.contains_key("application/json"),
                        utoipa::openapi::RefOr::Ref(_) => true,
                    });
                let responses = &mut operation.responses.responses;
                let mut add = |status: &str, response: utoipa::openapi::Response| {
                    responses.entry(status.to_owned()).or_insert_with(|| response.into());
                };
                if user || operator {
                    add("401", error_response(schema, "No key, a malformed Authorization header, or a wrong key"));
                }
                if user {
                    let mut limited = error_response(
                        schema,
                        "Rate limit (`RATE_LIMIT_EXCEEDED`), on submissions the concurrent-job limit \
                         (`CONCURRENCY_LIMIT_EXCEEDED`), on uploads and edits the day's upload quota \
                         (`UPLOAD_QUOTA_EXCEEDED`, nothing kept; it renews at midnight UTC)",
                    );
                    limited
                        .headers
                        .insert("Retry-After".into(), string_header("Seconds to wait before retrying").into());
                    add("429", limited);
                }
                if operator {
                    // The admin token is never refused so; a request without it is, from an
                    // address that had too many 401s this minute.
                    let mut throttled = error_response(
                        schema,
                        "Without the admin token, from an address refused too often this minute \
                         (`RATE_LIMIT_EXCEEDED`)",
                    );
                    throttled
                        .headers
                        .insert("Retry-After".into(), string_header("Seconds to wait before retrying").into());
                    add("429", throttled);
                }
                if reads_body {
                    add("413", error_response(schema, "Body over 1 MiB"));
                }
                if reads_json {
                    add("415", error_response(schema, "Body not application/json"));
                }
                if reaches_store {
                    add("500", error_response(schema, "Anything unexpected (`INTERNAL`); no internals in the message"));
                    add("503", error_response(schema, "The database cannot be reached (`SERVICE_UNAVAILABLE`)"));
                }
                for response in operation.responses.responses.values_mut() {
                    if let utoipa::openapi::RefOr::T(response) = response {
                        response.headers.insert(
                            "X-Request-Id".into(),
                            string_header("The request's own X-Request-Id (1 to 128 visible ASCII), or a new one")
                                .into(),
                        );
                    }
                }
            }
        }
    }
}

/// The document, built once.
pub static DOCUMENT: LazyLock<Document> = LazyLock::new(ApiDoc::openapi);

/// The document as JSON, serialized once.
static DOCUMENT_JSON: LazyLock<String> =
    LazyLock::new(|| serde_json::to_string(&*DOCUMENT).unwrap_or_else(|_| "{}".to_owned()));

/// The OpenAPI document
///
/// This document: every route of the service. No key needed.
#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "operations",
    responses((status = 200, description = "OpenAPI 3.1", body = Object)))]
pub async fn openapi_json() -> HttpResponse {
    HttpResponse::Ok().content_type("application/json").body(DOCUMENT_JSON.as_str())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    const METHODS: [&str; 8] = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

    #[test]
    fn the_document_lists_exactly_the_routes_served() {
        let document = serde_json::to_value(&*DOCUMENT).unwrap_or_default();
        let documented: BTreeSet<(String, String)> = document["paths"]
            .as_object()
            .into_iter()
            .flatten()
            .flat_map(|(path, item)| {
                METHODS.iter().filter(|m| item.get(**m).is_some()).map(move |m| ((*m).to_owned(), path.clone()))
            })
            .collect();
        let served: BTreeSet<(String, String)> = crate::ROUTES
            .iter()
            .chain(crate::openai::OPENAI_ROUTES)
            .map(|(method, path)| ((*method).to_owned(), (*path).to_owned()))
            .collect();
        let undocumented: Vec<_> = served.difference(&documented).collect();
        let unserved: Vec<_> = documented.difference(&served).collect();
        assert!(undocumented.is_empty(), "served but not documented: {undocumented:?}");
        assert!(unserved.is_empty(), "documented but not served: {unserved:?}");
    }

    #[test]
    fn every_reference_names_a_schema_of_the_document() {
        fn references<'a>(value: &'a serde_json::Value, found: &mut Vec<&'a str>) {
            match value {
                serde_json::Value::Object(map) => {
                    if let Some(target) = map.get("$ref").and_then(serde_json::Value::as_str) {
                        found.push(target);
                    }
                    map.values().for_each(|v| references(v, found));
                }
                serde_json::Value::Array(items) => items.iter().for_each(|v| references(v, found)),
                _ => {}
            }
        }
        let document = serde_json::to_value(&*DOCUMENT).unwrap_or_default();
        let mut found = Vec::new();
        references(&document, &mut found);
        assert!(found.len() > 100, "too few references to be the whole document: {}", found.len());
        let dangling: BTreeSet<&str> = found
            .into_iter()
            .filter(|target| {
                let name = target.trim_start_matches("#/components/schemas/");
                document["components"]["schemas"].get(name).is_none()
            })
            .collect();
        assert!(dangling.is_empty(), "references to no schema: {dangling:?}");
    }

    #[test]
    fn every_operation_documents_its_errors_and_the_request_id() {
        let document = serde_json::to_value(&*DOCUMENT).unwrap_or_default();
        assert_eq!(document["openapi"], "3.1.0");
        for (path, item) in document["paths"].as_object().into_iter().flatten() {
            for (method, operation) in item.as_object().into_iter().flatten() {
                let responses = operation["responses"].as_object().cloned().unwrap_or_default();
                let secured = operation.get("security").is_some();
                for (status, response) in &responses {
                    assert!(response["headers"].get("X-Request-Id").is_some(), "{method} {path} {status}");
                    if status.starts_with(['4', '5']) {
                        let schema = &response["content"]["application/json"]["schema"]["$ref"];
                        let expected = format!("#/components/schemas/{}", super::error_schema(path));
                        assert_eq!(schema.as_str(), Some(expected.as_str()), "{method} {path} {status}");
                    }
                }
                if secured {
                    assert!(responses.contains_key("401"), "{method} {path}");
                    // An address refused too often is answered 429 on every secured route.
                    let retry = &responses["429"]["headers"]["Retry-After"];
                    assert!(retry.is_object(), "{method} {path}: 429 without Retry-After");
                }
            }
        }
        let submit = &document["paths"]["/api/v1/images/generations"]["post"];
        let header = submit["parameters"].as_array().and_then(|p| p.iter().find(|p| p["name"] == "Idempotency-Key"));
        assert!(header.is_some_and(|h| h["in"] == "header"), "{submit}");
        let stream = &document["paths"]["/api/v1/jobs/{id}/stream"]["get"]["responses"]["200"]["content"];
        let item = stream["text/event-stream"]["schema"]["$ref"].as_str().unwrap_or_default();
        let name = item.trim_start_matches("#/components/schemas/");
        let data = &document["components"]["schemas"][name]["properties"]["data"];
        assert_eq!(data["contentSchema"]["$ref"], "#/components/schemas/StreamEvent", "{stream}");
    }

    #[test]
    fn a_415_is_declared_only_where_the_route_answers_one() {
        let document = serde_json::to_value(&*DOCUMENT).unwrap_or_default();
        let responses = |path: &str| document["paths"][path]["post"]["responses"].clone();
        assert!(responses("/api/v1/images/generations").get("415").is_some(), "a JSON body of another type");
        assert!(responses("/openai/v1/images/edits").get("415").is_some(), "a body that is not a form");
        assert!(responses("/api/v1/uploads").get("415").is_none(), "an upload takes any bytes");
    }
}
