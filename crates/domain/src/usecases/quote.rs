//! What a request would cost: the price a submission would hold now, after the same checks,
//! without holding anything. A submission prices itself through the same function, so a quote
//! and a hold can never disagree.

use super::{Caller, Submissions, SubmitError};
use crate::catalog::{Catalog, Model};
use crate::credits::Credits;
use crate::ids::ModelId;
use crate::invalid::InvalidRequest;
use crate::ports::StoreError;
use crate::request::GenerationRequest;

/// The price of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quote {
    /// The model in effect.
    pub model: ModelId,
    /// Exactly the `credits_held` that submitting the request now would hold.
    pub credits: Credits,
}

impl Submissions {
    /// The model `request` is priced by, once the provider has checked that `extra` sets
    /// nothing it may not.
    ///
    /// # Errors
    /// [`SubmitError::Invalid`] naming `extra.<key>` for a key `extra` may not set;
    /// [`SubmitError::Store`] when the model left the catalog since the request was validated.
    pub(super) fn price<'c>(
        &self,
        catalog: &'c Catalog,
        request: &GenerationRequest,
    ) -> Result<&'c Model, SubmitError> {
        let model = catalog
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
        Ok(model)
    }

    /// What submitting `request` now would hold for `caller` (at the caller's price tier). No
    /// job is made and nothing is held; a quote is never refused for lack of credits.
    ///
    /// # Errors
    /// [`SubmitError::Invalid`] naming `extra.<key>` for a key `extra` may not set;
    /// [`SubmitError::Store`] when the model left the catalog.
    pub fn quote(&self, caller: &Caller, request: &GenerationRequest) -> Result<Quote, SubmitError> {
        let catalog = self.catalog.current();
        let model = self.price(&catalog, request)?;
        let credits = model.rate(&request.input).at(caller.price_percent).to_hold(&request.input);
        Ok(Quote { model: model.id.clone(), credits })
    }
}
