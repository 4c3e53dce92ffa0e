//! Submits an image job, follows its events, and downloads the outputs.
//!
//! ```sh
//! GENJOBS_API_URL=http://127.0.0.1:8080 GENJOBS_API_KEY=gj_… \
//!     cargo run -p genjobs-client --example generate -- "a lighthouse at dusk"
//! ```

use futures_util::StreamExt;
use genjobs_client::{Client, EventKind, ImageRequest};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let base = std::env::var("GENJOBS_API_URL").unwrap_or_else(|_| "http://127.0.0.1:8080".into());
    let key = std::env::var("GENJOBS_API_KEY").map_err(|_| "set GENJOBS_API_KEY to your API key")?;
    let prompt = std::env::args().nth(1).unwrap_or_else(|| "a lighthouse at dusk".into());
    let client = Client::new(base, key)?;

    let receipt = client.submit_image(&ImageRequest { n: Some(2), ..ImageRequest::new(prompt) }, None).await?;
    println!("job {} accepted, {} credits held", receipt.job_id, receipt.credits_held);

    let mut events = client.stream(&receipt.job_id);
    while let Some(event) = events.next().await {
        let event = event?;
        println!("{:?}: {:?} {}%", event.kind, event.data.state, event.data.progress);
        if event.kind == EventKind::Error {
            return Err(format!("the job ended without outputs: {:?}", event.data.error).into());
        }
    }

    let job = client.job(&receipt.job_id).await?;
    let dir = std::env::temp_dir().join(&job.id);
    std::fs::create_dir_all(&dir)?;
    for (i, output) in job.outputs.unwrap_or_default().iter().enumerate() {
        let path = dir.join(format!("{i}.png"));
        let bytes = client.download(&output.url, &path).await?;
        println!("{} ({bytes} bytes)", path.display());
    }
    println!("{} credits spent", job.credits_actual.unwrap_or_default());
    Ok(())
}
