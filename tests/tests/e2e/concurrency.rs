use crate::spawn_app;
use serde_json::{Value, json};

/// Many clients of one user submit and cancel at once: the concurrent-job limit and the credits
/// are never exceeded, and available + held + spent equals the grant at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_submits_and_cancels_never_break_the_limits_or_the_ledger() {
    let app = spawn_app().await;
    let user = app.create_user(300, json!({"max_concurrent_jobs": 5, "rate_limit_per_minute": 100000})).await;
    let tasks: Vec<_> = (0..60)
        .map(|i| {
            let (client, base, key) = (app.client.clone(), app.base.clone(), user.key.clone());
            tokio::spawn(async move {
                let prompt = if i % 3 == 0 { "quick" } else { "slow [sim:run=400]" };
                let response = client
                    .post(format!("{base}/api/v1/images/generations"))
                    .bearer_auth(&key)
                    .json(&json!({"prompt": prompt, "n": 2}))
                    .send()
                    .await
                    .unwrap();
                let status = response.status().as_u16();
                assert!([202, 402, 429].contains(&status), "{status}");
                if status == 202 && i % 2 == 0 {
                    let receipt: Value = response.json().await.unwrap();
                    let url = format!("{base}/api/v1/jobs/{}/cancel", receipt["job_id"].as_str().unwrap());
                    assert_eq!(client.post(url).bearer_auth(&key).send().await.unwrap().status(), 200);
                }
                let account: Value = client
                    .get(format!("{base}/api/v1/account"))
                    .bearer_auth(&key)
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                assert!(account["active_jobs"].as_u64().unwrap() <= 5, "{account}");
                status
            })
        })
        .collect();
    let mut accepted = 0;
    for task in tasks {
        accepted += u32::from(task.await.unwrap() == 202);
    }
    assert!(accepted >= 5, "some submissions got through");
    let jobs: Value = app.get("/api/v1/jobs?limit=100", &user.key).await.json().await.unwrap();
    for job in jobs["data"].as_array().unwrap() {
        app.wait_final(&user.key, job["id"].as_str().unwrap()).await;
    }
    let account = app.user(&user.id).await;
    let total: u64 =
        ["credits_available", "credits_held", "credits_spent"].iter().map(|k| account[k].as_u64().unwrap()).sum();
    assert_eq!(total, 300, "{account}");
    assert_eq!((account["credits_held"].as_u64(), account["active_jobs"].as_u64()), (Some(0), Some(0)));
    let spent: u64 = jobs["data"].as_array().unwrap().iter().map(|j| j["credits_held"].as_u64().unwrap()).sum::<u64>();
    assert!(account["credits_spent"].as_u64().unwrap() <= spent);
}
