//! The admin API's handlers (`/api/admin`), behind the operators' token.

use actix_web::{HttpRequest, HttpResponse, web};
use genjobs_api::providers::ProviderCapacity;
use genjobs_api::{AdminModel, CreatedUser, DataView, Grant, NewUser, User, UserPage, UserPatch};
use genjobs_domain::ids::UserId;
use genjobs_domain::invalid::InvalidRequest;
use genjobs_domain::ports::PutOutcome;
use genjobs_domain::ports::UserQuery;

use super::Handled;
use crate::AppState;
use crate::auth::Operator;
use crate::body::read_json;
use crate::dto::catalog::{admin_model_view, model_document};
use crate::dto::requests::{grant_amount, new_user_request, read, user_change};
use crate::dto::responses::{created_user_view, provider_capacity_view, user_view};
use crate::error::ApiError;

pub(super) fn user_id(path: &str) -> Result<UserId, ApiError> {
    UserId::parse(path).map_err(|_| genjobs_domain::usecases::AdminError::UnknownUser.into())
}

/// Create a user
///
/// Answers with the user's first API key, shown only here.
#[utoipa::path(post, path = "/api/admin/users", tag = "admin",
    security(("admin_token" = [])),
    request_body(content = NewUser, content_type = "application/json"),
    responses(
        (status = 201, description = "Created", body = CreatedUser),
        (status = 400, description = "Invalid body or field", body = crate::error::Envelope),
    ))]
pub async fn admin_create_user(
    state: web::Data<AppState>,
    _: Operator,
    req: HttpRequest,
    payload: web::Payload,
) -> Handled {
    let request = new_user_request(read(&read_json(&req, payload).await?)?)?;
    let (account, key) = state.services.admin.create_user(request).await?;
    Ok(HttpResponse::Created().json(created_user_view(&account, key.expose())))
}

/// Revoke a key
///
/// The key stops working at once.
#[utoipa::path(delete, path = "/api/admin/keys/{prefix}", tag = "admin",
    security(("admin_token" = [])),
    params(("prefix" = String, Path, description = "The key's public prefix")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 404, description = "No such key", body = crate::error::Envelope),
    ))]
pub async fn admin_revoke_key(state: web::Data<AppState>, _: Operator, path: web::Path<String>) -> Handled {
    state.services.admin.revoke_key(&path).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Grant credits
///
/// A negative amount takes available credits back.
#[utoipa::path(post, path = "/api/admin/users/{id}/credits", tag = "admin",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "The user id")),
    request_body(content = Grant, content_type = "application/json"),
    responses(
        (status = 200, description = "The account after the grant", body = User),
        (status = 400, description = "Invalid amount, or more than the user has available", body = crate::error::Envelope),
        (status = 404, description = "No such user", body = crate::error::Envelope),
    ))]
pub async fn admin_grant(
    state: web::Data<AppState>,
    _: Operator,
    path: web::Path<String>,
    req: HttpRequest,
    payload: web::Payload,
) -> Handled {
    let user_id = user_id(&path)?;
    let amount = grant_amount(read(&read_json(&req, payload).await?)?)?;
    let account = state.services.admin.grant(user_id, amount).await?;
    Ok(HttpResponse::Ok().json(user_view(&account)))
}

/// A user's account
#[utoipa::path(get, path = "/api/admin/users/{id}", tag = "admin",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "The user id")),
    responses(
        (status = 200, description = "The account", body = User),
        (status = 404, description = "No such user", body = crate::error::Envelope),
    ))]
pub async fn admin_user(state: web::Data<AppState>, _: Operator, path: web::Path<String>) -> Handled {
    let account = state.services.admin.user(user_id(&path)?).await?;
    Ok(HttpResponse::Ok().json(user_view(&account)))
}

/// Change a user's limits and price tier
///
/// Each field optional; effective on every replica within a second.
#[utoipa::path(patch, path = "/api/admin/users/{id}", tag = "admin",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "The user id")),
    request_body(content = UserPatch, content_type = "application/json"),
    responses(
        (status = 200, description = "The account after the change", body = User),
        (status = 400, description = "A field is not valid", body = crate::error::Envelope),
        (status = 404, description = "No such user", body = crate::error::Envelope),
    ))]
pub async fn admin_change_user(
    state: web::Data<AppState>,
    _: Operator,
    path: web::Path<String>,
    req: HttpRequest,
    payload: web::Payload,
) -> Handled {
    let user_id = user_id(&path)?;
    let change = user_change(read(&read_json(&req, payload).await?)?)?;
    let account = state.services.admin.change_user(user_id, change).await?;
    Ok(HttpResponse::Ok().json(user_view(&account)))
}

/// Most users a page lists.
const MAX_USERS_PAGE: u64 = 100;

