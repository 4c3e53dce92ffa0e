//! The routes a job is sent by: its model's, as the job's routing preference leaves and orders
//! them, the one a spilling job takes first chosen by the capacity the store counts now.

use std::borrow::Cow;

use super::JobSteps;
use crate::catalog::Model;
use crate::job::{Job, JobError, JobErrorCode};
use crate::ports::Capacity;
use crate::routing::spill_order;

/// Where a job is sent: its model run by the routes it may take, in the order it tries them.
pub(super) struct Routed<'m> {
    /// The model, its routes the job's own.
    pub(super) model: Cow<'m, Model>,
    /// Whether the first route was chosen by capacity now, wherever the job waited before.
    pub(super) spilled: bool,
}

impl JobSteps {
    /// The routes `job` is sent by, as its preference leaves them of `model`'s.
    ///
    /// # Errors
    /// [`JobError`] `UPSTREAM_REJECTED` when the catalog changed since acceptance and no route
    /// the preference allows is left.
    pub(super) async fn routed<'m>(&self, job: &Job, model: &'m Model) -> Result<Routed<'m>, JobError> {
        let preference = job.routing();
        let spills = preference.spills(model);
        if preference.is_default() && !spills {
            return Ok(Routed { model: Cow::Borrowed(model), spilled: false });
        }
        let routes = preference.routes(model);
        if routes.is_empty() {
            return Err(JobError::new(
                JobErrorCode::UpstreamRejected,
                "no route of the model is left by the job's provider preference",
            ));
        }
        if !spills || routes.len() < 2 {
            return Ok(Routed { model: Cow::Owned(model.with_routes(routes)), spilled: false });
        }
        // The loads are the store's, shared by every replica: each sees the same free slots.
        match self.ports.upstream.loads().await {
            Ok(loads) => {
                let routes = spill_order(routes, &loads);
                tracing::debug!(job_id = %job.id(), provider = %routes[0].provider, "spill-over chose the route");
                Ok(Routed { model: Cow::Owned(model.with_routes(routes)), spilled: true })
            }
            Err(e) => {
                tracing::warn!(job_id = %job.id(), error = %e, "the providers' loads could not be read; routing in order");
                Ok(Routed { model: Cow::Owned(model.with_routes(routes)), spilled: false })
            }
        }
    }

    /// Reserves a slot for the job on its routes: at the first, when spill-over chose it; else
    /// where the router continues (the route a refusal moved the job to).
    pub(super) async fn reserve(&self, job: &Job, routed: &Routed<'_>) -> Capacity {
        if routed.spilled {
            self.ports.upstream.reserve_first(job.id(), &routed.model).await
        } else {
            self.ports.upstream.reserve(job.id(), &routed.model).await
        }
    }
}
