//! A job's routing preference as the `routing` column keeps it: null for the default.

use genjobs_domain::ports::StoreError;
use genjobs_domain::routing::{RoutePreference, RouteSort};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{corrupt, from_jsonb, to_jsonb};

/// The `routing` column's object.
#[derive(Debug, Serialize, Deserialize)]
struct RoutingJson {
    #[serde(default)]
    order: Vec<String>,
    #[serde(default)]
    only: Option<Vec<String>>,
    #[serde(default)]
    ignore: Vec<String>,
    allow_fallbacks: bool,
    #[serde(default)]
    sort: Option<String>,
}

/// The column of `routing`: null when it is the default.
pub(super) fn routing_column(routing: &RoutePreference) -> Result<Option<Value>, StoreError> {
    if routing.is_default() {
        return Ok(None);
    }
    to_jsonb(&RoutingJson {
        order: routing.order.clone(),
        only: routing.only.clone(),
        ignore: routing.ignore.clone(),
        allow_fallbacks: routing.allow_fallbacks,
        sort: routing.sort.map(|sort| sort.as_str().to_owned()),
    })
    .map(Some)
}

/// The preference the column keeps.
pub(super) fn routing_of(column: Option<Value>) -> Result<RoutePreference, StoreError> {
    let Some(value) = column else {
        return Ok(RoutePreference::default());
    };
    let kept: RoutingJson = from_jsonb("routing", value)?;
    let sort = kept.sort.map(|text| RouteSort::parse(&text).ok_or_else(|| corrupt("routing", text))).transpose()?;
    Ok(RoutePreference {
        order: kept.order,
        only: kept.only,
        ignore: kept.ignore,
        allow_fallbacks: kept.allow_fallbacks,
        sort,
    })
}
