//! A short smoke run of every scenario of the harness against an in-process genjobs on the
//! embedded default: the harness itself is tested, the figures are not (this machine is shared
//! and noisy; `just bench` measures).

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use genjobs::{Config, start};
use genjobs_bench::load::closed_loop;
use genjobs_bench::scenarios::{self, Api};
use genjobs_upstream_sim::SimConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_runs_briefly() {
    let config = Config {
        bind: "127.0.0.1:0".parse().unwrap(),
        simulator: SimConfig { queue: Duration::ZERO, run: Duration::from_secs(600), ..SimConfig::default() },
        ..Config::default()
    }
    .with_poll_interval(Duration::from_millis(100));
    let service = start(config).await.unwrap();
    let (base, admin, sim, addr, pid) = (
        format!("http://{}", service.address),
        service.admin_token.clone().unwrap(),
        service.simulator_url.clone().unwrap(),
        service.address,
        std::process::id(),
    );
    tokio::spawn(service.run());
    let user: serde_json::Value = reqwest::Client::new()
        .post(format!("{base}/api/admin/users"))
        .bearer_auth(admin)
        .json(&serde_json::json!({"name": "smoke", "credits": 100_000, "max_concurrent_jobs": 1000, "rate_limit_per_minute": 100_000}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let key = user["api_key"].as_str().unwrap().to_owned();
    let api = Api::new(&base, &key, 16);

    let ids = Arc::new(scenarios::submit_many(&api, 20, 4, "smoke").await);
    assert_eq!(ids.len(), 20);
    let (client, url) = (api.client.clone(), format!("{base}/api/v1/jobs/{}", ids[0]));
    let reads = closed_loop(4, Duration::from_millis(300), move |_, _| {
        let request = client.get(&url).bearer_auth(&key);
        async move { request.send().await.is_ok_and(|r| r.status() == 200) }
    })
    .await;
    assert!(reads.ok > 0 && reads.errors == 0, "{reads:?}");

    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let baseline = format!("http://{}/api/v1/jobs/x", listener.local_addr().unwrap());
    tokio::spawn(genjobs_bench::baseline::server(listener, 1).unwrap());
    let body = reqwest::get(&baseline).await.unwrap().text().await.unwrap();
    assert_eq!(body, genjobs_bench::baseline::JOB);

    let streamed = scenarios::submit_many(&api, 2, 2, "streamed [sim:run=1500]").await;
    let mut seen_open = 0;
    let outcome = scenarios::streams(addr, &api.key, &streamed, 20, Duration::from_secs(20), |n| seen_open = n).await;
    assert_eq!((seen_open, outcome.opened, outcome.finals), (20, 20, 20));

    for id in ids.iter() {
        assert!(api.cancel(id).await);
    }
    let watched = scenarios::submit_many(&api, 3, 3, "watched [sim:hang]").await;
    let economy =
        scenarios::economy(&api, &sim, &watched, 12, Duration::from_secs(1), Duration::from_millis(100)).await;
    assert!(economy.status_calls > 0 && economy.per_job_per_interval < 2.0, "{economy:?}");

    let wakeup = scenarios::wakeup(&api, &api, 4, 4).await;
    assert_eq!(wakeup.samples, 4);
    assert!(wakeup.p99_ms < 1000.0, "{wakeup:?}");

    let driver =
        scenarios::driver_scale(&api.client, &sim, pid, Duration::from_millis(100), Duration::from_millis(800)).await;
    assert!(driver.jobs_polled >= 3 && driver.intervals > 0 && driver.service_cores > 0.0, "{driver:?}");
}
