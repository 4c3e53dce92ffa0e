use genjobs_domain::modality::Modality;
use genjobs_domain::output::{OutputItem, OutputKind, OutputMeta};
use serde_json::Value;

/// Reads fal's output shapes: `images: [..]`, `image: {..}`, `video: {..}`, `videos: [..]`, each
/// file `{url, content_type?, width?, height?, duration?}`, with a top-level `seed`.
///
/// # Errors
/// A message for a result that has no outputs of a known shape or a file without a URL.
pub fn parse_outputs(body: &Value, modality: Modality) -> Result<Vec<OutputItem>, String> {
    match read_outputs(body)? {
        outputs if outputs.is_empty() => Err(format!("no {} outputs in the result", modality.as_str())),
        outputs => Ok(outputs),
    }
}

/// [`parse_outputs`] for a result whose job's modality is not at hand (a webhook's payload): no
/// outputs of a known shape is an empty list, not an error.
pub(crate) fn read_outputs(body: &Value) -> Result<Vec<OutputItem>, String> {
    let seed = body.get("seed").and_then(Value::as_u64);
    let mut files: Vec<(&Value, OutputKind)> = Vec::new();
    for (key, kind, many) in [
        ("images", OutputKind::Image, true),
        ("image", OutputKind::Image, false),
        ("videos", OutputKind::Video, true),
        ("video", OutputKind::Video, false),
    ] {
        match (body.get(key), many) {
            (None | Some(Value::Null), _) => {}
            (Some(Value::Array(items)), true) => files.extend(items.iter().map(|i| (i, kind))),
            (Some(item @ Value::Object(_)), false) => files.push((item, kind)),
            (Some(_), _) => return Err(format!("`{key}` has an unexpected shape")),
        }
    }
    files.into_iter().map(|(file, kind)| output(file, kind, seed)).collect()
}

fn output(file: &Value, kind: OutputKind, seed: Option<u64>) -> Result<OutputItem, String> {
    let url = file
        .get("url")
        .and_then(Value::as_str)
        .filter(|u| u.starts_with("https://") || u.starts_with("http://") || u.starts_with("data:"))
        .ok_or("an output has no URL")?;
    let dimension = |key| file.get(key).and_then(Value::as_u64).and_then(|v| u32::try_from(v).ok());
    let default_type = match kind {
        OutputKind::Image => "image/png",
        OutputKind::Video => "video/mp4",
    };
    Ok(OutputItem {
        url: url.to_owned(),
        kind,
        meta: OutputMeta {
            content_type: file.get("content_type").and_then(Value::as_str).unwrap_or(default_type).to_owned(),
            width: dimension("width"),
            height: dimension("height"),
            duration_sec: file.get("duration").and_then(Value::as_f64),
            seed,
        },
        copy: None,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn images_keep_their_metadata_and_the_seed() {
        let body = json!({"images": [{"url": "https://cdn/a.png", "width": 512, "height": 256, "content_type": "image/jpeg"}], "seed": 9});
        let outputs = parse_outputs(&body, Modality::Image).unwrap();
        assert_eq!(outputs.len(), 1);
        assert_eq!(outputs[0].kind, OutputKind::Image);
        assert_eq!(outputs[0].meta.content_type, "image/jpeg");
        assert_eq!(
            (outputs[0].meta.width, outputs[0].meta.height, outputs[0].meta.seed),
            (Some(512), Some(256), Some(9))
        );
    }

    #[test]
    fn a_video_gets_a_default_content_type() {
        let outputs = parse_outputs(&json!({"video": {"url": "https://cdn/v.mp4"}}), Modality::Video).unwrap();
        assert_eq!((outputs[0].kind, outputs[0].meta.content_type.as_str()), (OutputKind::Video, "video/mp4"));
    }

    #[test]
    fn unreadable_results_are_refused() {
        for body in
            [json!({}), json!({"images": "x"}), json!({"images": [{"width": 1}]}), json!({"video": {"url": "ftp://x"}})]
        {
            assert!(parse_outputs(&body, Modality::Image).is_err(), "{body}");
        }
    }
}
