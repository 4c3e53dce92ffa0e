//! # The OpenAI-compatible edge
//!
//! `/openai/v1`: OpenAI's image and video API over the same use cases as `/api/v1`, so that a
//! tool that speaks OpenAI's API (its official clients, agent frameworks, chat front ends) uses
//! genjobs' models with genjobs' keys, credits, rate and concurrency limits. It is a second edge,
//! not a second implementation: OpenAI's requests are read into the native request bodies and
//! validated by the domain exactly as native ones are.
//!
//! - `wire`: OpenAI's requests onto the native ones, and jobs as OpenAI's `Video` object; the
//!   wire types themselves (openai 3.57.0, OpenAI's published API document) are
//!   `genjobs_api::openai`'s.
//! - `sizes`: `size` (`WxH`) onto a model's aspect ratios and resolutions.
//! - `error`: native errors in OpenAI's envelope, at the native statuses.
//! - `handlers`: one per endpoint, but for `images.edit`'s and the Batch API's;
//! - `edits`: `images.edit`, whose images arrive as a streamed, bounded form (`crate::uploads`).
//! - `files` and `batches`: the Batch API's files and batches; `batch_wire`: its input lines
//!   onto the native items, its batches and the lines of its output and error files.

mod batch_wire;
pub(crate) mod batches;
pub(crate) mod edits;
mod error;
pub(crate) mod files;
pub(crate) mod handlers;
mod sizes;
mod wire;

use actix_web::web;

pub(crate) use error::Envelope as OpenAiEnvelope;
pub use error::OpenAiError;

/// Every route of the edge, as (method, path).
pub const OPENAI_ROUTES: &[(&str, &str)] = &[
    ("post", "/openai/v1/images/generations"),
    ("post", "/openai/v1/images/edits"),
    ("post", "/openai/v1/videos"),
    ("get", "/openai/v1/videos"),
    ("get", "/openai/v1/videos/{id}"),
    ("delete", "/openai/v1/videos/{id}"),
    ("get", "/openai/v1/videos/{id}/content"),
    ("get", "/openai/v1/models"),
    ("post", "/openai/v1/files"),
    ("get", "/openai/v1/files/{id}"),
    ("get", "/openai/v1/files/{id}/content"),
    ("post", "/openai/v1/batches"),
    ("get", "/openai/v1/batches"),
    ("get", "/openai/v1/batches/{id}"),
    ("post", "/openai/v1/batches/{id}/cancel"),
];

/// Registers the edge's routes, with 405 in OpenAI's shape for their other methods.
pub(crate) fn configure(cfg: &mut web::ServiceConfig) {
    // Each named by its path, as the native routes are, for the metrics' route label.
    let resource = |path: &str| web::resource(path).name(path).default_service(web::to(handlers::method_not_allowed));
    cfg.service(resource("/openai/v1/images/generations").route(web::post().to(handlers::create_image)))
        .service(resource("/openai/v1/images/edits").route(web::post().to(edits::edit_image)))
        .service(
            resource("/openai/v1/videos")
                .route(web::post().to(handlers::create_video))
                .route(web::get().to(handlers::list_videos)),
        )
        .service(
            web::resource("/openai/v1/videos/{id}")
                .name("/openai/v1/videos/{id}")
                .default_service(web::to(handlers::video_method_not_allowed))
                .route(web::get().to(handlers::get_video))
                .route(web::delete().to(handlers::delete_video)),
        )
        .service(resource("/openai/v1/videos/{id}/content").route(web::get().to(handlers::video_content)))
        .service(resource("/openai/v1/models").route(web::get().to(handlers::list_models)))
        .service(resource("/openai/v1/files").route(web::post().to(files::create_file)))
        .service(resource("/openai/v1/files/{id}").route(web::get().to(files::get_file)))
        .service(resource("/openai/v1/files/{id}/content").route(web::get().to(files::file_content)))
        .service(
            resource("/openai/v1/batches")
                .route(web::post().to(batches::create_batch))
                .route(web::get().to(batches::list_batches)),
        )
        .service(resource("/openai/v1/batches/{id}").route(web::get().to(batches::get_batch)))
        .service(resource("/openai/v1/batches/{id}/cancel").route(web::post().to(batches::cancel_batch)));
}
