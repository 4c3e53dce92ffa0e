//! Following a job to its end with a progress bar fed by its event stream; Ctrl-C offers to
//! cancel it.

use std::io::{BufRead, IsTerminal};

use futures_util::StreamExt;
use genjobs_client::{Client, Job, JobState};
use indicatif::{ProgressBar, ProgressStyle};

use super::{Stop, waiting_line};

/// The bar as the README shows it: `[====>   ]  72% running (00:00:04)`.
const BAR_TEMPLATE: &str = "[{bar:40}] {msg} ({elapsed_precise})";

/// One reading of the job as the bar says it: its percentage and its state, or its place among
/// the waiting jobs when it waits for capacity.
fn reading(progress: u8, state: JobState, waiting: Option<u32>) -> String {
    let state = waiting.map_or_else(|| state.as_str().to_owned(), waiting_line);
    format!("{progress:>3}% {state}")
}

/// The job's place among the user's waiting jobs, when it waits for capacity; a failed read
/// shows nothing rather than stopping the follow.
async fn waiting_position(client: &Client, id: &str) -> Option<u32> {
    let job = client.job(id).await.ok()?;
    client.waiting_position(&job).await.ok().flatten()
}

/// Follows the job's events with a progress bar (none with `--json`), offering to cancel on
/// Ctrl-C; returns the job once final.
pub(super) async fn follow(client: &Client, id: &str, json: bool) -> Result<Job, Stop> {
    let bar = if json { ProgressBar::hidden() } else { ProgressBar::new(100) };
    bar.set_style(
        ProgressStyle::with_template(BAR_TEMPLATE)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let mut events = client.stream(id);
    // One listener for the whole follow: a fresh `ctrl_c()` per turn of the loop would miss a
    // Ctrl-C arriving between two events, which the process, its handler installed, no longer
    // dies of.
    let mut interrupts = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok();
    let interrupted = async |interrupts: &mut Option<tokio::signal::unix::Signal>| match interrupts {
        Some(signal) => signal.recv().await,
        None => std::future::pending().await,
    };
    loop {
        tokio::select! {
            event = events.next() => match event {
                Some(Ok(event)) => {
                    // The events do not say that a queued job waits for capacity; the job does.
                    let waiting = match event.data.state {
                        JobState::Queued => waiting_position(client, id).await,
                        _ => None,
                    };
                    // The percentage is in the message, set once with the state it was read
                    // with: the bar drawn between two settings would pair a new one with an old.
                    bar.set_message(reading(event.data.progress, event.data.state, waiting));
                    bar.set_position(u64::from(event.data.progress));
                }
                Some(Err(e)) => {
                    bar.abandon();
                    return Err(e.into());
                }
                None => break,
            },
            _ = interrupted(&mut interrupts) => {
                if !std::io::stdin().is_terminal() {
                    bar.abandon();
                    return Err(Stop::Interrupted(id.to_owned()));
                }
                let cancel = bar.suspend(|| {
                    eprint!("\nCancel job {id}? Its credits are released. [y/N] ");
                    let mut answer = String::new();
                    std::io::stdin().lock().read_line(&mut answer).is_ok() && answer.trim().eq_ignore_ascii_case("y")
                });
                if cancel {
                    client.cancel(id).await?;
                } else {
                    bar.abandon();
                    return Err(Stop::Interrupted(id.to_owned()));
                }
            }
        }
    }
    bar.finish_and_clear();
    Ok(client.job(id).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_pairs_the_percentage_with_the_state_it_came_with() {
        assert_eq!(reading(72, JobState::Running, None), " 72% running");
        assert_eq!(reading(0, JobState::Queued, Some(2)), "  0% waiting for capacity: #2 among your waiting jobs");
    }

    #[test]
    fn the_bar_is_laid_out_as_the_readme_shows_it() {
        assert!(ProgressStyle::with_template(BAR_TEMPLATE).is_ok(), "{BAR_TEMPLATE}");
        assert!(BAR_TEMPLATE.starts_with("[{bar:40}] {msg}"), "the bar first, 40 wide, then the reading");
        assert!(BAR_TEMPLATE.ends_with("({elapsed_precise})"), "hours, minutes and seconds: (00:00:04)");
    }
}
