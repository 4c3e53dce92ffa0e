//! What HTTP asks of methods on every route, native and OpenAI's alike: HEAD is answered as GET
//! would be, without the body, and a 405 names in `Allow` the methods its path takes.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use actix_web::body::{BodySize, EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{ALLOW, HeaderValue};
use actix_web::http::{Method, StatusCode};
use actix_web::middleware::Next;
use actix_web::web::Bytes;

/// The body of an answer to HEAD: no bytes, but the size of the GET's body, which the answer's
/// `Content-Length` states. The GET's body is dropped unread, so that a file is not read from
/// the store, nor a stream followed, for headers.
pub(crate) struct SizeOnly(BodySize);

impl MessageBody for SizeOnly {
    type Error = Infallible;

    fn size(&self) -> BodySize {
        self.0
    }

    fn poll_next(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Bytes, Infallible>>> {
        Poll::Ready(None)
    }
}

/// Routes HEAD as GET and answers it without the body; adds `Allow` to a 405.
pub(crate) async fn keep_method_rules(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody, SizeOnly>>, actix_web::Error> {
    let head = req.method() == Method::HEAD;
    if head {
        // The connection still knows the request as HEAD, and sends no body whatever happens.
        req.head_mut().method = Method::GET;
    }
    let mut response = next.call(req).await?;
    if response.status() == StatusCode::METHOD_NOT_ALLOWED {
        let allowed = response.request().match_pattern().and_then(|pattern| allowed_methods(&pattern));
        if let Some(allowed) = allowed.and_then(|methods| HeaderValue::from_str(&methods).ok()) {
            response.headers_mut().insert(ALLOW, allowed);
        }
    }
    Ok(match head {
        true => response.map_body(|_, body| EitherBody::right(SizeOnly(body.size()))),
        false => response.map_into_left_body(),
    })
}

/// The methods the route `pattern` takes, as `Allow` lists them: HEAD wherever GET is.
fn allowed_methods(pattern: &str) -> Option<String> {
    let mut methods: Vec<String> = crate::ROUTES
        .iter()
        .chain(crate::openai::OPENAI_ROUTES)
        .filter(|(_, path)| *path == pattern)
        .map(|(method, _)| method.to_uppercase())
        .collect();
    if methods.iter().any(|method| method == "GET") {
        methods.push("HEAD".to_owned());
    }
    (!methods.is_empty()).then(|| methods.join(", "))
}

#[cfg(test)]
mod tests {
    use actix_web::test::{TestRequest, call_service, init_service, read_body};
    use actix_web::{App, HttpResponse, web};

    use super::*;

    #[test]
    fn allow_lists_each_method_of_the_path_and_head_with_get() {
        assert_eq!(allowed_methods("/api/v1/jobs/{id}").as_deref(), Some("GET, HEAD"));
        assert_eq!(allowed_methods("/api/admin/models/{id}").as_deref(), Some("PUT, DELETE"));
        assert_eq!(allowed_methods("/openai/v1/videos").as_deref(), Some("POST, GET, HEAD"));
        assert_eq!(allowed_methods("/no/such/route"), None);
    }

    #[actix_web::test]
    async fn head_is_answered_as_get_without_the_body_and_a_405_says_allow() {
        let app =
            init_service(App::new().wrap(actix_web::middleware::from_fn(keep_method_rules)).service(
                web::resource("/api/v1/jobs/{id}").default_service(web::to(HttpResponse::MethodNotAllowed)).route(
                    web::get().to(|| async { HttpResponse::Ok().content_type("text/plain").body("twelve bytes") }),
                ),
            ))
            .await;
        let head =
            call_service(&app, TestRequest::default().method(Method::HEAD).uri("/api/v1/jobs/1").to_request()).await;
        assert_eq!(head.status(), StatusCode::OK);
        assert_eq!(head.headers().get("content-type").unwrap(), "text/plain");
        assert_eq!(head.response().body().size(), BodySize::Sized(12), "the GET's length, for Content-Length");
        assert!(read_body(head).await.is_empty());
        let post = call_service(&app, TestRequest::post().uri("/api/v1/jobs/1").to_request()).await;
        assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(post.headers().get(ALLOW).unwrap(), "GET, HEAD");
    }
}
