//! The client commands' arguments: what each command takes.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::connection::Connection;

/// What `image` and `video` share.
#[derive(Debug, Args)]
pub struct Generation {
    /// Model id (`genjobs models --modality …`); the catalog's default when absent.
    #[arg(long)]
    pub model: Option<String>,
    /// Aspect ratio, e.g. 16:9.
    #[arg(long)]
    pub aspect_ratio: Option<String>,
    /// Seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// What to avoid.
    #[arg(long)]
    pub negative_prompt: Option<String>,
    /// A reference image: a URL, or a local file (PNG, JPEG, WebP or GIF), which is uploaded
    /// first (repeatable).
    #[arg(long = "image", value_name = "URL|FILE")]
    pub image_inputs: Vec<String>,
    /// Where to save the outputs.
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
    /// Only print what the request would hold now; submit nothing.
    #[arg(long)]
    pub quote: bool,
    /// Where to POST the job's end, signed with your webhook secret (`genjobs webhooks secret`).
    #[arg(long, value_name = "URL")]
    pub webhook_url: Option<String>,
    #[command(flatten)]
    #[allow(missing_docs, reason = "flattened: its fields carry the docs")]
    pub connection: Connection,
}

/// `genjobs image PROMPT`
#[derive(Debug, Args)]
pub struct ImageArgs {
    /// What to draw.
    pub prompt: String,
    /// Number of images.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4))]
    pub n: Option<u32>,
    #[command(flatten)]
    #[allow(missing_docs, reason = "flattened: its fields carry the docs")]
    pub generation: Generation,
}

/// `genjobs video PROMPT`
#[derive(Debug, Args)]
pub struct VideoArgs {
    /// What to film.
    pub prompt: String,
    /// Seconds of video.
    #[arg(long)]
    pub duration: Option<u32>,
    /// Resolution, e.g. 720p.
    #[arg(long)]
    pub resolution: Option<String>,
    #[command(flatten)]
    #[allow(missing_docs, reason = "flattened: its fields carry the docs")]
    pub generation: Generation,
}

/// `genjobs jobs …`
#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Your jobs, newest first.
    List {
        /// How many.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100))]
        limit: u32,
        /// Only jobs older than this job id.
        #[arg(long)]
        before: Option<String>,
        #[command(flatten)]
        #[allow(missing_docs, reason = "flattened: its fields carry the docs")]
        connection: Connection,
    },
    /// One job.
    Get {
        /// The job id.
        id: String,
        #[command(flatten)]
        #[allow(missing_docs, reason = "flattened: its fields carry the docs")]
        connection: Connection,
    },
    /// Follow a job with a progress bar until it ends; download its outputs with --out.
    Watch {
        /// The job id.
        id: String,
        /// Where to save the outputs, if anywhere.
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        #[allow(missing_docs, reason = "flattened: its fields carry the docs")]
        connection: Connection,
    },
    /// Cancel a job; its credits are released.
    Cancel {
        /// The job id.
        id: String,
        #[command(flatten)]
        #[allow(missing_docs, reason = "flattened: its fields carry the docs")]
        connection: Connection,
    },
}

/// `genjobs models`
#[derive(Debug, Args)]
pub struct ModelsArgs {
    /// Only models of this modality (image, video, …).
    #[arg(long)]
    pub modality: Option<String>,
    #[command(flatten)]
    #[allow(missing_docs, reason = "flattened: its fields carry the docs")]
    pub connection: Connection,
}

/// `genjobs ledger`
#[derive(Debug, Args)]
pub struct LedgerArgs {
    /// How many entries.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub limit: u32,
    /// Only entries older than this cursor (a page's `next`).
    #[arg(long)]
    pub before: Option<String>,
    #[command(flatten)]
    #[allow(missing_docs, reason = "flattened: its fields carry the docs")]
    pub connection: Connection,
}

/// `genjobs usage`
#[derive(Debug, Args)]
pub struct UsageArgs {
    /// First UTC day, YYYY-MM-DD (default: 29 days before --to).
    #[arg(long)]
    pub from: Option<String>,
    /// Last UTC day, included, YYYY-MM-DD (default: today).
    #[arg(long)]
    pub to: Option<String>,
    /// `day` or `model`.
    #[arg(long, default_value = "day", value_parser = ["day", "model"])]
    pub group_by: String,
    /// Print CSV, with a header row naming the fields.
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
    #[command(flatten)]
    #[allow(missing_docs, reason = "flattened: its fields carry the docs")]
    pub connection: Connection,
}

/// `genjobs account`
#[derive(Debug, Args)]
pub struct AccountArgs {
    #[command(flatten)]
    #[allow(missing_docs, reason = "flattened: its fields carry the docs")]
    pub connection: Connection,
}

/// `genjobs webhooks …`
#[derive(Debug, Subcommand)]
pub enum WebhooksCommand {
    /// Your webhook signing secret (`whsec_…`), made on first use.
    Secret {
        /// Make a new one; the old one signs nothing from now on.
        #[arg(long)]
        rotate: bool,
        #[command(flatten)]
        #[allow(missing_docs, reason = "flattened: its fields carry the docs")]
        connection: Connection,
    },
    /// A job's webhook deliveries, every attempt shown.
    List {
        /// The job id.
        id: String,
        #[command(flatten)]
        #[allow(missing_docs, reason = "flattened: its fields carry the docs")]
        connection: Connection,
    },
    /// Deliver a job's webhook event once more, with the same id and body.
    Redeliver {
        /// The job id.
        id: String,
        /// The event id (`genjobs webhooks list`).
        event_id: String,
        #[command(flatten)]
        #[allow(missing_docs, reason = "flattened: its fields carry the docs")]
        connection: Connection,
    },
}

/// `genjobs batch …`
#[derive(Debug, Subcommand)]
pub enum BatchCommand {
    /// Submit a file of items, one JSON object a line (`{"custom_id", "modality", "body"}`), as
    /// one batch at the batch price; with --wait, follow it to its end with a bar of items done.
    Submit {
        /// The JSONL file.
        file: PathBuf,
        /// Follow the batch until every item is final.
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        #[allow(missing_docs, reason = "flattened: its fields carry the docs")]
        connection: Connection,
    },
    /// Write a batch's results to stdout: one JSON line per final item, in the batch's order.
    Results {
        /// The batch id.
        id: String,
        #[command(flatten)]
        #[allow(missing_docs, reason = "flattened: its fields carry the docs")]
        connection: Connection,
    },
}
