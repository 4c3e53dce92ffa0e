//! The `provider` object of a generation body: which of the model's routes a job may take and
//! how it chooses among them.

use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;

/// `provider` of a generation body: `{order?, only?, ignore?, allow_fallbacks?, sort?}` over the
/// model's routes, each naming providers (`fal`, `replicate`). `only` and `ignore` filter the
/// routes, `order` puts the named ones first; without fallbacks only the first route is tried
/// (a refusal there is retried there). `sort: "wait"` sends the job to the first route whose
/// provider has a key with a free slot now (when none has, the one with the fewest jobs waiting),
/// so that it spills to another provider rather than wait behind a cap. In a form (an image edit,
/// a video from a form) the same object is sent as JSON text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderPreference {
    /// Providers tried first, in this order; the model's other routes follow in theirs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<Vec<String>>,
    /// The only providers the job may go to; not empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_items = 1)]
    pub only: Option<Vec<String>>,
    /// Providers the job never goes to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore: Option<Vec<String>>,
    /// `true` (the default): a route that provably refused the job hands it to the next;
    /// `false`: the first route only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_fallbacks: Option<bool>,
    /// `wait`: the first route whose provider has a free slot now. Absent: the routes in order
    /// (or as the model's `spill` says).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(pattern = "^wait$", example = "wait")]
    pub sort: Option<String>,
}

/// Reads `provider` as an object, or, from a form whose values are all text, as the JSON text
/// of one; `null` is absent.
pub(crate) fn object_or_text<'de, D: Deserializer<'de>>(reader: D) -> Result<Option<ProviderPreference>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Sent {
        Object(ProviderPreference),
        Text(String),
    }
    match Option::<Sent>::deserialize(reader)? {
        None => Ok(None),
        Some(Sent::Object(preference)) => Ok(Some(preference)),
        Some(Sent::Text(text)) => serde_json::from_str(&text).map(Some).map_err(serde::de::Error::custom),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::openai::ImagesRequest;

    #[test]
    fn a_form_sends_the_preference_as_json_text_and_null_is_absent() {
        let expected = ProviderPreference { only: Some(vec!["fal".into()]), ..ProviderPreference::default() };
        let from_form: ImagesRequest = serde_json::from_value(json!({"provider": "{\"only\": [\"fal\"]}"})).unwrap();
        assert_eq!(from_form.provider, Some(expected.clone()));
        let from_json: ImagesRequest = serde_json::from_value(json!({"provider": {"only": ["fal"]}})).unwrap();
        assert_eq!(from_json.provider, Some(expected));
        let absent: ImagesRequest = serde_json::from_value(json!({"provider": null})).unwrap();
        assert_eq!(absent.provider, None);
        for refused in
            [json!({"provider": {"sorted": "wait"}}), json!({"provider": "not json"}), json!({"provider": 5})]
        {
            assert!(serde_json::from_value::<ImagesRequest>(refused.clone()).is_err(), "{refused}");
        }
    }
}
