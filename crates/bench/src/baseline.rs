//! The reads baseline: an actix-web handler answering a job of the API's shape from a constant,
//! so that the ratio measures what genjobs adds to serving a read (auth, rate limit, store).

use std::net::TcpListener;

use actix_web::dev::Server;
use actix_web::{App, HttpResponse, HttpServer, web};

/// A succeeded job as `GET /api/v1/jobs/:id` shows it.
pub const JOB: &str = r#"{"id":"01a20071-bf18-7493-acc7-9f682d0b19fd","state":"succeeded","progress":100,"model":"nano-banana","modality":"image","outputs":[{"url":"https://cdn.example/0.png","type":"image","meta":{"content_type":"image/png","width":1024,"height":1024,"seed":42}}],"error":null,"created_at":"2026-11-21T23:29:44.216Z","started_at":"2026-11-21T23:29:45.001Z","finished_at":"2026-11-21T23:29:52.400Z","credits_held":4,"credits_actual":4}"#;

async fn job() -> HttpResponse {
    HttpResponse::Ok().content_type("application/json").body(JOB)
}

/// The baseline server on `listener` with `workers` workers; the caller runs it.
///
/// # Errors
/// When the listener cannot be used.
pub fn server(listener: TcpListener, workers: usize) -> std::io::Result<Server> {
    Ok(HttpServer::new(|| App::new().route("/api/v1/jobs/{id}", web::get().to(job)))
        .workers(workers)
        .disable_signals()
        .listen(listener)?
        .run())
}
