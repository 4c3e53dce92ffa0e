//! `genjobs batch submit FILE.jsonl [--wait]` and `genjobs batch results ID`: a batch from a file
//! of one item a line (`{"custom_id", "modality", "body"}`, the items of `POST /api/v1/batches`),
//! followed with a bar of items done, and its results written out as they stream.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use futures_util::StreamExt;
use genjobs_client::{Batch, BatchItemBody, BatchRequest, Client, Error};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use super::{Stop, client};
use crate::connection::Connection;

/// How often a batch followed with `--wait` is read.
const EVERY: Duration = Duration::from_secs(1);

/// The bar: `[=====>    ] 312/1000 items done (00:01:12)`.
const BAR_TEMPLATE: &str = "[{bar:40}] {pos}/{len} items done, {msg} ({elapsed_precise})";

/// The items of `file`, one JSON object a line (blank lines skipped), each with its line number.
///
/// # Errors
/// [`Stop::Usage`] naming the file, or the line and what is wrong with it.
async fn items_of(file: &Path) -> Result<Vec<(usize, BatchItemBody)>, Stop> {
    let text = tokio::fs::read_to_string(file).await.map_err(|e| Stop::Usage(format!("{}: {e}", file.display())))?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(index, line)| {
            let item = serde_json::from_str(line).map_err(|e| {
                Stop::Usage(format!(
                    "{} line {}: not an item {{\"custom_id\", \"modality\", \"body\"}}: {e}",
                    file.display(),
                    index + 1
                ))
            })?;
            Ok((index + 1, item))
        })
        .collect()
}

/// A refusal naming an item (`items[3].body.prompt`) told by the file's line too.
fn on_its_line(e: Error, file: &Path, lines: &[usize]) -> Stop {
    match e {
        Error::Api(mut refusal) => {
            let item = refusal.param.as_deref().and_then(|param| {
                let index = param.strip_prefix("items[")?.split(']').next()?.parse::<usize>().ok()?;
                lines.get(index).map(|line| (*line, param.to_owned()))
            });
            if let Some((line, param)) = item {
                refusal.message = format!("{} line {line} ({param}): {}", file.display(), refusal.message);
            }
            Stop::Call(Error::Api(refusal))
        }
        other => Stop::Call(other),
    }
}

fn summary(batch: &Batch) -> String {
    let c = &batch.counts;
    format!(
        "batch {} {}: {} items, {} succeeded, {} failed, {} canceled ({} credits held, {} spent)",
        batch.id, batch.state, c.total, c.succeeded, c.failed, c.canceled, batch.credits_held, batch.credits_spent
    )
}

fn done(batch: &Batch) -> u64 {
    batch.counts.succeeded + batch.counts.failed + batch.counts.canceled
}

/// Submits the file's items as one batch; with `wait`, follows it to its end with a bar of items
/// done (none with `--json`).
pub(super) async fn submit(connection: &Connection, file: &Path, wait: bool) -> Result<(), Stop> {
    let (lines, items): (Vec<usize>, Vec<BatchItemBody>) = items_of(file).await?.into_iter().unzip();
    let client = client(connection)?;
    let request = BatchRequest { items, completion_window_secs: None, webhook_url: None, metadata: None };
    let mut batch = client.submit_batch(&request, None).await.map_err(|e| on_its_line(e, file, &lines))?;
    if wait {
        batch = follow(&client, batch, connection.json).await?;
    }
    if connection.json {
        println!("{}", json!(batch));
    } else {
        println!("{}", summary(&batch));
    }
    Ok(())
}

async fn follow(client: &Client, mut batch: Batch, json: bool) -> Result<Batch, Stop> {
    let bar = if json { ProgressBar::hidden() } else { ProgressBar::new(batch.counts.total) };
    bar.set_style(
        ProgressStyle::with_template(BAR_TEMPLATE)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    while batch.state == "in_progress" {
        bar.set_position(done(&batch));
        bar.set_message(format!("{} running", batch.counts.running));
        tokio::time::sleep(EVERY).await;
        batch = client.batch(&batch.id).await?;
    }
    bar.set_position(done(&batch));
    bar.finish_and_clear();
    Ok(batch)
}

/// Writes the batch's results to stdout as they stream: one JSON line per final item.
pub(super) async fn results(connection: &Connection, id: &str) -> Result<(), Stop> {
    let mut lines = client(connection)?.batch_results(id).await?;
    let mut out = std::io::stdout().lock();
    while let Some(chunk) = lines.next().await {
        let chunk = chunk?;
        // A reader that went away (`| head`) ends the copy, not the command.
        if out.write_all(&chunk).is_err() {
            return Ok(());
        }
    }
    let _flushed = out.flush();
    Ok(())
}
