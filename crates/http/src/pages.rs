//! The service's own pages and their files, built into the binary: the front page, the
//! playground, the account page, the operators' console, the interactive documentation at
//! `/docs` (Swagger UI from `assets/swagger-ui`, vendored from npm's `swagger-ui-dist` by
//! `scripts/vendor-swagger-ui.sh`, so that it works offline) and the favicon. Each page is
//! served under its strict policy (`crate::page_policy`).

use std::sync::LazyLock;

use actix_web::http::header::{
    ACCEPT, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, HeaderValue, VARY, X_CONTENT_TYPE_OPTIONS,
};
use actix_web::{HttpRequest, HttpResponse};
use genjobs_api::ServiceIndex;
use utoipa::ToSchema;

use crate::error::Envelope;
use crate::page_policy::strict_policy;

const FRONT_PAGE: &str = include_str!("../assets/index.html");

/// The front page
///
/// Where the pages, the documentation and the APIs are: an HTML page for a browser (whose
/// `Accept` names `text/html`), else the same as JSON. No key needed.
#[utoipa::path(get, path = "/", tag = "operations",
    responses((status = 200, description = "Links to the pages, the documentation and the APIs", content(
        (ServiceIndex = "application/json"),
        (String = "text/html"),
    ))))]
pub async fn front_page(req: HttpRequest) -> HttpResponse {
    let browser = req.headers().get(ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/html"));
    let mut response = if browser {
        static POLICY: LazyLock<String> = LazyLock::new(|| strict_policy(FRONT_PAGE));
        page(FRONT_PAGE, &POLICY)
    } else {
        HttpResponse::Ok().json(ServiceIndex {
            service: "genjobs".to_owned(),
            api: "/api/v1".to_owned(),
            openai: "/openai/v1".to_owned(),
            openapi: "/api/v1/openapi.json".to_owned(),
            docs: "/docs".to_owned(),
            playground: "/playground".to_owned(),
            console: "/console".to_owned(),
        })
    };
    // One URL, two answers: a cache must keep them apart.
    response.headers_mut().insert(VARY, HeaderValue::from_static("Accept"));
    response
}

/// The favicon
///
/// The service's icon, an SVG image.
#[utoipa::path(get, path = "/favicon.ico", tag = "operations",
    responses((status = 200, description = "The icon", content_type = "image/svg+xml", body = String)))]
pub async fn favicon() -> HttpResponse {
    // An SVG opened on its own is a document of this origin: it is sandboxed, as outputs are.
    let mut response = static_file("image/svg+xml", include_bytes!("../assets/favicon.svg"), CACHED_A_DAY);
    response.headers_mut().insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static("sandbox"));
    response
}

const DOCS_PAGE: &str = r##"<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>genjobs API</title>
  <link rel="icon" href="/favicon.ico" type="image/svg+xml">
  <link rel="stylesheet" href="/docs/swagger-ui.css">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/swagger-ui-bundle.js"></script>
  <script>
    window.ui = SwaggerUIBundle({
      url: "/api/v1/openapi.json",
      dom_id: "#swagger-ui",
      deepLinking: true,
      validatorUrl: null
    });
  </script>
</body>
</html>
"##;

/// Interactive documentation
///
/// Swagger UI over this document, served from the binary: nothing is loaded from another host.
#[utoipa::path(get, path = "/docs", tag = "operations",
    responses((status = 200, description = "An HTML page", content_type = "text/html", body = String)))]
pub async fn docs_page() -> HttpResponse {
    // Its "Try it out" holds an API key or the admin token in the page, as the console does.
    static POLICY: LazyLock<String> = LazyLock::new(|| strict_policy(DOCS_PAGE));
    page(DOCS_PAGE, &POLICY)
}

/// The playground
///
/// A page that draws each model's form from `/api/v1/models`, submits with your API key (kept
/// in the browser), follows the job's events and shows its outputs. No key needed to load it.
#[utoipa::path(get, path = "/playground", tag = "operations",
    responses((status = 200, description = "An HTML page", content_type = "text/html", body = String)))]
pub async fn playground() -> HttpResponse {
    static POLICY: LazyLock<String> = LazyLock::new(|| strict_policy(PLAYGROUND));
    page(PLAYGROUND, &POLICY)
}

const PLAYGROUND: &str = include_str!("../assets/playground.html");
const ACCOUNT: &str = include_str!("../assets/account.html");

/// A page of the service's own, under its strict policy.
fn page(html: &'static str, policy: &str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .insert_header((CONTENT_SECURITY_POLICY, policy))
        .insert_header((X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .body(html)
}

/// The account page
///
/// The balance, the ledger page by page, and a chart of the credits spent per day by each model
/// over the last 30 days, for the API key kept in the browser. No key needed to load it.
#[utoipa::path(get, path = "/playground/account", tag = "operations",
    responses((status = 200, description = "An HTML page", content_type = "text/html", body = String)))]
