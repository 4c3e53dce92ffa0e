//! A first draft of a model document from one of fal's endpoint schemas the adapter holds, for
//! `genjobs models import fal <endpoint-id>`: the form and the route follow the parameters the
//! endpoint takes (aspect ratios, resolutions, durations, images, seed); the price is left at
//! zero for the operator to set, and every parameter that usually drives fal's cost is kept from
//! `extra`. The operator edits it and puts it like any other document. A fal route that leaves
//! its `params`, `image_inputs` or `extra_refused` out takes the same mapping ([`mapping`]).

use serde_json::{Map, Value, json};

use crate::schema::{self, Endpoint, OutputShape, ParamType};

/// Parameters whose value changes what fal charges, when an endpoint takes them.
const COST_PARAMETERS: [&str; 8] =
    ["num_images", "duration", "resolution", "image_size", "num_frames", "rendering_speed", "style", "quality"];

/// Our aspect ratios that an `image_size` preset expresses.
const PRESET_RATIOS: [&str; 5] = ["1:1", "16:9", "9:16", "4:3", "3:4"];

fn select(name: &str, label_prefix: &str, options: &[String]) -> Value {
    let options: Vec<Value> =
        options.iter().map(|o| json!({"value": o, "label": format!("{label_prefix}.{o}")})).collect();
    json!({"name": name, "label": format!("field.{name}"), "kind": "select", "default": options[0]["value"], "options": options})
}

fn choices(endpoint: &Endpoint, param: &str) -> Option<Vec<String>> {
    endpoint.input.get(param)?.choices.clone().filter(|c| !c.is_empty())
}

/// What an endpoint's schema says of a route to it: the form fields, the mapping of our body
/// fields to its parameters, where images go, and the cost parameters `extra` may not set. A
/// draft is made of it, and a route that leaves its mapping out takes it.
pub(crate) struct Mapping {
    /// Form fields, in display order.
    pub fields: Vec<Value>,
    /// Our body field (snake_case) to the endpoint's parameter, as a route writes it.
    pub params: Map<String, Value>,
    /// Where reference images go, as a route writes it, if the endpoint takes any.
    pub image_inputs: Option<Value>,
    /// The endpoint's parameters that usually drive fal's cost.
    pub extra_refused: Vec<String>,
}

/// The mapping the schema of `endpoint` suggests.
pub(crate) fn mapping(endpoint: &Endpoint) -> Mapping {
    let video = matches!(endpoint.output, OutputShape::Video { .. });
    let takes = |param: &str| endpoint.input.contains_key(param);
    let mut fields = vec![
        json!({"name": "prompt", "label": "field.prompt", "kind": "textarea", "required": true, "placeholder": "Describe what you want to see"}),
    ];
    let mut params = Map::new();
    params.insert("prompt".into(), json!("prompt"));
    if takes("negative_prompt") {
        fields.push(json!({"name": "negativePrompt", "label": "field.negativePrompt", "kind": "textarea"}));
        params.insert("negative_prompt".into(), json!("negative_prompt"));
    }
    if let Some(ratios) = choices(endpoint, "aspect_ratio") {
        let ratios: Vec<String> = ratios.into_iter().filter(|r| r.contains(':')).collect();
        if !ratios.is_empty() {
            fields.push(select("aspectRatio", "aspectRatio", &ratios));
            params.insert("aspect_ratio".into(), json!("aspect_ratio"));
        }
    } else if endpoint.input.get("image_size").is_some_and(|p| p.kind == ParamType::ImageSize) {
        let ratios: Vec<String> = PRESET_RATIOS.iter().map(|r| (*r).to_owned()).collect();
        fields.push(select("aspectRatio", "aspectRatio", &ratios));
        params.insert("aspect_ratio".into(), json!({"to": "image_size", "as": "image_size"}));
    }
    if let Some(resolutions) = choices(endpoint, "resolution") {
        fields.push(select("resolution", "resolution", &resolutions));
        params.insert("resolution".into(), json!("resolution"));
    }
    if video {
        let seconds: Vec<String> = choices(endpoint, "duration")
            .unwrap_or_default()
            .into_iter()
            .filter(|s| s.parse::<u32>().is_ok())
            .collect();
        if seconds.is_empty() {
            fields.push(select("durationSec", "durationSec", &["5".to_owned()]));
        } else {
            fields.push(select("durationSec", "durationSec", &seconds));
            let as_string = endpoint.input.get("duration").is_some_and(|p| p.kind == ParamType::String);
            let to = if as_string { json!({"to": "duration", "as": "string"}) } else { json!("duration") };
            params.insert("duration_sec".into(), to);
        }
    } else if takes("num_images") {
        fields.push(json!({"name": "n", "label": "field.n", "kind": "number", "default": 1, "min": 1, "max": 4}));
        params.insert("n".into(), json!("num_images"));
    }
    let image_inputs = if takes("image_urls") {
        Some(json!({"to": "image_urls", "list": true}))
    } else if takes("image_url") {
        Some(json!({"to": "image_url", "list": false}))
    } else {
        None
    };
    if image_inputs.is_some() {
        fields.push(json!({"name": "imageInputs", "label": "field.imageInputs", "kind": "image-url", "placeholder": "https://"}));
    }
    if takes("seed") {
        fields.push(json!({"name": "seed", "label": "field.seed", "kind": "number", "min": 0, "max": u32::MAX}));
        params.insert("seed".into(), json!("seed"));
    }
    let extra_refused = COST_PARAMETERS.iter().filter(|p| takes(p)).map(|p| (*p).to_owned()).collect();
    Mapping { fields, params, image_inputs, extra_refused }
}

