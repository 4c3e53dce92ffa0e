//! Every store the adapter opens from a URL keeps and serves outputs alike: `memory://`,
//! `file://` (a temporary directory) and `s3://` against a real S3-protocol server (moto's,
//! started here; `cargo xtask test` installs it).

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use actix_web::{App, HttpResponse, HttpServer, web};
use futures_util::TryStreamExt;
use genjobs_domain::ids::JobId;
use genjobs_domain::ports::OutputSource;
use genjobs_domain::ports::{ByteRange, CopyFailure, OutputStore};
use genjobs_output_store::{HttpOutputSource, ObjectOutputStore, OutputHosts};
use genjobs_test_wait::eventually;
use sha2::{Digest, Sha256};

/// 12 MiB and a bit: three parts of a multipart upload, the last one short.
const BIG: usize = 12 * 1024 * 1024 + 12_345;

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

/// The hosts the tests read from: the provider on this machine's 127.0.0.1, as the built-in
/// simulator is.
fn local() -> OutputHosts {
    OutputHosts::new([], ["http://127.0.0.1"])
}

/// Serves `/big` (a video), `/gone` (404) and `/busy` (503), as a provider's file host would, and
/// `/hop` (a redirect to `/big`) and `/away` (a redirect to 127.0.0.2, off the list).
fn source() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let base = format!("http://127.0.0.1:{port}");
    let server = HttpServer::new(move || {
        let redirect = |to: String| HttpResponse::Found().insert_header(("location", to)).finish();
        App::new()
            .route("/big", web::get().to(|| async { HttpResponse::Ok().content_type("video/mp4").body(pattern(BIG)) }))
            .route("/gone", web::get().to(|| async { HttpResponse::NotFound().finish() }))
            .route("/busy", web::get().to(|| async { HttpResponse::ServiceUnavailable().finish() }))
            .route("/hop", web::get().to(move || async move { redirect(format!("http://127.0.0.1:{port}/big")) }))
            .route("/away", web::get().to(move || async move { redirect(format!("http://127.0.0.2:{port}/big")) }))
    })
    .workers(1)
    .disable_signals()
    .listen(listener)
    .unwrap()
    .run();
    tokio::spawn(server);
    base
}

async fn read(store: &ObjectOutputStore, job: JobId, index: usize, range: Option<ByteRange>) -> Option<Vec<u8>> {
    let stream = store.open(job, index, range).await.unwrap()?;
    Some(streamed(stream).await.unwrap())
}

/// A stream's bytes, or its first error.
async fn streamed(body: genjobs_domain::ports::FileBytes) -> Result<Vec<u8>, genjobs_domain::ports::StoreError> {
    let chunks: Vec<_> = body.try_collect().await?;
    Ok(chunks.concat())
}

/// What every store must do.
async fn keeps_and_serves_outputs(store: &ObjectOutputStore) {
    let base = source();
    let job = JobId::new_at(time::OffsetDateTime::now_utc());
    let file = store.copy(job, 1, &format!("{base}/big"), "application/octet-stream").await.unwrap();
    let bytes = pattern(BIG);
    assert_eq!(file.size, BIG as u64);
    assert_eq!(file.content_type, "video/mp4", "the source's type wins over the fallback");
    assert_eq!(file.sha256, hex::encode(Sha256::digest(&bytes)));
    assert_eq!(read(store, job, 1, None).await.unwrap(), bytes);
    let range = ByteRange { first: 5 * 1024 * 1024 - 3, last: 5 * 1024 * 1024 + 3 };
    assert_eq!(read(store, job, 1, Some(range)).await.unwrap(), bytes[range.first as usize..=range.last as usize]);
    assert_eq!(read(store, job, 0, None).await, None, "another output");
    store.copy(job, 1, &format!("{base}/big"), "video/mp4").await.unwrap();
    assert_eq!(read(store, job, 1, None).await.unwrap(), bytes, "a second copy replaces the first");

    assert!(matches!(store.copy(job, 2, &format!("{base}/gone"), "image/png").await, Err(CopyFailure::Permanent(_))));
    assert!(matches!(store.copy(job, 2, &format!("{base}/busy"), "image/png").await, Err(CopyFailure::Transient(_))));
    assert!(matches!(
        store.copy(job, 2, "data:image/png;base64,AAAA", "image/png").await,
        Err(CopyFailure::Permanent(_))
    ));
    assert_eq!(read(store, job, 2, None).await, None, "nothing is left of a failed copy");
}

