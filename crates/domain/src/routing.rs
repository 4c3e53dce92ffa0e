//! Routing preferences: which of a model's routes a job may take, in which order, and whether it
//! spills to another provider rather than wait behind a cap.
//!
//! A request names providers (`only`, `ignore`, `order`) and how to choose among them
//! (`allow_fallbacks`, `sort`); the preference is checked at acceptance (every name known, at
//! least one route left) and kept with the job, because the route is chosen when the job is sent,
//! on whichever replica sends it. Spilling reads the capacity the slots count in the store, so
//! that every replica sees the same free slots and waiting jobs.

use crate::capacity::ProviderLoad;
use crate::catalog::{Model, Route};
use crate::invalid::InvalidRequest;

/// How a job chooses among the routes its preference leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteSort {
    /// The first route whose provider has a key with a free slot now; when none has, the one
    /// with the fewest jobs waiting.
    Wait,
}

impl RouteSort {
    /// `wait`, as the API and stores name it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            RouteSort::Wait => "wait",
        }
    }

    /// The sort named `text`, if it is one.
    #[must_use]
    pub fn parse(text: &str) -> Option<RouteSort> {
        (text == "wait").then_some(RouteSort::Wait)
    }
}

/// A job's routing preference over its model's routes. The default leaves the routes as the
/// catalog lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutePreference {
    /// Providers tried first, in this order; the model's other routes follow in theirs.
    pub order: Vec<String>,
    /// When set, the only providers the job may go to.
    pub only: Option<Vec<String>>,
    /// Providers the job never goes to.
    pub ignore: Vec<String>,
    /// `false`: the first route only, a refusal there retried there.
    pub allow_fallbacks: bool,
    /// How to choose among the routes; `None`: as the model says (its `spill`).
    pub sort: Option<RouteSort>,
}

impl Default for RoutePreference {
    fn default() -> Self {
        Self { order: Vec::new(), only: None, ignore: Vec::new(), allow_fallbacks: true, sort: None }
    }
}

/// A preference as a client sent it, typed but not yet checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreferenceDraft {
    /// Providers to try first.
    pub order: Option<Vec<String>>,
    /// The only providers allowed.
    pub only: Option<Vec<String>>,
    /// Providers never used.
    pub ignore: Option<Vec<String>>,
    /// Whether later routes may take the job; `true` when absent.
    pub allow_fallbacks: Option<bool>,
    /// `wait`, or absent.
    pub sort: Option<String>,
}

impl RoutePreference {
    /// Checks a draft's shape: `only` not empty, `sort` a known one. Names are checked against
    /// the providers and the model by [`RoutePreference::check`].
    ///
    /// # Errors
    /// [`InvalidRequest`] naming `provider` for an empty `only`, `provider.sort` for an unknown
    /// sort.
    pub fn from_draft(draft: PreferenceDraft) -> Result<Self, InvalidRequest> {
        if draft.only.as_ref().is_some_and(Vec::is_empty) {
            return Err(InvalidRequest::param("provider", "`provider.only` must name at least one provider"));
        }
        let sort = match draft.sort.as_deref() {
            None => None,
            Some(text) => Some(
                RouteSort::parse(text)
                    .ok_or_else(|| InvalidRequest::param("provider.sort", "`provider.sort` must be `wait`"))?,
            ),
        };
        Ok(Self {
            order: draft.order.unwrap_or_default(),
            only: draft.only,
            ignore: draft.ignore.unwrap_or_default(),
            allow_fallbacks: draft.allow_fallbacks.unwrap_or(true),
            sort,
        })
    }

