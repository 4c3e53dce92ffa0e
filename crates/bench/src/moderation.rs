//! `genjobs-bench moderation`: what moderation adds between a submission and its send. One
//! replica on Postgres against the simulator, jobs submitted one at a time and then 32 at once,
//! moderation off, then on against the simulator's own `/moderations` (a local fake, so the
//! figure is genjobs' cost plus one loopback call, not a real service's latency). Measured: each
//! job's accepted → sent, from its own timestamps (`sent_at - created_at`). Writes
//! `docs/benchmarks-moderation.md`.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::capacity::percentile;
use super::statements::query;
use super::{Failure, create_users, fresh_database, progress, psql, spawn_genjobs};

/// Jobs per measurement.
const JOBS: usize = 200;
/// Clients of the concurrent measurement.
const CLIENTS: usize = 32;

/// The waits of a run, in milliseconds: (accepted → sent) for each job sent.
fn waits(url: &str) -> Result<Vec<f64>, Failure> {
    let text = query(
        url,
        "SELECT extract(epoch FROM sent_at - created_at) * 1000 FROM jobs WHERE sent_at IS NOT NULL ORDER BY created_at",
    )?;
    Ok(text.lines().filter_map(|line| line.trim().parse().ok()).collect())
}

/// One row: moderation on or off, one client or [`CLIENTS`].
struct Row {
    moderated: bool,
    clients: usize,
    sent: usize,
    p50_ms: f64,
    p99_ms: f64,
}

async fn measure(bin: &Path, server: &str, sim: &str, moderated: bool, clients: usize) -> Result<Row, Failure> {
    let name = format!("genjobs_bench_moderation_{}_{clients}", if moderated { "on" } else { "off" });
    let url = fresh_database(server, &name)?;
    let mut envs = vec![("DATABASE_URL", url.clone()), ("GENJOBS_UPSTREAM_URL", sim.to_owned())];
    if moderated {
        envs.push(("GENJOBS_MODERATION_URL", sim.to_owned()));
    }
    let app = spawn_genjobs(bin, &envs)?;
    let (_, key) = create_users(&app.base, 1).await?.remove(0);
    let client = reqwest::Client::new();
    let per_client = JOBS / clients;
    let tasks = (0..clients).map(|c| {
        let (client, base, key) = (client.clone(), app.base.clone(), key.clone());
        async move {
            for n in 0..per_client {
                let body = json!({"prompt": format!("moderation bench {c} {n}")});
                let sent =
                    client.post(format!("{base}/api/v1/images/generations")).bearer_auth(&key).json(&body).send();
                if sent.await.map(|r| r.status().as_u16()).unwrap_or(0) != 202 {
                    return Err::<(), String>("a submission was not accepted".into());
                }
            }
            Ok(())
        }
    });
    for outcome in futures_util::future::join_all(tasks).await {
        outcome?;
    }
    let mut waits = waits(&url)?;
    for _ in 0..100 {
        if waits.len() >= per_client * clients {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        waits = self::waits(&url)?;
    }
    drop(app);
    psql(server, &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))?;
    Ok(Row { moderated, clients, sent: waits.len(), p50_ms: percentile(&waits, 0.5), p99_ms: percentile(&waits, 0.99) })
}

/// The four measurements; writes the report.
///
/// # Errors
/// When genjobs, the database or a submission fails.
pub(super) async fn run(bin: &Path, server: &str, sim: &str) -> Result<(), Failure> {
    let mut rows = Vec::new();
    for clients in [1, CLIENTS] {
        for moderated in [false, true] {
            let row = measure(bin, server, sim, moderated, clients).await?;
            progress(&format!(
                "moderation {}, {clients} client(s): {} sent, accepted → sent p50 {:.1} ms, p99 {:.1} ms",
                if moderated { "on" } else { "off" },
                row.sent,
                row.p50_ms,
                row.p99_ms
            ));
            rows.push(row);
        }
    }
    write(Path::new("docs/benchmarks-moderation.md"), &rows)
}

fn write(path: &Path, rows: &[Row]) -> Result<(), Failure> {
    let mut doc = String::from(
        "# Benchmarks: moderation before the send\n\n\
         Written by `genjobs-bench moderation` (`cargo run --release -p genjobs-bench -- moderation`). \
         One replica on Postgres against the simulator; each job's accepted → sent from its own \
         timestamps (`sent_at - created_at`), with moderation off and on. On, every job is checked by \
         the simulator's `/moderations` over loopback before it is sent: the figure is what genjobs \
         adds (one call, one write of the outcome), not a real moderation service's latency, which \
         adds its own round trip.\n\n\
         | moderation | clients | jobs sent | accepted → sent p50 | p99 |\n|---|---|---|---|---|\n",
    );
    for row in rows {
        let _ = writeln!(
            doc,
            "| {} | {} | {} | {:.1} ms | {:.1} ms |",
            if row.moderated { "on" } else { "off" },
            row.clients,
            row.sent,
            row.p50_ms,
            row.p99_ms
        );
    }
    std::fs::write(path, doc)?;
    Ok(())
}
