//! The API's command-line client, built on `genjobs-client`: `genjobs image`, `video`, `jobs`, `batch`,
//! `models`, `account`, and `keys` without `DATABASE_URL` (`keys`). A submission is followed with a progress bar fed by the job's event
//! stream, its outputs are downloaded into `--out` and their paths printed; Ctrl-C offers to
//! cancel the job. `--json` prints one JSON document on stdout instead. An `--image` that names a
//! local file is uploaded first, and the job takes the link the service answers.
//!
//! Exit status: 0 done, 1 the job failed or was canceled, 2 a usage error (clap's, or an `--image`
//! file that cannot be read), 3 the service answered with an error in its envelope (a refusal
//! such as 400, 401, 402, 403, 404, 429, or 503 while it cannot serve; the message says why), 4
//! the service could not be reached or answered something that is not the API's.

use std::path::Path;
use std::process::ExitCode;

use genjobs_client::{Client, Error, ImageRequest, Job, JobState, Quote, Receipt, VideoRequest};
use serde_json::json;

mod args;
mod batch;
mod counted;
mod flags;
mod follow;
mod keys;

pub use crate::connection::Connection;
pub use args::*;
pub(crate) use counted::counted;
use flags::in_flag_terms;
use follow::follow;

/// Why a client command stopped short.
enum Stop {
    /// The job ended without outputs: exit 1.
    JobEnded(Box<Job>),
    /// The call failed.
    Call(Error),
    /// Ctrl-C, the job left running: exit 130.
    Interrupted(String),
    /// An argument that cannot be used (an `--image` file that cannot be read): exit 2.
    Usage(String),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Call(e)
    }
}

/// What to tell the user about a refusal, beyond the service's message: by its code where one
/// status covers refusals of different things.
fn advice(status: u16, code: &str) -> &'static str {
    match (status, code) {
        (_, "KEY_SCOPE_EXCEEDED") => "a key may do no more than the key that made it; use a wider key",
        (_, "KEY_NOT_FOUND") => "check the key prefix (genjobs keys list)",
        (_, "MODEL_NOT_ALLOWED") => "this key may not use that model (genjobs models lists those it may)",
        (_, "KEY_BUDGET_EXCEEDED") => "the key's budget is spent for this period; ask for less or wait for it to reset",
        (_, "UPLOAD_QUOTA_EXCEEDED") => "the day's uploads are spent; try again after midnight UTC",
        (400, _) => "the message names the setting to change",
        (401, _) => "check GENJOBS_API_KEY (or --api-key)",
        (402, _) => "ask an operator for credits, or ask for less (fewer images, a shorter video, a cheaper model)",
        (403, _) => "the job belongs to another user",
        (404, _) => "check the job id",
        (429, _) => "slow down, or wait for a running job to end",
        (503, _) => "the service cannot serve right now; try again shortly",
        _ => "",
    }
}

fn report(stop: Stop, json: bool) -> ExitCode {
    match stop {
        Stop::JobEnded(job) => {
            if json {
                println!("{}", json!({ "job": *job, "files": [] }));
            }
            let reason = job.error.as_ref().map_or_else(String::new, |e| format!(": {} {}", e.code, e.message));
            eprintln!(
                "genjobs: job {} {}{reason}",
                job.id,
                if job.state == JobState::Canceled { "canceled" } else { "failed" }
            );
            ExitCode::from(1)
        }
        Stop::Usage(problem) => {
            eprintln!("genjobs: {problem}");
            ExitCode::from(2)
        }
        Stop::Interrupted(id) => {
            eprintln!("genjobs: interrupted; job {id} goes on (genjobs jobs watch {id})");
            ExitCode::from(130)
        }
        Stop::Call(Error::Api(refusal)) => {
            let wait = refusal.retry_after.map_or_else(String::new, |d| format!(" (retry after {} s)", d.as_secs()));
            let advice = advice(refusal.status, &refusal.code);
            let advice = if advice.is_empty() { String::new() } else { format!("; {advice}") };
            eprintln!("genjobs: refused: {} {}{wait}{advice}", refusal.code, refusal.message);
            ExitCode::from(3)
        }
        Stop::Call(e) => {
            eprintln!("genjobs: {e}");
            ExitCode::from(4)
        }
    }
}

/// A command of the API's client.
#[derive(Debug)]
pub enum ClientCommand {
    /// `genjobs image`.
    Image(ImageArgs),
    /// `genjobs video`.
    Video(VideoArgs),
    /// `genjobs jobs …`.
    Jobs(JobsCommand),
    /// `genjobs batch …`.
    Batch(BatchCommand),
    /// `genjobs webhooks …`.
    Webhooks(WebhooksCommand),
    /// `genjobs models` without a catalog subcommand.
    Models(ModelsArgs),
    /// `genjobs account`.
    Account(AccountArgs),
    /// `genjobs ledger`.
    Ledger(LedgerArgs),
    /// `genjobs usage`.
    Usage(UsageArgs),
    /// `genjobs keys …` without `DATABASE_URL`: the caller's own keys.
    Keys(Box<crate::keys_cli::KeysCommand>),
}

