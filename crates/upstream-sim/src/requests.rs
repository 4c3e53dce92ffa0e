//! One simulated request: its fault directives, its phase as time passes, and its result in the
//! endpoint's own output shape.

use std::time::{Duration, Instant};

use genjobs_upstream_fal::schema::OutputShape;
use serde_json::{Value, json};

/// What a delivery's directives ask.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DeliveryFaults {
    pub(crate) drop: bool,
    pub(crate) duplicate: bool,
    pub(crate) corrupt: bool,
    pub(crate) delay_ms: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Directives {
    pub(crate) reject: bool,
    pub(crate) reject_submit: bool,
    /// fal's content policy refuses the request when it runs (`content-policy`), or at once
    /// (`content-policy-submit`).
    pub(crate) content_policy: bool,
    pub(crate) content_policy_submit: bool,
    pub(crate) fail: bool,
    pub(crate) hang: bool,
    pub(crate) malformed: bool,
    pub(crate) expired: bool,
    pub(crate) error_status: bool,
    pub(crate) flaky: u32,
    pub(crate) run_ms: Option<u64>,
    pub(crate) queue_ms: Option<u64>,
    pub(crate) webhook: DeliveryFaults,
    pub(crate) file_missing: bool,
    /// How the first `result_faults` result calls fail before the result is given.
    pub(crate) result_fault: Option<ResultFault>,
    pub(crate) result_faults: u32,
    pub(crate) cancel_completed: bool,
    pub(crate) webhook_error: bool,
    /// Deliver at most this many images (fewer than asked).
    pub(crate) deliver: Option<u64>,
    /// Deliver a video of this many seconds, and say so in its `duration`.
    pub(crate) video_secs: Option<u64>,
    /// Bill this many units (`x-fal-billable-units`) whatever was delivered.
    pub(crate) billable: Option<String>,
}

/// A result call that fails the way a busy or restarting queue fails it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResultFault {
    /// This status, without fal's error category (429 with `Retry-After: 1`).
    Status(u16),
    /// The connection drops after the headers.
    Dropped,
}

impl Directives {
    pub(crate) fn from_prompt(prompt: &str) -> Self {
        let mut d = Directives::default();
        for directive in prompt.split("[sim:").skip(1).filter_map(|rest| rest.split(']').next()) {
            let (name, value) = directive.split_once('=').unwrap_or((directive, ""));
            match name {
                "reject" => d.reject = true,
                "reject-submit" => d.reject_submit = true,
                "content-policy" => d.content_policy = true,
                "content-policy-submit" => d.content_policy_submit = true,
                "fail" => d.fail = true,
                "hang" => d.hang = true,
                "malformed" => d.malformed = true,
                "expired" => d.expired = true,
                "error-status" => d.error_status = true,
                "flaky" => d.flaky = value.parse().unwrap_or(3),
                "run" => d.run_ms = value.parse().ok(),
                "queue" => d.queue_ms = value.parse().ok(),
                "file-missing" => d.file_missing = true,
                "result-429" | "result-502" | "result-503" | "result-504" => {
                    d.result_fault = name[7..].parse().ok().map(ResultFault::Status);
                    d.result_faults = value.parse().unwrap_or(1);
                }
                "result-drop" => {
                    d.result_fault = Some(ResultFault::Dropped);
                    d.result_faults = value.parse().unwrap_or(1);
                }
                "cancel-completed" => d.cancel_completed = true,
                "webhook-error" => d.webhook_error = true,
                "deliver" => d.deliver = value.parse().ok(),
                "video-secs" => d.video_secs = value.parse().ok(),
                "billable" => d.billable = Some(value.to_owned()),
                "webhook-drop" => d.webhook.drop = true,
                "webhook-duplicate" => d.webhook.duplicate = true,
                "webhook-corrupt" => d.webhook.corrupt = true,
                "webhook-delay" => d.webhook.delay_ms = value.parse().unwrap_or(1000),
                _ => {}
            }
        }
        d
    }
}

#[derive(Debug)]
pub(crate) struct SimRequest {
    pub(crate) shape: OutputShape,
    pub(crate) input: Value,
    pub(crate) accepted: Instant,
    /// When it took one of its key's slots (`None` while it waits for one): its queue time and
    /// run time count from then.
    pub(crate) admitted: Option<Instant>,
    pub(crate) queue: Duration,
    pub(crate) run: Duration,
    pub(crate) directives: Directives,
    pub(crate) status_calls: u32,
    pub(crate) result_calls: u32,
    pub(crate) canceled: bool,
    /// Set when the request completed ahead of its time (a cancel that came after completion).
    pub(crate) completed: bool,
    /// When a cancel ended it (canceled, or completed ahead of its time): its slot frees then.
    pub(crate) ended_at: Option<Instant>,
    /// fal's validation errors of the input (`detail` items): fal queues any JSON and fails the
    /// request with them when it runs.
    pub(crate) invalid: Option<Value>,
    /// The `Authorization` it was submitted with: only that key may read or cancel it.
    pub(crate) key: Option<String>,
}

