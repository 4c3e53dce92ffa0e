//! The service names a request's fields as the API does (`duration_sec`); `genjobs image` and
//! `video` take them as flags (`--duration`). A refusal of a field is told in the flag's terms,
//! so that it names what the user typed.

use genjobs_client::Error;

use super::Stop;

/// The flag of `genjobs image` or `video` that sets the request field the API names `param`.
fn generation_flag(param: &str) -> Option<&'static str> {
    Some(match param {
        "duration_sec" => "--duration",
        "n" => "--n",
        "aspect_ratio" => "--aspect-ratio",
        "resolution" => "--resolution",
        "seed" => "--seed",
        "negative_prompt" => "--negative-prompt",
        "image_inputs" => "--image",
        "model" => "--model",
        "webhook_url" => "--webhook-url",
        _ => return None,
    })
}

/// `stop`, a refusal of a field that a flag sets told as a refusal of that flag.
pub(super) fn in_flag_terms(stop: Stop) -> Stop {
    let Stop::Call(Error::Api(mut refusal)) = stop else { return stop };
    if let Some(flag) = refusal.param.as_deref().and_then(generation_flag) {
        let param = refusal.param.take().unwrap_or_default();
        let named = format!("`{param}`");
        refusal.message = if refusal.message.contains(&named) {
            refusal.message.replace(&named, &format!("`{flag}`"))
        } else {
            format!("`{flag}`: {}", refusal.message)
        };
        refusal.param = Some(flag.to_owned());
    }
    Stop::Call(Error::Api(refusal))
}

#[cfg(test)]
mod tests {
    use genjobs_client::ApiError;

    use super::*;

    fn refusal(param: &str, message: &str) -> Stop {
        Stop::Call(Error::Api(ApiError {
            status: 400,
            kind: "invalid_request".into(),
            code: "INVALID_REQUEST".into(),
            message: message.into(),
            param: Some(param.into()),
            retry_after: None,
        }))
    }

    fn message(stop: Stop) -> String {
        match stop {
            Stop::Call(Error::Api(refusal)) => refusal.message,
            _ => panic!("not a refusal"),
        }
    }

    #[test]
    fn a_refused_duration_names_the_flag_and_its_range() {
        let told = message(in_flag_terms(refusal("duration_sec", "`duration_sec` must be an integer from 4 to 15")));
        assert_eq!(told, "`--duration` must be an integer from 4 to 15");
        let told = message(in_flag_terms(refusal("model", "unknown model \"nope\"")));
        assert_eq!(told, "`--model`: unknown model \"nope\"");
        let told = message(in_flag_terms(refusal("prompt", "`prompt` is required")));
        assert_eq!(told, "`prompt` is required", "the prompt is no flag");
    }
}
