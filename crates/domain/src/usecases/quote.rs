//! What a request would cost: the price a submission would hold now, after the same checks,
//! without holding anything. A submission prices itself through the same function, so a quote
//! and a hold can never disagree.

use super::{Gateway, SubmitError};
use crate::catalog::Model;
use crate::credits::Credits;
use crate::ids::ModelId;
use crate::ports::StoreError;
use crate::request::{GenerationRequest, InvalidRequest};

/// The price of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quote {
    /// The model in effect.
    pub model: ModelId,
    /// Exactly the `credits_held` that submitting the request now would hold.
    pub credits: Credits,
}

impl Gateway {
    /// The price of `request`: the catalog model and what a submission would hold, once the
    /// provider has checked that `extra` sets nothing it may not.
    ///
    /// # Errors
    /// [`SubmitError::Invalid`] naming `extra.<key>` for a key `extra` may not set;
    /// [`SubmitError::Store`] when the model left the catalog since the request was validated.
    pub(super) fn price(&self, request: &GenerationRequest) -> Result<(&Model, Credits), SubmitError> {
        let model = self
            .catalog
            .model(request.model.as_str())
            .ok_or_else(|| StoreError::Internal(format!("model {} left the catalog", request.model)))?;
        if let Some(extra) = &request.input.extra
            && let Some(key) = self.ports.upstream.refused_extra_key(model, extra)
        {
            return Err(InvalidRequest::param(
                &format!("extra.{key}"),
                format!(
                    "`extra` may not set `{key}`: the service sets it from the request, or the price depends on it"
                ),
            )
            .into());
        }
        Ok((model, model.price_to_hold(&request.input)))
    }

    /// What submitting `request` now would hold. No job is made and nothing is held; a quote
    /// is never refused for lack of credits.
    ///
    /// # Errors
    /// [`SubmitError::Invalid`] naming `extra.<key>` for a key `extra` may not set;
    /// [`SubmitError::Store`] when the model left the catalog.
    pub fn quote(&self, request: &GenerationRequest) -> Result<Quote, SubmitError> {
        let (model, credits) = self.price(request)?;
        Ok(Quote { model: model.id.clone(), credits })
    }
}
