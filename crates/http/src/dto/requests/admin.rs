//! The operators' request bodies: a new user, a grant.

use genjobs_domain::request::InvalidRequest;
use genjobs_domain::usecases::{NewUserRequest, validate_grant};
use serde_json::Value;
use utoipa::ToSchema;

use super::Fields;

/// Body of `POST /api/admin/users`.
#[derive(Debug, Clone, PartialEq, Eq, ToSchema)]
#[schema(as = NewUser)]
pub struct NewUserBody {
    /// Display name.
    #[schema(min_length = 1, max_length = 200)]
    pub name: String,
    /// Opening grant.
    pub credits: u64,
    /// Request rate limit; the service's default when absent.
    #[schema(minimum = 1)]
    pub rate_limit_per_minute: Option<u64>,
    /// Concurrent-job limit; the service's default when absent.
    #[schema(minimum = 1)]
    pub max_concurrent_jobs: Option<u64>,
}

impl NewUserBody {
    /// Reads the body.
    ///
    /// # Errors
    /// [`InvalidRequest`] naming the field at fault.
    pub fn from_json(body: &Value) -> Result<Self, InvalidRequest> {
        let fields = Fields::of(body, &["name", "credits", "rate_limit_per_minute", "max_concurrent_jobs"])?;
        let limit = |name: &str| fields.typed::<u64>(name, "a positive integer");
        Ok(Self {
            name: fields
                .string("name")?
                .ok_or_else(|| InvalidRequest::param("name", "`name` must be a string of 1 to 200 characters"))?,
            credits: fields
                .typed("credits", "a non-negative integer")?
                .ok_or_else(|| InvalidRequest::param("credits", "`credits` must be a non-negative integer"))?,
            rate_limit_per_minute: limit("rate_limit_per_minute")?,
            max_concurrent_jobs: limit("max_concurrent_jobs")?,
        })
    }

    /// The domain's validated request.
    ///
    /// # Errors
    /// [`InvalidRequest`] from the domain's rules.
    pub fn try_into_domain(self) -> Result<NewUserRequest, InvalidRequest> {
        NewUserRequest::validate(&self.name, self.credits, self.rate_limit_per_minute, self.max_concurrent_jobs)
    }
}

/// Body of `POST /api/admin/users/{id}/credits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ToSchema)]
#[schema(as = Grant)]
pub struct GrantBody {
    /// Credits to add; negative to take away.
    pub amount: i64,
}

impl GrantBody {
    /// Reads the body.
    ///
    /// # Errors
    /// [`InvalidRequest`] naming `amount` or the unknown field.
    pub fn from_json(body: &Value) -> Result<Self, InvalidRequest> {
        let fields = Fields::of(body, &["amount"])?;
        let amount = fields
            .typed("amount", "a non-zero integer")?
            .ok_or_else(|| InvalidRequest::param("amount", "`amount` must be a non-zero integer"))?;
        Ok(Self { amount })
    }

    /// The domain's validated grant.
    ///
    /// # Errors
    /// [`InvalidRequest`] from the domain's rules.
    pub fn try_into_domain(self) -> Result<i64, InvalidRequest> {
        validate_grant(self.amount)
    }
}