/// Runs a client command; returns the process's exit status.
pub async fn run(command: ClientCommand) -> ExitCode {
    use ClientCommand as Command;
    let (connection, outcome) = match command {
        Command::Keys(command) => keys::run(*command).await,
        Command::Image(ImageArgs { prompt, n, generation: g }) => {
            let outcome = match image_inputs(&g.connection, &g.image_inputs).await {
                Ok(image_inputs) => {
                    let request = ImageRequest {
                        model: g.model,
                        n,
                        aspect_ratio: g.aspect_ratio,
                        seed: g.seed,
                        negative_prompt: g.negative_prompt,
                        image_inputs,
                        webhook_url: g.webhook_url,
                        ..ImageRequest::new(prompt)
                    };
                    if g.quote {
                        query(&g.connection, async |c: Client| quoted(c.quote_image(&request).await?)).await
                    } else {
                        generate(&g.connection, &g.out, async |c: Client| c.submit_image(&request, None).await).await
                    }
                }
                Err(stop) => Err(stop),
            };
            (g.connection, outcome.map_err(in_flag_terms))
        }
        Command::Video(VideoArgs { prompt, duration, resolution, generation: g }) => {
            let outcome = match image_inputs(&g.connection, &g.image_inputs).await {
                Ok(image_inputs) => {
                    let request = VideoRequest {
                        model: g.model,
                        duration_sec: duration,
                        resolution,
                        aspect_ratio: g.aspect_ratio,
                        seed: g.seed,
                        negative_prompt: g.negative_prompt,
                        image_inputs,
                        webhook_url: g.webhook_url,
                        ..VideoRequest::new(prompt)
                    };
                    if g.quote {
                        query(&g.connection, async |c: Client| quoted(c.quote_video(&request).await?)).await
                    } else {
                        generate(&g.connection, &g.out, async |c: Client| c.submit_video(&request, None).await).await
                    }
                }
                Err(stop) => Err(stop),
            };
            (g.connection, outcome.map_err(in_flag_terms))
        }
        Command::Batch(BatchCommand::Submit { file, wait, connection }) => {
            let outcome = batch::submit(&connection, &file, wait).await;
            (connection, outcome)
        }
        Command::Batch(BatchCommand::Results { id, connection }) => {
            let outcome = batch::results(&connection, &id).await;
            (connection, outcome)
        }
        Command::Jobs(JobsCommand::Watch { id, out, connection }) => {
            let outcome = match client(&connection) {
                Ok(client) => finish(&client, &id, out.as_deref(), connection.json).await,
                Err(e) => Err(e.into()),
            };
            (connection, outcome)
        }
        Command::Jobs(JobsCommand::List { limit, before, connection }) => {
            let outcome = query(&connection, async |client: Client| {
                let page = client.jobs(limit, before.as_deref()).await?;
                // The page is newest first: its oldest waiting job's place is read once, and each
                // newer waiting job stands one place behind the next older one.
                let waiting: Vec<&Job> = page.data.iter().filter(|j| genjobs_client::waits_for_capacity(j)).collect();
                let oldest = match waiting.last() {
                    Some(oldest) => client.waiting_position(oldest).await?.unwrap_or(1),
                    None => 1,
                };
                let mut lines = Vec::new();
                for j in &page.data {
                    let older_waiting = waiting.iter().position(|w| w.id == j.id).map(|i| waiting.len() - 1 - i);
                    let waiting = older_waiting.map_or_else(String::new, |older| {
                        format!("  {}", waiting_line(oldest.saturating_add(u32::try_from(older).unwrap_or(u32::MAX))))
                    });
                    lines.push(format!(
                        "{}  {:<9}  {:>3}%  {}  {}{waiting}",
                        j.id,
                        j.state.as_str(),
                        j.progress,
                        j.model,
                        j.created_at
                    ));
                }
                Ok((json!(page), lines.join("\n")))
            })
            .await;
            (connection, outcome)
        }
        Command::Jobs(JobsCommand::Get { id, connection }) => {
            let outcome = query(&connection, async |client: Client| {
                let job = client.job(&id).await?;
                let mut text = describe(&job);
                if let Some(position) = client.waiting_position(&job).await? {
                    text.push_str(&format!("\n{}", waiting_line(position)));
                }
                Ok((json!(job), text))
            })
            .await;
            (connection, outcome)
        }
        Command::Jobs(JobsCommand::Cancel { id, connection }) => {
            let outcome = query(&connection, async |client: Client| {
                let receipt = client.cancel(&id).await?;
                Ok((json!(receipt), format!("job {} {}", receipt.id, receipt.state.as_str())))
            })
            .await;
            (connection, outcome)
        }
        Command::Webhooks(WebhooksCommand::Secret { rotate, connection }) => {
            let outcome = query(&connection, async |client: Client| {
                let secret =
                    if rotate { client.rotate_webhook_secret().await? } else { client.webhook_secret().await? };
                Ok((json!(secret), secret.secret.clone()))
            })
            .await;
            (connection, outcome)
        }
        Command::Webhooks(WebhooksCommand::List { id, connection }) => {
            let outcome = query(&connection, async |client: Client| {
                let events = client.job_webhooks(&id).await?;
                let mut lines = Vec::new();
                for event in &events {
                    let state = event.delivered_at.as_ref().map_or_else(
                        || event.next_attempt_at.as_ref().map_or("given up".to_owned(), |at| format!("next {at}")),
                        |at| format!("delivered {at}"),
                    );
                    lines.push(format!("{} {} {} ({state})", event.id, event.event_type, event.url));
                    lines.extend(event.attempts.iter().map(|a| {
                        let status = a.status.map_or("no answer".to_owned(), |s| s.to_string());
                        format!("  {} {status} {}", a.at, a.error.as_deref().unwrap_or(""))
                    }));
                }
                Ok((json!({ "data": events }), lines.join("\n")))
            })
            .await;
            (connection, outcome)
        }
        Command::Webhooks(WebhooksCommand::Redeliver { id, event_id, connection }) => {
            let outcome = query(&connection, async |client: Client| {
                client.redeliver_webhook(&id, &event_id).await?;
                Ok((json!({ "redelivering": event_id }), format!("{event_id} will be delivered again")))
            })
            .await;
            (connection, outcome)
        }
        Command::Models(args) => {
            let outcome = query(&args.connection, async |client: Client| {
                let models = client.models(args.modality.as_deref()).await?;
                let lines = models.iter().map(|m| {
                    let fields: Vec<&str> = m.fields.iter().map(|f| f.name.as_str()).collect();
                    format!("{:<20} {:<6} {}  [{}]", m.id, m.modality, m.display_name, fields.join(", "))
                });
                Ok((json!({ "data": models }), lines.collect::<Vec<_>>().join("\n")))
            })
            .await;
            (args.connection, outcome)
        }
        Command::Account(args) => {
            let outcome = query(&args.connection, async |client: Client| {
                let a = client.account().await?;
                let text = format!(
                    "{} available, {} held, {} spent\n{} a minute, {} at once ({} running)",
                    counted(a.credits_available, "credit"),
                    a.credits_held,
                    a.credits_spent,
                    counted(a.rate_limit_per_minute, "request"),
                    counted(a.max_concurrent_jobs, "job"),
                    a.active_jobs
                );
                Ok((json!(a), text))
            })
            .await;
            (args.connection, outcome)
        }
        Command::Ledger(args) => {
            let outcome = query(&args.connection, async |client: Client| {
                let page = client.ledger(args.limit, args.before.as_deref()).await?;
                let mut lines: Vec<String> = page
                    .data
                    .iter()
                    .map(|e| {
                        format!("{} {} {:>7} {}", e.created_at, e.kind, e.credits, e.job_id.as_deref().unwrap_or("-"))
                    })
                    .collect();
                lines.extend(page.next.as_ref().map(|next| format!("more: --before {next}")));
                Ok((json!(page), lines.join("\n")))
            })
            .await;
            (args.connection, outcome)
        }
        Command::Usage(args) => {
            let csv = args.csv;
            let outcome = query(&args.connection, async |client: Client| {
                let rows = client.usage(args.from.as_deref(), args.to.as_deref(), &args.group_by).await?;
                let group = |row: &genjobs_client::UsageRow| row.day.clone().or(row.model.clone()).unwrap_or_default();
                let lines = rows.iter().map(|r| {
                    if csv {
                        format!(
                            "{},{},{},{},{},{},{}",
                            group(r),
                            r.jobs,
                            r.succeeded,
                            r.failed,
                            r.canceled,
                            r.credits_spent,
                            r.content_refused
                        )
                    } else {
                        format!(
                            "{} {} ({} succeeded, {} failed, {} canceled), {}",
                            group(r),
                            counted(r.jobs, "job"),
                            r.succeeded,
                            r.failed,
                            r.canceled,
                            counted(r.credits_spent, "credit")
                        )
                    }
                });
                let header = csv
                    .then(|| format!("{},jobs,succeeded,failed,canceled,credits_spent,content_refused", args.group_by));
                Ok((json!({ "data": rows }), header.into_iter().chain(lines).collect::<Vec<_>>().join("\n")))
            })
            .await;
            (args.connection, outcome)
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(stop) => report(stop, connection.json),
    }
}

fn client(connection: &Connection) -> Result<Client, Error> {
    Client::new(&connection.api_url, connection.api_key.as_deref().unwrap_or_default())
}

/// The `--image` values as a request's image inputs: a URL as it is, a local file uploaded first
/// (`POST /api/v1/uploads`) and passed as the link the service answers.
async fn image_inputs(connection: &Connection, values: &[String]) -> Result<Option<Vec<String>>, Stop> {
    let mut urls = Vec::with_capacity(values.len());
    for value in values {
        if value.starts_with("http://") || value.starts_with("https://") {
            urls.push(value.clone());
            continue;
        }
        let image = tokio::fs::read(value).await.map_err(|e| Stop::Usage(format!("--image {value}: {e}")))?;
        urls.push(client(connection)?.upload_image(image).await?.url);
    }
    Ok((!urls.is_empty()).then_some(urls))
}

/// One call, printed as JSON or as text.
async fn query(
    connection: &Connection,
    call: impl AsyncFnOnce(Client) -> Result<(serde_json::Value, String), Error>,
) -> Result<(), Stop> {
    let (document, text) = call(client(connection)?).await?;
    if connection.json {
        println!("{document}");
    } else if !text.is_empty() {
        println!("{text}");
    }
    Ok(())
}

/// A quote as `--json` prints it and as a line of text.
fn quoted(quote: Quote) -> Result<(serde_json::Value, String), Error> {
    let text = format!("{}: {} credits", quote.model, quote.credits);
    Ok((json!(quote), text))
}

fn describe(job: &Job) -> String {
    let mut text =
        format!("{} {} {}% {} ({} credits held", job.id, job.state.as_str(), job.progress, job.model, job.credits_held);
    if let Some(actual) = job.credits_actual {
        text.push_str(&format!(", {actual} charged"));
    }
    text.push(')');
    for output in job.outputs.iter().flatten() {
        text.push_str(&format!("\n{}", output.url));
    }
    if let Some(error) = &job.error {
        text.push_str(&format!("\n{}: {}", error.code, error.message));
    }
    text
}

/// What a job waiting for capacity shows: that it waits, and its place among the user's own
/// waiting jobs (1: the next of them to go).
fn waiting_line(position: u32) -> String {
    format!("waiting for capacity: #{position} among your waiting jobs")
}

/// Submits with `submit`, follows the job to its end and downloads what it made into `out`.
async fn generate(
    connection: &Connection,
    out: &Path,
    submit: impl AsyncFnOnce(Client) -> Result<Receipt, Error>,
) -> Result<(), Stop> {
    let client = client(connection)?;
    let receipt = submit(client.clone()).await?;
    if !connection.json {
        eprintln!("job {} accepted: {}, {} credits held", receipt.job_id, receipt.model, receipt.credits_held);
    }
    finish(&client, &receipt.job_id, Some(out), connection.json).await
}

async fn finish(client: &Client, id: &str, out: Option<&Path>, json: bool) -> Result<(), Stop> {
    let job = follow(client, id, json).await?;
    if job.state != JobState::Succeeded {
        return Err(Stop::JobEnded(Box::new(job)));
    }
    let mut files = Vec::new();
    if let Some(dir) = out {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io { path: dir.display().to_string(), source })?;
        for (i, output) in job.outputs.iter().flatten().enumerate() {
            let path = dir.join(format!("{}-{i}.{}", job.id, extension(&output.meta.content_type, &output.url)));
            client.download(&output.url, &path).await?;
            files.push(path.display().to_string());
        }
    }
    if json {
        println!("{}", json!({ "job": job, "files": files }));
    } else {
        let charged = job.credits_actual.unwrap_or_default();
        eprintln!("job {} succeeded: {charged} credits charged", job.id);
        for line in if files.is_empty() { job.outputs.iter().flatten().map(|o| o.url.clone()).collect() } else { files }
        {
            println!("{line}");
        }
    }
    Ok(())
}

fn extension(content_type: &str, url: &str) -> String {
    match content_type {
        "image/png" => "png".into(),
        "image/jpeg" => "jpg".into(),
        "image/webp" => "webp".into(),
        "video/mp4" => "mp4".into(),
        _ => url
            .rsplit('/')
            .next()
            .and_then(|name| name.rsplit_once('.'))
            .map_or("bin".into(), |(_, ext)| ext.to_owned()),
    }
}