/// Outputs are read only from hosts on the list, and a redirect off it is not followed: a
/// provider's result cannot make the service fetch an address of its own network.
#[tokio::test]
async fn outputs_are_read_only_from_allowed_hosts() {
    let base = source();
    let source = HttpOutputSource::new(local()).unwrap();
    let opened = source.open(&format!("{base}/big"), None, 1 << 30).await.unwrap();
    assert_eq!((opened.size, opened.content_type.as_deref()), (Some(BIG as u64), Some("video/mp4")));
    assert_eq!(streamed(opened.body).await.unwrap().len(), BIG);
    let hop = source.open(&format!("{base}/hop"), None, 1 << 30).await.unwrap();
    assert_eq!(streamed(hop.body).await.unwrap().len(), BIG, "a redirect within the list is followed");
    let port = base.rsplit(':').next().unwrap();
    for refused in [
        format!("{base}/away"),
        format!("http://127.0.0.2:{port}/big"),
        format!("http://localhost:{port}/big"),
        "http://169.254.169.254/latest/meta-data".to_owned(),
    ] {
        let failure = source.open(&refused, None, 1 << 30).await.unwrap_err();
        assert!(matches!(failure, CopyFailure::Permanent(_)), "{refused}: {failure:?}");
    }
    assert!(
        matches!(source.open(&format!("{base}/big"), None, 1024).await, Err(CopyFailure::Permanent(_))),
        "over the limit"
    );
    let store = ObjectOutputStore::open("memory://", [("", "")], 1 << 30, local()).unwrap();
    let job = JobId::new_at(time::OffsetDateTime::now_utc());
    let copy = store.copy(job, 0, &format!("http://127.0.0.2:{port}/big"), "video/mp4").await;
    assert!(matches!(copy, Err(CopyFailure::Permanent(_))), "the copier keeps to the list too: {copy:?}");
}

#[tokio::test]
async fn the_memory_store_keeps_and_serves_outputs() {
    keeps_and_serves_outputs(&ObjectOutputStore::open("memory://", [("", "")], 1 << 30, local()).unwrap()).await;
}

#[tokio::test]
async fn the_file_store_keeps_outputs_on_disk() {
    let dir = std::env::temp_dir().join(format!("genjobs-outputs-{}", uuid::Uuid::new_v4()));
    let url = format!("file://{}", dir.join("kept").display());
    let store = ObjectOutputStore::open(&url, [("", "")], 1 << 30, local()).unwrap();
    keeps_and_serves_outputs(&store).await;
    let job = JobId::new_at(time::OffsetDateTime::now_utc());
    store.copy(job, 0, &format!("{}/big", source()), "video/mp4").await.unwrap();
    let on_disk = std::fs::read(dir.join("kept").join(job.to_string()).join("0")).unwrap();
    assert_eq!(on_disk, pattern(BIG));
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn a_file_over_the_limit_is_refused_and_not_kept() {
    let store = ObjectOutputStore::open("memory://", [("", "")], 1024 * 1024, local()).unwrap();
    let job = JobId::new_at(time::OffsetDateTime::now_utc());
    let copied = store.copy(job, 0, &format!("{}/big", source()), "video/mp4").await;
    assert!(matches!(copied, Err(CopyFailure::Permanent(ref reason)) if reason.contains("limit")), "{copied:?}");
    assert_eq!(read(&store, job, 0, None).await, None);
}

#[test]
fn a_url_that_names_no_store_is_refused() {
    for url in ["not a url", "ftp://somewhere/x", "postgres://db/outputs"] {
        assert!(ObjectOutputStore::open(url, [("", "")], 1, local()).is_err(), "{url}");
    }
}

/// moto's S3 server on a free port, stopped on drop.
struct Moto {
    child: Child,
    endpoint: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn moto_server() -> PathBuf {
    if let Some(path) = std::env::var_os("GENJOBS_MOTO_SERVER") {
        return path.into();
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .unwrap();
    cache.join("genjobs/venv/bin/moto_server")
}

/// moto's server, from the project's Python tools (`cargo xtask test` installs them).
async fn start_moto() -> Moto {
    let program = moto_server();
    assert!(
        program.exists(),
        "{} is missing: `cargo xtask test` installs moto's S3 server with the Python tools, or set GENJOBS_MOTO_SERVER",
        program.display()
    );
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new(&program)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let moto = Moto { child, endpoint: format!("http://127.0.0.1:{port}") };
    let client = reqwest::Client::new();
    let bucket_created = async || {
        client.put(format!("{}/outputs", moto.endpoint)).send().await.is_ok_and(|answer| answer.status().is_success())
    };
    assert!(
        eventually(Duration::from_secs(30), bucket_created).await,
        "moto's server did not start at {}",
        moto.endpoint
    );
    moto
}

#[tokio::test]
async fn the_s3_store_keeps_and_serves_outputs_through_a_real_s3_server() {
    let moto = start_moto().await;
    let options = [
        ("AWS_ENDPOINT", moto.endpoint.as_str()),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
        ("PATH", "/ignored/not/an/option"),
    ];
    let store = ObjectOutputStore::open("s3://outputs/genjobs", options, 1 << 30, local()).unwrap();
    keeps_and_serves_outputs(&store).await;
}
