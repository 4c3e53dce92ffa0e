//! Extractors that let a request in: [`Authenticated`] for `/api/v1` (an API key, then the
//! rate limit) and [`Operator`] for `/api/admin` (the admin token).

use actix_web::dev::Payload;
use actix_web::http::header::AUTHORIZATION;
use actix_web::{FromRequest, HttpMessage, HttpRequest, web};
use futures_util::future::{LocalBoxFuture, Ready, ready};
use genjobs_domain::usecases::Caller;

use crate::AppState;
use crate::error::ApiError;

/// The bearer token of a well-formed `Authorization` header, or the `MISSING_API_KEY` error of
/// the spec's three malformed cases; the messages name the token as `<what>`.
fn bearer(req: &HttpRequest, what: &str) -> Result<String, ApiError> {
    let Some(header) = req.headers().get(AUTHORIZATION) else {
        return Err(ApiError::missing_key(&format!(
            "the Authorization header is missing; send Authorization: Bearer <{what}>"
        )));
    };
    let malformed = || ApiError::missing_key(&format!("Authorization header must be: Bearer <{what}>"));
    let value = header.to_str().map_err(|_| malformed())?.trim();
    let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(malformed());
    }
    let token = rest.trim();
    if token.is_empty() {
        return Err(ApiError::missing_key("Authorization header is empty after Bearer"));
    }
    Ok(token.to_owned())
}

fn state(req: &HttpRequest) -> Result<web::Data<AppState>, ApiError> {
    req.app_data::<web::Data<AppState>>()
        .cloned()
        .ok_or_else(|| genjobs_domain::ports::StoreError::Internal("application state missing".into()).into())
}

/// A caller let in by API key and rate limit.
#[derive(Debug, Clone, Copy)]
pub struct Authenticated(pub Caller);

impl FromRequest for Authenticated {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let checked = bearer(req, "api_key").and_then(|token| Ok((token, state(req)?)));
        let req = req.clone();
        Box::pin(async move {
            let (token, state) = checked?;
            let caller = state.services.accounts.authenticate(&token).await?;
            // For the request's log line.
            req.extensions_mut().insert(caller.user_id);
            Ok(Authenticated(caller))
        })
    }
}

/// An operator holding the admin token.
#[derive(Debug, Clone, Copy)]
pub struct Operator;

impl FromRequest for Operator {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(bearer(req, "admin token").and_then(|token| {
            if state(req)?.admin_token.verify(&token) { Ok(Operator) } else { Err(ApiError::invalid_admin_token()) }
        }))
    }
}
