//! One simulated prediction: its fate (read from the prompt's directives and the configured
//! shares), its status as time passes, and its JSON as Replicate answers it.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// What a submission's prompt asks of the simulator: `[sim:fail]` (the prediction fails),
/// `[sim:nsfw]` (it fails as a model's safety checker fails it, "NSFW content detected"),
/// `[sim:429]`, `[sim:502]`, `[sim:503]` (the creation is refused with that status),
/// `[sim:500]` (the prediction is created, then the answer is a 500), `[sim:stall=MS]` (it is
/// created, then the answer waits MS milliseconds), `[sim:run=MS]` (it processes that long).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Directives {
    pub(crate) fail: bool,
    pub(crate) nsfw: bool,
    pub(crate) refuse: Option<u16>,
    pub(crate) server_error: bool,
    pub(crate) stall_ms: Option<u64>,
    pub(crate) run_ms: Option<u64>,
}

impl Directives {
    pub(crate) fn from_prompt(prompt: &str) -> Self {
        let mut d = Directives::default();
        for directive in prompt.split("[sim:").skip(1).filter_map(|rest| rest.split(']').next()) {
            let (name, value) = directive.split_once('=').unwrap_or((directive, ""));
            match name {
                "fail" => d.fail = true,
                "nsfw" => d.nsfw = true,
                "429" | "502" | "503" => d.refuse = name.parse().ok(),
                "500" => d.server_error = true,
                "stall" => d.stall_ms = value.parse().ok(),
                "run" => d.run_ms = value.parse().ok(),
                _ => {}
            }
        }
        d
    }
}

/// A prediction the simulator holds.
#[derive(Debug, Clone)]
pub(crate) struct SimPrediction {
    pub(crate) id: String,
    pub(crate) model: String,
    pub(crate) input: Value,
    pub(crate) created: Instant,
    pub(crate) created_at: OffsetDateTime,
    pub(crate) starting: Duration,
    pub(crate) processing: Duration,
    pub(crate) fail: bool,
    /// Failed by the safety checker rather than an error of the model.
    pub(crate) nsfw: bool,
    pub(crate) canceled: Option<(Instant, OffsetDateTime)>,
    pub(crate) webhook: Option<String>,
    pub(crate) events: Option<Vec<String>>,
}

impl SimPrediction {
    /// Its status, by the time passed since it was created.
    pub(crate) fn status(&self) -> &'static str {
        let elapsed = self.created.elapsed();
        if elapsed >= self.starting + self.processing {
            if self.fail { "failed" } else { "succeeded" }
        } else if self.canceled.is_some() {
            "canceled"
        } else if elapsed >= self.starting {
            "processing"
        } else {
            "starting"
        }
    }

    /// Whether it has ended (so a cancel changes nothing).
    pub(crate) fn ended(&self) -> bool {
        matches!(self.status(), "succeeded" | "failed" | "canceled")
    }

    /// Cancels it, unless it has ended.
    pub(crate) fn cancel(&mut self) {
        if !self.ended() {
            self.canceled = Some((Instant::now(), OffsetDateTime::now_utc()));
            // A canceled prediction never reaches its end: it stays canceled.
            self.processing = Duration::MAX / 4;
        }
    }

    /// Whether its webhook takes the `completed` event (every event when no filter was given).
    pub(crate) fn notifies_completion(&self) -> bool {
        self.webhook.is_some() && self.events.as_ref().is_none_or(|events| events.iter().any(|e| e == "completed"))
    }

    /// The extension of its output file: the `output_format` asked, else the model's default.
    pub(crate) fn extension(&self) -> String {
        self.input.get("output_format").and_then(Value::as_str).map_or_else(
            || {
                genjobs_upstream_replicate::schema::model(&self.model)
                    .and_then(|m| m.input.properties.get("output_format"))
                    .and_then(|p| p.default.as_ref())
                    .and_then(Value::as_str)
                    .unwrap_or("png")
                    .to_owned()
            },
            str::to_owned,
        )
    }

    /// How long the model ran, once the prediction has ended, as Replicate bills it: the whole
    /// processing time of one that succeeded or failed, the time until the cancel of one canceled
    /// while processing; `None` before its end, or for one canceled before it started.
    fn predict_time(&self) -> Option<Duration> {
        match (self.status(), self.canceled) {
            ("succeeded" | "failed", _) => Some(self.processing),
            ("canceled", Some((when, _))) => when.checked_duration_since(self.created + self.starting),
            _ => None,
        }
    }

    /// The prediction as `GET /v1/predictions/{id}` answers it.
    pub(crate) fn json(&self, base: &str) -> Value {
        let status = self.status();
        let at = |offset: Duration| (self.created_at + offset).format(&Rfc3339).ok().map_or(Value::Null, Value::String);
        let started_at = if status == "starting" { Value::Null } else { at(self.starting) };
        let completed_at = match (status, self.canceled) {
            ("canceled", Some((_, when))) => when.format(&Rfc3339).ok().map_or(Value::Null, Value::String),
            ("succeeded" | "failed", _) => at(self.starting + self.processing),
            _ => Value::Null,
        };
        let output = (status == "succeeded").then(|| {
            let file = format!("{base}/files/{}/output.{}", self.id, self.extension());
            let many = genjobs_upstream_replicate::schema::model(&self.model).is_some_and(|m| m.outputs_list());
            if many { json!([file]) } else { json!(file) }
        });
        let logs = match status {
            "starting" => String::new(),
            "processing" => {
                let done = self.created.elapsed().saturating_sub(self.starting).as_millis();
                let percent = done * 100 / self.processing.as_millis().max(1);
                format!("Using seed: 1\nGenerating...\n{percent}%|\n")
            }
            "canceled" => "Using seed: 1\nGenerating...\n".to_owned(),
            _ => "Using seed: 1\nGenerating...\n100%|\n".to_owned(),
        };
        let mut body = json!({
            "id": self.id, "model": self.model, "version": "hidden", "input": self.input,
            "logs": logs, "output": output, "data_removed": false,
            "error": match (status, self.nsfw) {
                ("failed", true) => json!("NSFW content detected. Try running it again, or try a different prompt."),
                ("failed", false) => json!("Prediction failed: the simulated model raised an error"),
                _ => Value::Null,
            },
            "status": status, "source": "api",
            "created_at": at(Duration::ZERO), "started_at": started_at, "completed_at": completed_at,
            "urls": {
                "get": format!("{base}/v1/predictions/{}", self.id),
                "cancel": format!("{base}/v1/predictions/{}/cancel", self.id),
                "web": format!("{base}/p/{}", self.id),
            },
            "metrics": match (status, self.predict_time()) {
                ("succeeded", Some(ran)) => json!({"predict_time": ran.as_secs_f64(), "image_count": 1}),
                (_, Some(ran)) => json!({"predict_time": ran.as_secs_f64()}),
                (_, None) => json!({}),
            },
        });
        if let Some(url) = &self.webhook {
            body["webhook"] = json!(url);
            body["webhook_events_filter"] = json!(self.events);
        }
        body
    }
}

/// A prediction id of Replicate's form: 26 lowercase letters and digits.
pub(crate) fn new_id() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut bits = uuid::Uuid::new_v4().as_u128();
    (0..26)
        .map(|_| {
            let index = (bits % 36) as usize;
            bits /= 36;
            char::from(ALPHABET[index])
        })
        .collect()
}