pub async fn playground_account() -> HttpResponse {
    static POLICY: LazyLock<String> = LazyLock::new(|| strict_policy(ACCOUNT));
    page(ACCOUNT, &POLICY)
}

/// The operators' console
///
/// Users and keys, the catalog, usage, jobs and providers on pages signed in with the admin token
/// (kept in the browser); every action is a call of the admin API. No token needed to load it.
#[utoipa::path(get, path = "/console", tag = "operations",
    responses((status = 200, description = "An HTML page", content_type = "text/html", body = String)))]
pub async fn console() -> HttpResponse {
    static POLICY: LazyLock<String> = LazyLock::new(|| strict_policy(CONSOLE));
    page(CONSOLE, &POLICY)
}

const CONSOLE: &str = include_str!("../assets/console.html");

/// A file of the playground: the chart library of the account page and the console (uPlot),
/// their chart of spending, and the console's script.
#[derive(Debug, Clone, Copy, serde::Deserialize, ToSchema)]
pub enum PlaygroundAsset {
    /// The script.
    #[serde(rename = "uplot.js")]
    Script,
    /// The style sheet.
    #[serde(rename = "uplot.css")]
    Style,
    /// The chart of credits spent per day and model, shared by the account page and the console.
    #[serde(rename = "spending-chart.js")]
    SpendingChart,
    /// The console's script.
    #[serde(rename = "console.js")]
    Console,
}

/// A file of the playground
#[utoipa::path(get, path = "/playground/{asset}", tag = "operations",
    params(("asset" = PlaygroundAsset, Path, description = "The file")),
    responses(
        (status = 200, description = "The file", content(
            (String = "application/javascript"),
            (String = "text/css"),
        )),
        (status = 404, description = "No such file", body = Envelope),
    ))]
pub async fn playground_asset(asset: actix_web::web::Path<PlaygroundAsset>) -> HttpResponse {
    let (content_type, bytes, cache): (&str, &'static [u8], _) = match asset.into_inner() {
        PlaygroundAsset::Script => {
            ("application/javascript", include_bytes!("../assets/uplot/uPlot.iife.min.js"), CACHED_A_DAY)
        }
        PlaygroundAsset::Style => ("text/css", include_bytes!("../assets/uplot/uPlot.min.css"), CACHED_A_DAY),
        PlaygroundAsset::SpendingChart => {
            ("application/javascript", include_bytes!("../assets/spending-chart.js"), ASKED_AGAIN)
        }
        PlaygroundAsset::Console => ("application/javascript", include_bytes!("../assets/console.js"), ASKED_AGAIN),
    };
    static_file(content_type, bytes, cache)
}

/// The caching of a vendored library's files and of the icon: a day.
const CACHED_A_DAY: &str = "public, max-age=86400";

/// The caching of the pages' own scripts: asked for again with each page, since they change with
/// the pages that load them, and a day-old copy beside a newer page would break it.
const ASKED_AGAIN: &str = "no-cache";

/// A file built into the binary, cached by browsers as `cache` says.
fn static_file(content_type: &str, bytes: &'static [u8], cache: &'static str) -> HttpResponse {
    HttpResponse::Ok().insert_header((CONTENT_TYPE, content_type)).insert_header((CACHE_CONTROL, cache)).body(bytes)
}

/// A file of the interactive documentation.
#[derive(Debug, Clone, Copy, serde::Deserialize, ToSchema)]
pub enum DocsAsset {
    /// The script.
    #[serde(rename = "swagger-ui-bundle.js")]
    Script,
    /// The style sheet.
    #[serde(rename = "swagger-ui.css")]
    Style,
}

/// A file of the interactive documentation
#[utoipa::path(get, path = "/docs/{asset}", tag = "operations",
    params(("asset" = DocsAsset, Path, description = "The file")),
    responses(
        (status = 200, description = "The file", content(
            (String = "application/javascript"),
            (String = "text/css"),
        )),
        (status = 404, description = "No such file", body = Envelope),
    ))]
pub async fn docs_asset(asset: actix_web::web::Path<DocsAsset>) -> HttpResponse {
    let (content_type, bytes): (&str, &'static [u8]) = match asset.into_inner() {
        DocsAsset::Script => ("application/javascript", include_bytes!("../assets/swagger-ui/swagger-ui-bundle.js")),
        DocsAsset::Style => ("text/css", include_bytes!("../assets/swagger-ui/swagger-ui.css")),
    };
    static_file(content_type, bytes, CACHED_A_DAY)
}