    /// Whether it leaves the routes as the catalog lists them.
    #[must_use]
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// Every provider it names, with the `param` that names it.
    fn names<'a>(&'a self) -> impl Iterator<Item = (String, &'a str)> {
        let listed = |field: &'static str, names: &'a [String]| {
            names.iter().enumerate().map(move |(i, name)| (format!("provider.{field}[{i}]"), name.as_str()))
        };
        listed("order", &self.order)
            .chain(listed("only", self.only.as_deref().unwrap_or_default()))
            .chain(listed("ignore", &self.ignore))
    }

    /// The routes of `model` a job with this preference may take, in the order it tries them:
    /// `only` and `ignore` filter them, `order` puts the named ones first, and without fallbacks
    /// only the first is left.
    #[must_use]
    pub fn routes(&self, model: &Model) -> Vec<Route> {
        let allowed = |route: &&Route| {
            self.only.as_ref().is_none_or(|only| only.contains(&route.provider))
                && !self.ignore.contains(&route.provider)
        };
        let mut routes: Vec<Route> = model.routes.iter().filter(allowed).cloned().collect();
        // A stable sort keeps the catalog's order among the named ones' routes and the others.
        routes.sort_by_key(|route| self.order.iter().position(|name| *name == route.provider).unwrap_or(usize::MAX));
        if !self.allow_fallbacks {
            routes.truncate(1);
        }
        routes
    }

    /// Checks the preference at acceptance: every name is a provider that `is_known` (configured
    /// here, or named by the catalog), and a route it leaves of `model` goes to a provider this
    /// service `sends_to`.
    ///
    /// # Errors
    /// [`InvalidRequest`] naming `provider.<field>[i]` for a name no provider has, and
    /// `provider` when no route the service can send to is left.
    pub fn check(
        &self,
        model: &Model,
        is_known: impl Fn(&str) -> bool,
        sends_to: impl Fn(&str) -> bool,
    ) -> Result<(), InvalidRequest> {
        if let Some((param, name)) = self.names().find(|(_, name)| !is_known(name)) {
            return Err(InvalidRequest::param(&param, format!("no provider is named {name:?}")));
        }
        if self.routes(model).iter().any(|route| sends_to(&route.provider)) {
            return Ok(());
        }
        Err(InvalidRequest::param("provider", format!("no route of model {} is left by `provider`", model.id)))
    }

    /// Whether a job of `model` with this preference spills over: it asked `sort: "wait"`, or
    /// its model spills and it asked nothing else. Without fallbacks there is nowhere to spill.
    #[must_use]
    pub fn spills(&self, model: &Model) -> bool {
        self.allow_fallbacks && self.sort.map_or(model.spill, |sort| sort == RouteSort::Wait)
    }
}

/// Whether `provider` has a key with a free slot now, as `loads` count them: a provider of one
/// key without a cap, or that `loads` does not list, always has.
fn has_free_slot(provider: &str, loads: &[ProviderLoad]) -> bool {
    loads.iter().find(|load| load.provider == provider).is_none_or(|load| {
        load.keys.is_empty()
            || load.keys.iter().any(|key| key.max_in_flight == 0 || key.in_flight < u64::from(key.max_in_flight))
    })
}

/// How many jobs wait for a slot of `provider`.
fn waiting(provider: &str, loads: &[ProviderLoad]) -> u64 {
    loads
        .iter()
        .find(|load| load.provider == provider)
        .map_or(0, |load| load.waiting.normal.saturating_add(load.waiting.low))
}

/// `routes` with the one a spilling job takes first: the first whose provider has a key with a
/// free slot now, or, when none has, the first of those with the fewest jobs waiting. The others
/// follow in their order, as fallbacks after a refusal.
#[must_use]
pub fn spill_order(mut routes: Vec<Route>, loads: &[ProviderLoad]) -> Vec<Route> {
    let chosen = routes.iter().position(|route| has_free_slot(&route.provider, loads)).or_else(|| {
        routes.iter().enumerate().min_by_key(|(index, route)| (waiting(&route.provider, loads), *index)).map(|(i, _)| i)
    });
    if let Some(index) = chosen {
        let route = routes.remove(index);
        routes.insert(0, route);
    }
    routes
}

#[cfg(test)]
mod tests;
