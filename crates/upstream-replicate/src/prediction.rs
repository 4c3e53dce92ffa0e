//! A prediction as Replicate answers it (create, get, cancel, and a webhook's body): `id`,
//! `status` (`starting`, `processing`, `succeeded`, `failed`, `canceled`, `aborted`: the
//! `Status` type of replicate-javascript's `index.d.ts`), `output` (for image models one URL or a
//! list of URLs), `error` and `logs`; read into the port's terms.

use genjobs_domain::decimal::Decimal;
use genjobs_domain::output::{OutputItem, OutputKind, OutputMeta};
use genjobs_domain::ports::{ReportedUsage, ResultFailure, UpstreamResult, UpstreamStatus};
use serde::Deserialize;
use serde_json::Value;

/// The part of a prediction the adapter reads.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Prediction {
    pub(crate) id: String,
    pub(crate) status: String,
    #[serde(default)]
    pub(crate) output: Value,
    #[serde(default)]
    pub(crate) error: Value,
    #[serde(default)]
    pub(crate) logs: Option<String>,
    /// Replicate deletes a prediction's input and output an hour after it ends (the OpenAPI
    /// document's `predictions.get`), and says so here.
    #[serde(default)]
    pub(crate) data_removed: bool,
    /// What the prediction took; `predict_time` is the seconds of compute Replicate bills.
    #[serde(default)]
    pub(crate) metrics: Option<Metrics>,
}

/// A prediction's `metrics`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Metrics {
    /// Seconds the model ran, as Replicate bills them.
    #[serde(default)]
    pub(crate) predict_time: Option<f64>,
}

/// Why the outputs of a prediction that succeeded long ago cannot be had.
pub(crate) const EXPIRED: &str =
    "the outputs were deleted at the provider before they could be fetched (Replicate keeps them an hour)";

/// Where a prediction is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Phase {
    /// Not done: the port's status.
    Running(UpstreamStatus),
    /// Succeeded: its output can be read.
    Succeeded,
    /// Ended without output.
    Ended(ResultFailure),
}

/// Whether a failed prediction's error says a safety checker refused the content: Replicate's
/// models fail with errors such as "NSFW content detected" and name no code for it.
fn names_a_content_refusal(error: &str) -> bool {
    let error = error.to_ascii_lowercase();
    error.contains("nsfw") || error.contains("safety")
}

impl Prediction {
    pub(crate) fn phase(&self) -> Result<Phase, String> {
        Ok(match self.status.as_str() {
            "starting" => Phase::Running(UpstreamStatus::Queued { position: None }),
            "processing" => {
                Phase::Running(UpstreamStatus::Running { percent: percent_from_logs(self.logs.as_deref()) })
            }
            "succeeded" => Phase::Succeeded,
            // A prediction that ran before it failed or was canceled is billed for that time.
            "failed" => {
                let error = self.error_text("the prediction failed");
                Phase::Ended(
                    match names_a_content_refusal(&error) {
                        true => ResultFailure::ContentRefused(error),
                        false => ResultFailure::Failed(error),
                    }
                    .billed(self.usage()),
                )
            }
            "canceled" => Phase::Ended(
                ResultFailure::Failed("the prediction was canceled at the provider".into()).billed(self.usage()),
            ),
            // The API ends a prediction `aborted` when it was stopped before it ran (a deadline).
            "aborted" => Phase::Ended(ResultFailure::Failed(self.error_text("the prediction was aborted"))),
            other => return Err(format!("unknown prediction status {other:?}")),
        })
    }

    fn error_text(&self, otherwise: &str) -> String {
        let text = match &self.error {
            Value::String(s) if !s.trim().is_empty() => s.trim().to_owned(),
            Value::Null => otherwise.to_owned(),
            Value::String(_) => otherwise.to_owned(),
            other => other.to_string(),
        };
        text.chars().take(300).collect()
    }

    /// A succeeded prediction's result: its outputs ([`Prediction::outputs`]) and what it was
    /// billed ([`Prediction::usage`]).
    pub(crate) fn result(&self, kind: Option<OutputKind>) -> Result<UpstreamResult, String> {
        Ok(UpstreamResult { outputs: self.outputs(kind)?, usage: self.usage() })
    }

    /// The seconds of compute the prediction was billed, when its metrics say.
    fn usage(&self) -> ReportedUsage {
        let compute_seconds = self.metrics.as_ref().and_then(|m| m.predict_time).and_then(Decimal::from_report);
        ReportedUsage { billable_units: None, compute_seconds }
    }

    /// The outputs of a succeeded prediction: one URL or a list of URLs; `kind` names the kind
    /// of a file whose extension does not say.
    pub(crate) fn outputs(&self, kind: Option<OutputKind>) -> Result<Vec<OutputItem>, String> {
        if self.data_removed {
            return Err(EXPIRED.into());
        }
        let urls: Vec<&Value> = match &self.output {
            Value::Array(items) => items.iter().collect(),
            Value::String(_) => vec![&self.output],
            Value::Null => return Err("the prediction succeeded without output".into()),
            _ => return Err("the output is neither a URL nor a list of URLs".into()),
        };
        if urls.is_empty() {
            return Err("the prediction succeeded without output".into());
        }
        urls.into_iter()
            .map(|url| {
                let url = url
                    .as_str()
                    .filter(|u| u.starts_with("https://") || u.starts_with("http://") || u.starts_with("data:"))
                    .ok_or("an output is not a URL")?;
                Ok(output(url, kind))
            })
            .collect()
    }
}