/// Where `id` waits in the queue: how many requests still queued were accepted before it, as
/// fal's `queue_position` counts those ahead.
pub(crate) fn queue_position(requests: &std::collections::HashMap<String, SimRequest>, id: &str) -> usize {
    let Some(request) = requests.get(id) else { return 0 };
    requests
        .iter()
        .filter(|(other, r)| {
            *other != id && matches!(r.phase(), Phase::Queued) && (r.accepted, other.as_str()) < (request.accepted, id)
        })
        .count()
}

pub(crate) enum Phase {
    Queued,
    Running(u8),
    Completed,
}

impl SimRequest {
    pub(crate) fn phase(&self) -> Phase {
        if self.canceled || self.completed {
            return Phase::Completed;
        }
        let Some(admitted) = self.admitted else { return Phase::Queued };
        let elapsed = admitted.elapsed();
        if elapsed < self.queue {
            return Phase::Queued;
        }
        let ran = elapsed - self.queue;
        if self.directives.hang || ran < self.run {
            let percent = (ran.as_secs_f64() / self.run.as_secs_f64().max(0.001) * 100.0).min(99.0);
            return Phase::Running(percent as u8);
        }
        Phase::Completed
    }
}

impl SimRequest {
    /// Whether it still waits for a slot of its key.
    pub(crate) fn waits_for_slot(&self) -> bool {
        self.admitted.is_none() && !self.canceled && !self.completed
    }

    /// When it gives its slot back: at its end, or when a cancel ended it; `None` while it
    /// waits for a slot, or for a request that never completes.
    pub(crate) fn end(&self) -> Option<Instant> {
        if let Some(ended) = self.ended_at {
            return Some(ended);
        }
        let admitted = self.admitted?;
        (!self.directives.hang).then(|| admitted + self.queue + self.run)
    }

    /// How long until it completes: zero once completed, `None` while that is not known yet (it
    /// waits for a slot, or never completes).
    pub(crate) fn remaining(&self) -> Option<Duration> {
        if matches!(self.phase(), Phase::Completed) {
            return Some(Duration::ZERO);
        }
        self.end().map(|end| end.saturating_duration_since(Instant::now()))
    }
}

/// How many images a request delivers: those asked for, or fewer as its directive says.
fn images_delivered(request: &SimRequest) -> u64 {
    let asked = crate::files::image_count(&request.input);
    request.directives.deliver.map_or(asked, |deliver| deliver.min(asked))
}

/// What fal bills for a request, as its `x-fal-billable-units` header says: the images
/// delivered, or the video's seconds (its directive's, else those asked for); a directive's
/// figure over either.
pub(crate) fn billable_units(request: &SimRequest) -> Option<String> {
    if let Some(billable) = &request.directives.billable {
        return Some(billable.clone());
    }
    match request.shape {
        OutputShape::Video { .. } => {
            let asked = request.input.get("duration").and_then(|d| match d {
                Value::String(text) => text.trim_end_matches('s').parse::<u64>().ok(),
                other => other.as_u64(),
            });
            request.directives.video_secs.or(asked).map(|seconds| seconds.to_string())
        }
        OutputShape::Images { .. } => Some(images_delivered(request).to_string()),
    }
}

pub(crate) fn output(request: &SimRequest, files: &str) -> Value {
    let seed = request.input.get("seed").and_then(Value::as_u64).unwrap_or(42);
    let mut result = serde_json::Map::new();
    let with_seed = match request.shape {
        OutputShape::Video { seed } => {
            let mut video = json!({
                "url": format!("{files}/0.mp4"),
                "content_type": "video/mp4",
                "file_name": "0.mp4",
                "file_size": crate::files::SAMPLE_MP4.len(),
            });
            if let Some(seconds) = request.directives.video_secs {
                video["duration"] = json!(seconds);
            }
            result.insert("video".into(), video);
            seed
        }
        OutputShape::Images { dimensions, seed } => {
            let (width, height) = crate::files::image_size(&request.input);
            let image = |i: u64| {
                let url = format!("{files}/{}", crate::files::image_name_of(i, (width, height)));
                let mut image = json!({"url": url, "content_type": "image/png"});
                if dimensions {
                    image["width"] = json!(width);
                    image["height"] = json!(height);
                } else {
                    // fal's File has an optional `file_size`; the image is drawn only when fetched,
                    // so its size is not known here and is left out rather than invented.
                    image["file_name"] = json!(format!("{i}.png"));
                }
                image
            };
            result.insert("images".into(), (0..images_delivered(request)).map(image).collect());
            seed
        }
    };
    if with_seed {
        result.insert("seed".into(), json!(seed));
    }
    Value::Object(result)
}
