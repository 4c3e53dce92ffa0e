//! What a request would cost: the price a submission would hold now, after the same checks,
//! without holding anything. A submission prices itself through the same function, so a quote
//! and a hold can never disagree.

use std::borrow::Cow;

use super::{Caller, Submissions, SubmitError};
use crate::catalog::{Catalog, Model};
use crate::credits::Credits;
use crate::ids::ModelId;
use crate::invalid::InvalidRequest;
use crate::ports::StoreError;
use crate::request::GenerationRequest;
use crate::routing::RoutePreference;

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
        let routed = self.routed(catalog, model, &request.routing)?;
        if let Some(extra) = &request.input.extra
            && let Some(key) = self.ports.upstream.refused_extra_key(&routed, extra)
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

    /// `model` run by the routes `routing` leaves it, whose providers alone check `extra`.
    ///
    /// # Errors
    /// [`InvalidRequest`] as [`RoutePreference::check`]: a name that is no provider's, or no
    /// route left that this service sends to.
    fn routed<'m>(
        &self,
        catalog: &Catalog,
        model: &'m Model,
        routing: &RoutePreference,
    ) -> Result<Cow<'m, Model>, InvalidRequest> {
        if routing.is_default() {
            return Ok(Cow::Borrowed(model));
        }
        let upstream = self.ports.upstream.as_ref();
        let is_known = |name: &str| {
            upstream.serves(name) || catalog.managed().any(|other| other.routes.iter().any(|r| r.provider == name))
        };
        routing.check(model, is_known, |name| upstream.serves(name))?;
        Ok(Cow::Owned(model.with_routes(routing.routes(model))))
    }

    /// What submitting `request` now would hold for `caller` (at the caller's price tier). No
    /// job is made and nothing is held; a quote is never refused for lack of credits.
    ///
    /// # Errors
    /// [`SubmitError::Invalid`] naming `extra.<key>` for a key `extra` may not set;
    /// [`SubmitError::Store`] when the model left the catalog.
    pub fn quote(&self, caller: &Caller, request: &GenerationRequest) -> Result<Quote, SubmitError> {
        self.quote_as(caller, request, false)
    }

    /// [`Submissions::quote`], as an item of a batch when `in_batch`: at the batch price.
    ///
    /// # Errors
    /// As [`Submissions::quote`].
    pub fn quote_as(&self, caller: &Caller, request: &GenerationRequest, in_batch: bool) -> Result<Quote, SubmitError> {
        let catalog = self.catalog.current();
        let model = self.price(&catalog, request)?;
        let rate = model.rate(&request.input).at(caller.price_percent);
        let rate = if in_batch { rate.in_batch(self.batch.price_percent) } else { rate };
        let credits = rate.to_hold(&request.input);
        Ok(Quote { model: model.id.clone(), credits })
    }
}