/// A draft document (JSON, with its `id`) for the fal endpoint `endpoint_id`; `None` when the
/// adapter holds no schema for it. Without an `id`, the endpoint id less its owner names the
/// model (`recraft-v3-text-to-image`).
#[must_use]
pub fn draft_document(id: Option<&str>, endpoint_id: &str) -> Option<Value> {
    schema::endpoint(endpoint_id).map(|endpoint| draft_from_schema(id, endpoint_id, endpoint))
}

/// A draft document (JSON, with its `id`) for the fal endpoint `endpoint_id` whose schema is
/// `endpoint`, however it was obtained (held, or read from fal online).
#[must_use]
pub fn draft_from_schema(id: Option<&str>, endpoint_id: &str, endpoint: &Endpoint) -> Value {
    let named = endpoint_id.split_once('/').map_or(endpoint_id, |(_, rest)| rest).replace('/', "-");
    let id = id.unwrap_or(&named);
    let video = matches!(endpoint.output, OutputShape::Video { .. });
    let Mapping { fields, params, image_inputs, extra_refused } = mapping(endpoint);
    let mut route =
        json!({"provider": "fal", "endpoint": endpoint_id, "params": params, "extra_refused": extra_refused});
    if let Some(images) = image_inputs {
        route["image_inputs"] = images;
    }
    json!({
        "id": id,
        "modality": if video { "video" } else { "image" },
        "display_name": id,
        "description": format!("Drafted from fal's schema of {endpoint_id} ({}): set the price before applying.", endpoint.source),
        "fields": fields,
        "price": {"per": if video { "second" } else { "image" }, "credits": 0},
        "enabled": false,
        "routes": [route],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_draft_follows_the_endpoint_parameters() {
        let hailuo = draft_document(None, "fal-ai/minimax/hailuo-02/standard/text-to-video").unwrap();
        assert_eq!(hailuo["id"], "minimax-hailuo-02-standard-text-to-video");
        assert_eq!(hailuo["modality"], "video");
        assert_eq!(hailuo["routes"][0]["params"]["duration_sec"], json!({"to": "duration", "as": "string"}));
        let recraft = draft_document(Some("r"), "fal-ai/recraft/v3/text-to-image").unwrap();
        assert_eq!(recraft["routes"][0]["params"]["aspect_ratio"]["to"], "image_size");
        assert!(recraft["routes"][0]["extra_refused"].as_array().unwrap().contains(&json!("style")));
    }
}
