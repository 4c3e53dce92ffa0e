//! Extractors that let a request in: [`Authenticated`] for `/api/v1` (an API key, then the
//! rate limit) and [`Operator`] for `/api/admin` (the admin token). Both answer 429 first to a
//! client address that has had too many 401s this minute (`crate::unauthenticated`), unless it
//! presents credentials this replica knows to be valid: the admin token, or a key it has let in
//! (`crate::known_keys`).

use std::net::{IpAddr, SocketAddr};

use actix_web::dev::Payload;
use actix_web::http::StatusCode;
use actix_web::http::header::AUTHORIZATION;
use actix_web::{FromRequest, HttpMessage, HttpRequest, web};
use futures_util::future::LocalBoxFuture;
use genjobs_domain::ids::ApiKey;
use genjobs_domain::usecases::{AuthError, Caller};

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

/// The key `req` presents, when its `Authorization` header is well formed.
pub(crate) fn presented_key(req: &HttpRequest) -> Option<String> {
    bearer(req, "api_key").ok()
}

fn state(req: &HttpRequest) -> Result<web::Data<AppState>, ApiError> {
    req.app_data::<web::Data<AppState>>()
        .cloned()
        .ok_or_else(|| genjobs_domain::ports::StoreError::Internal("application state missing".into()).into())
}

/// A caller let in by API key and rate limit.
#[derive(Debug, Clone)]
pub struct Authenticated(pub Caller);

/// The address the request came from: the peer's, or the forwarded client's when
/// `GENJOBS_TRUST_FORWARDED` says a proxy in front sets it.
fn client_address(req: &HttpRequest, state: &AppState) -> Option<IpAddr> {
    if state.settings.trust_forwarded
        && let Some(forwarded) = req.connection_info().realip_remote_addr()
    {
        let host =
            forwarded.parse::<SocketAddr>().map(|a| a.ip()).or_else(|_| forwarded.trim_matches(['[', ']']).parse());
        if let Ok(ip) = host {
            return Some(ip);
        }
    }
    req.peer_addr().map(|peer| peer.ip())
}

/// Runs `check` for `req` unless its address has used up its allowance of 401s (then 429, before
/// any look-up), and counts a 401 it answers against that allowance. Credentials `vouched` for
/// (the admin token, a key this replica has let in) are checked whatever the allowance: an
/// address that floods made-up keys must not lock out the clients behind it that hold good ones.
async fn guarded<T>(
    req: &HttpRequest,
    state: &AppState,
    vouched: bool,
    check: impl AsyncFnOnce() -> Result<T, ApiError>,
) -> Result<T, ApiError> {
    let address = client_address(req, state);
    if !vouched && let Some(retry_after) = address.and_then(|ip| state.unauthenticated.blocked(ip)) {
        return Err(AuthError::RateLimited { retry_after }.into());
    }
    let checked = check().await;
    if let (Err(refused), Some(ip)) = (&checked, address)
        && is_unauthorized(refused)
    {
        state.unauthenticated.record(ip);
    }
    checked
}

fn is_unauthorized(error: &ApiError) -> bool {
    actix_web::ResponseError::status_code(error) == StatusCode::UNAUTHORIZED
}

impl FromRequest for Authenticated {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let state = state(&req)?;
            let presented = bearer(&req, "api_key").map(|token| ApiKey::from_presented(&token));
            // Hashed once, for the known keys and the look-up alike.
            let hash = presented.as_ref().ok().map(ApiKey::hash);
            let vouched = hash.as_ref().is_some_and(|hash| state.known_keys.vouch_for(hash));
            let caller = guarded(&req, &state, vouched, async || {
                let (key, hash) = (presented?, hash.ok_or_else(ApiError::invalid_key)?);
                Ok(state.services.accounts.authenticate_key(&key, &hash).await?)
            })
            .await;
            // A key let in is vouched for from now on; one vouched for and refused (revoked or
            // expired since) is forgotten, and its next refusal costs no look-up. Guesses, never
            // in the set, take no write lock.
            match (&caller, &hash) {
                (Ok(_), Some(hash)) => state.known_keys.remember(hash),
                (Err(refused), Some(hash)) if vouched && is_unauthorized(refused) => state.known_keys.forget(hash),
                _ => {}
            }
            let caller = caller?;
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
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let state = state(&req)?;
            let token = bearer(&req, "admin token");
            // A comparison in constant time, no look-up: done before the allowance is asked.
            let valid = token.as_deref().is_ok_and(|token| state.admin_token.verify(token));
            guarded(&req, &state, valid, async || {
                token?;
                if valid { Ok(Operator) } else { Err(ApiError::invalid_admin_token()) }
            })
            .await
        })
    }
}