/// A file named by its URL: its content type from the extension of the URL's path.
fn output(url: &str, kind: Option<OutputKind>) -> OutputItem {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    let extension = path.rsplit_once('.').map(|(_, ext)| ext.to_ascii_lowercase()).unwrap_or_default();
    let typed = match extension.as_str() {
        "png" => Some(("image/png", OutputKind::Image)),
        "jpg" | "jpeg" => Some(("image/jpeg", OutputKind::Image)),
        "webp" => Some(("image/webp", OutputKind::Image)),
        "gif" => Some(("image/gif", OutputKind::Image)),
        "mp4" => Some(("video/mp4", OutputKind::Video)),
        "webm" => Some(("video/webm", OutputKind::Video)),
        "mov" => Some(("video/quicktime", OutputKind::Video)),
        _ => None,
    };
    let kind = kind.or(typed.map(|(_, k)| k)).unwrap_or(OutputKind::Image);
    let content_type = typed.map_or(
        match kind {
            OutputKind::Image => "image/png",
            OutputKind::Video => "video/mp4",
        },
        |(t, _)| t,
    );
    OutputItem {
        url: url.to_owned(),
        kind,
        meta: OutputMeta { content_type: content_type.to_owned(), ..OutputMeta::default() },
        copy: None,
    }
}

/// The newest percentage in a prediction's logs (cog's progress bars print ` 45%|████`).
fn percent_from_logs(logs: Option<&str>) -> Option<u8> {
    logs?.lines().rev().find_map(|line| {
        let before = line.rsplit_once('%')?.0;
        let digits: String = before.chars().rev().take_while(char::is_ascii_digit).collect();
        let value: u32 = digits.chars().rev().collect::<String>().parse().ok()?;
        u8::try_from(value.min(100)).ok()
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

    use serde_json::json;

    use super::*;

    fn prediction(body: Value) -> Prediction {
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn every_status_has_its_phase() {
        let phase = |status: &str, extra: Value| {
            let mut body = json!({"id": "p1", "status": status});
            body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            prediction(body).phase()
        };
        assert_eq!(phase("starting", json!({})), Ok(Phase::Running(UpstreamStatus::Queued { position: None })));
        assert_eq!(
            phase("processing", json!({"logs": "Using seed: 1\n 30%|███\n 45%|█████"})),
            Ok(Phase::Running(UpstreamStatus::Running { percent: Some(45) }))
        );
        assert_eq!(phase("succeeded", json!({})), Ok(Phase::Succeeded));
        assert_eq!(
            phase("failed", json!({"error": "NSFW content detected"})),
            Ok(Phase::Ended(ResultFailure::ContentRefused("NSFW content detected".into())))
        );
        assert!(matches!(
            phase("failed", json!({"error": "CUDA out of memory"})),
            Ok(Phase::Ended(ResultFailure::Failed(_)))
        ));
        assert!(matches!(phase("canceled", json!({})), Ok(Phase::Ended(ResultFailure::Failed(_)))));
        assert!(matches!(phase("aborted", json!({"error": null})), Ok(Phase::Ended(ResultFailure::Failed(_)))));
        assert!(phase("queued", json!({})).is_err());
    }

    #[test]
    fn a_failed_or_canceled_prediction_keeps_its_predict_time() {
        let ended = |status: &str| {
            prediction(json!({"id": "p", "status": status, "error": "boom", "metrics": {"predict_time": 2.5}})).phase()
        };
        let usage = ReportedUsage { billable_units: None, compute_seconds: Decimal::from_report(2.5) };
        for status in ["failed", "canceled"] {
            let Ok(Phase::Ended(ResultFailure::Billed { failure, usage: billed })) = ended(status) else {
                panic!("{status}: {:?}", ended(status));
            };
            assert!(matches!(*failure, ResultFailure::Failed(_)), "{status}: {failure:?}");
            assert_eq!(billed, usage);
        }
        assert!(matches!(ended("aborted"), Ok(Phase::Ended(ResultFailure::Failed(_)))), "an aborted one never ran");
    }

    #[test]
    fn outputs_are_one_url_or_a_list_typed_by_extension() {
        let one = prediction(json!({"id": "p", "status": "succeeded", "output": "https://r.delivery/x/out.jpg"}));
        let outputs = one.outputs(Some(OutputKind::Image)).unwrap();
        assert_eq!((outputs.len(), outputs[0].meta.content_type.as_str()), (1, "image/jpeg"));
        let list = prediction(
            json!({"id": "p", "status": "succeeded", "output": ["https://r/a.png?x=1", "https://r/b.webp", "https://r/c"]}),
        );
        let types: Vec<String> = list.outputs(None).unwrap().into_iter().map(|o| o.meta.content_type).collect();
        assert_eq!(types, ["image/png", "image/webp", "image/png"]);
        let video = prediction(json!({"id": "p", "status": "succeeded", "output": "https://r/v.mp4"}));
        assert_eq!(video.outputs(None).unwrap()[0].kind, OutputKind::Video);
        let removed = prediction(json!({"id": "p", "status": "succeeded", "output": null, "data_removed": true}));
        assert_eq!(removed.outputs(None), Err(EXPIRED.to_owned()));
        for output in [json!(null), json!([]), json!({"url": "x"}), json!(["ftp://x"])] {
            let bad = prediction(json!({"id": "p", "status": "succeeded", "output": output}));
            assert!(bad.outputs(None).is_err());
        }
    }
}
