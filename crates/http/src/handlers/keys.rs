//! Keys with settings: the operators' (`/api/admin/users/{id}/keys`, `/api/admin/keys/{prefix}`)
//! and the users' own (`/api/v1/account/keys`).

use actix_web::{HttpRequest, HttpResponse, web};
use genjobs_api::{DataView, IssuedKey, KeyPatch, KeyView, NewKey};

use super::Handled;
use super::admin::user_id;
use crate::AppState;
use crate::auth::{Authenticated, Operator};
use crate::body::{read_json, read_optional_json};
use crate::dto::keys::{issued_key_view, key_change, key_settings, key_view};
use crate::dto::requests::read;
use crate::error::ApiError;

/// The settings of a new key from an optional body; none issues a key without restrictions.
async fn new_key_settings(
    req: &HttpRequest,
    payload: web::Payload,
) -> Result<genjobs_domain::keys::KeySettings, ApiError> {
    let body = match read_optional_json(req, payload).await? {
        Some(body) => read::<NewKey>(&body)?,
        None => NewKey::default(),
    };
    Ok(key_settings(body)?)
}

/// Issue another key to a user
///
/// Every field of the body is optional; without a body the key has no restrictions of its own.
#[utoipa::path(post, path = "/api/admin/users/{id}/keys", tag = "admin",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "The user id")),
    request_body(content = Option<NewKey>, content_type = "application/json"),
    responses(
        (status = 201, description = "The new key, shown only here, and its settings", body = IssuedKey),
        (status = 400, description = "A field is not valid", body = crate::error::Envelope),
        (status = 404, description = "No such user", body = crate::error::Envelope),
    ))]
pub async fn admin_issue_key(
    state: web::Data<AppState>,
    _: Operator,
    path: web::Path<String>,
    req: HttpRequest,
    payload: web::Payload,
) -> Handled {
    let user = user_id(&path)?;
    let settings = new_key_settings(&req, payload).await?;
    let (key, listing) = state.services.admin.issue_key(user, settings).await?;
    Ok(HttpResponse::Created().json(issued_key_view(&key, &listing)))
}

/// A user's keys
///
/// Revoked keys stay listed, with `revoked_at`.
#[utoipa::path(get, path = "/api/admin/users/{id}/keys", tag = "admin",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "The user id")),
    responses(
        (status = 200, description = "The user's keys, oldest first", body = DataView<KeyView>),
        (status = 404, description = "No such user", body = crate::error::Envelope),
    ))]
pub async fn admin_keys(state: web::Data<AppState>, _: Operator, path: web::Path<String>) -> Handled {
    let keys = state.services.admin.keys_of(user_id(&path)?).await?;
    Ok(HttpResponse::Ok().json(DataView { data: keys.iter().map(key_view).collect() }))
}

/// Change a key's settings
///
/// A field left out stays as it is; `null` removes it. Effective on every replica within a second.
#[utoipa::path(patch, path = "/api/admin/keys/{prefix}", tag = "admin",
    security(("admin_token" = [])),
    params(("prefix" = String, Path, description = "The key's public prefix")),
    request_body(content = KeyPatch, content_type = "application/json"),
    responses(
        (status = 200, description = "The key as changed", body = KeyView),
        (status = 400, description = "A field is not valid", body = crate::error::Envelope),
        (status = 404, description = "No such key", body = crate::error::Envelope),
    ))]
pub async fn admin_change_key(
    state: web::Data<AppState>,
    _: Operator,
    path: web::Path<String>,
    req: HttpRequest,
    payload: web::Payload,
) -> Handled {
    let change = key_change(read::<KeyPatch>(&read_json(&req, payload).await?)?)?;
    let listing = state.services.admin.change_key(&path, &change).await?;
    Ok(HttpResponse::Ok().json(key_view(&listing)))
}

/// Issue yourself a key
///
/// No wider than the key calling: where it has `models` or a `budget`, the new key's models must
/// be among them and its budget no larger for the same period.
#[utoipa::path(post, path = "/api/v1/account/keys", tag = "account",
    security(("api_key" = [])),
    request_body(content = Option<NewKey>, content_type = "application/json"),
    responses(
        (status = 201, description = "The new key, shown only here, and its settings", body = IssuedKey),
        (status = 400, description = "A field is not valid", body = crate::error::Envelope),
        (status = 403, description = "Wider than the calling key (`KEY_SCOPE_EXCEEDED`)", body = crate::error::Envelope),
    ))]
pub async fn account_issue_key(
    state: web::Data<AppState>,
    caller: Authenticated,
    req: HttpRequest,
    payload: web::Payload,
) -> Handled {
    let settings = new_key_settings(&req, payload).await?;
    let catalog = state.services.submissions.catalog();
    let (key, listing) = state.services.accounts.issue_own_key(&caller.0, &catalog, settings).await?;
    Ok(HttpResponse::Created().json(issued_key_view(&key, &listing)))
}

/// Your keys
///
/// Revoked keys stay listed, with `revoked_at`.
#[utoipa::path(get, path = "/api/v1/account/keys", tag = "account",
    security(("api_key" = [])),
    responses((status = 200, description = "The caller's keys, oldest first", body = DataView<KeyView>)))]
pub async fn account_keys(state: web::Data<AppState>, caller: Authenticated) -> Handled {
    let keys = state.services.accounts.own_keys(&caller.0).await?;
    Ok(HttpResponse::Ok().json(DataView { data: keys.iter().map(key_view).collect() }))
}

/// Revoke one of your keys
///
/// Another user's key is answered as a missing one.
#[utoipa::path(delete, path = "/api/v1/account/keys/{prefix}", tag = "account",
    security(("api_key" = [])),
    params(("prefix" = String, Path, description = "The key's public prefix")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 404, description = "No such key among yours", body = crate::error::Envelope),
    ))]
pub async fn account_revoke_key(state: web::Data<AppState>, caller: Authenticated, path: web::Path<String>) -> Handled {
    state.services.accounts.revoke_own_key(&caller.0, &path).await?;
    Ok(HttpResponse::NoContent().finish())
}