/// List users
///
/// Newest first; `q` matches the beginning of a name or of one of the user's key prefixes.
#[utoipa::path(get, path = "/api/admin/users", tag = "admin",
    security(("admin_token" = [])),
    params(
        ("q" = Option<String>, Query, description = "The beginning of a name or of a key prefix"),
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 100, description = "Users per page (default 20)"),
        ("before" = Option<String>, Query, description = "A user id: list only users created before it"),
    ),
    responses(
        (status = 200, description = "A page of users", body = UserPage),
        (status = 400, description = "`limit` or `before` is not valid", body = crate::error::Envelope),
    ))]
pub async fn admin_users(state: web::Data<AppState>, _: Operator, query: super::Query) -> Handled {
    let limit = super::integer_param(&query, "limit", 1, MAX_USERS_PAGE)?.unwrap_or(20);
    let before = query
        .get("before")
        .map(|b| UserId::parse(b).map_err(|_| InvalidRequest::param("before", "`before` must be a user id")))
        .transpose()?;
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let listing = UserQuery { q: query.get("q").cloned(), before, limit: limit + 1 };
    let mut users = state.services.admin.users(&listing).await?;
    let next = (users.len() > limit).then(|| {
        users.truncate(limit);
        users.last().map(|last| last.user_id.to_string())
    });
    Ok(HttpResponse::Ok().json(UserPage { data: users.iter().map(user_view).collect(), next: next.flatten() }))
}

/// List the catalog's models
///
/// Every model, disabled ones included, with its price and routes.
#[utoipa::path(get, path = "/api/admin/models", tag = "admin",
    security(("admin_token" = [])),
    responses((status = 200, description = "The models", body = DataView<AdminModel>)))]
pub async fn admin_models(state: web::Data<AppState>, _: Operator) -> Handled {
    let catalog = state.services.admin.catalog();
    let submissions = &state.services.submissions;
    let data = catalog.managed().map(|m| admin_model_view(m, submissions.provider_of(m))).collect();
    Ok(HttpResponse::Ok().json(DataView { data }))
}

/// The providers' capacity
///
/// Each configured provider with its keys (their last 4 characters, jobs in flight and caps) and
/// the jobs waiting, unsent, for a slot, by priority; `/metrics` shows the same figures.
#[utoipa::path(get, path = "/api/admin/providers", tag = "admin",
    security(("admin_token" = [])),
    responses((status = 200, description = "The providers", body = DataView<ProviderCapacity>)))]
pub async fn admin_providers(state: web::Data<AppState>, _: Operator) -> Handled {
    let loads = state.services.submissions.provider_loads().await?;
    Ok(HttpResponse::Ok().json(DataView { data: loads.into_iter().map(provider_capacity_view).collect() }))
}

/// Put a model
///
/// Creates the model or replaces it; the change reaches every replica within 2 s. The body is
/// checked first: `param` names the JSON path of a fault (`price.credits`, `routes[0].endpoint`),
/// and each route is checked against the schemas of its provider's endpoints that the service
/// holds, with no call to the provider.
#[utoipa::path(put, path = "/api/admin/models/{id}", tag = "admin",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "The model id")),
    request_body(content = AdminModel, content_type = "application/json",
        description = "An AdminModel; `id` and `upstream` are ignored"),
    responses(
        (status = 200, description = "Replaced", body = AdminModel),
        (status = 201, description = "Created", body = AdminModel),
        (status = 400, description = "Invalid document; `param` is the JSON path of the fault", body = crate::error::Envelope),
    ))]
pub async fn admin_put_model(
    state: web::Data<AppState>,
    _: Operator,
    path: web::Path<String>,
    req: HttpRequest,
    payload: web::Payload,
) -> Handled {
    let document = model_document(read_json(&req, payload).await?)?;
    let model = state.services.admin.check_model(&path, document.clone())?;
    let outcome = state.services.admin.put_model(&path, document).await?;
    let view = admin_model_view(&model, state.services.submissions.provider_of(&model));
    Ok(match outcome {
        PutOutcome::Created => HttpResponse::Created().json(view),
        PutOutcome::Replaced => HttpResponse::Ok().json(view),
    })
}

/// Delete a model
///
/// It leaves `/api/v1/models` and new submissions to it are refused; its jobs stay readable and
/// those running finish.
#[utoipa::path(delete, path = "/api/admin/models/{id}", tag = "admin",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "The model id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such model", body = crate::error::Envelope),
    ))]
pub async fn admin_delete_model(state: web::Data<AppState>, _: Operator, path: web::Path<String>) -> Handled {
    state.services.admin.delete_model(&path).await?;
    Ok(HttpResponse::NoContent().finish())
}
