//! A webhook receiver for the tests: a raw HTTP/1.1 server on a loopback port that records every
//! request it gets (with when it arrived) and answers each as its script says, in order, then
//! with the default answer.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// How the receiver answers one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// This status, no body.
    Status(u16),
    /// `302 Found` to this location.
    Redirect(String),
    /// Nothing: the connection stays open, unanswered, until the sender gives up.
    Silence,
}

/// One request received.
#[derive(Debug, Clone)]
pub struct Received {
    /// When it arrived.
    pub at: Instant,
    /// Its headers, names lower-cased.
    pub headers: HashMap<String, String>,
    /// Its body.
    pub body: Vec<u8>,
}

impl Received {
    /// A header's value.
    #[must_use]
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", String::as_str)
    }

    /// The body as JSON.
    #[must_use]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("the webhook body is JSON")
    }
}

#[derive(Default)]
struct Shared {
    script: Mutex<VecDeque<Answer>>,
    received: Mutex<Vec<Received>>,
    arrived: Notify,
}

/// A running receiver.
#[derive(Clone)]
pub struct WebhookReceiver {
    /// `http://127.0.0.1:PORT/hook`.
    pub url: String,
    shared: Arc<Shared>,
}

impl WebhookReceiver {
    /// A receiver answering `script` in order, then 200.
    pub async fn start(script: Vec<Answer>) -> Self {
        Self::start_on(0, script).await
    }

    /// A receiver on loopback port `port` (0: any free one).
    pub async fn start_on(port: u16, script: Vec<Answer>) -> Self {
        let listener = TcpListener::bind(("127.0.0.1", port)).await.expect("bind a receiver");
        let url = format!("http://{}/hook", listener.local_addr().expect("address"));
        let shared = Arc::new(Shared { script: Mutex::new(script.into()), ..Shared::default() });
        let serving = Arc::clone(&shared);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, Arc::clone(&serving)));
            }
        });
        Self { url, shared }
    }

    /// Every request so far.
    #[must_use]
    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Waits until `count` requests have arrived; panics after `deadline`.
    pub async fn wait_for(&self, count: usize, deadline: Duration) -> Vec<Received> {
        let until = Instant::now() + deadline;
        loop {
            let arrived = self.shared.arrived.notified();
            let received = self.received();
            if received.len() >= count {
                return received;
            }
            let left = until.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "{} of {count} webhooks arrived within {deadline:?}", received.len());
            let _ = tokio::time::timeout(left, arrived).await;
        }
    }
}

async fn serve(mut stream: TcpStream, shared: Arc<Shared>) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let (head_end, length) = loop {
        let Ok(read) = stream.read(&mut chunk).await else { return };
        if read == 0 {
            return;
        }
        buffer.extend_from_slice(&chunk[..read]);
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).to_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:").and_then(|v| v.trim().parse::<usize>().ok()))
                .unwrap_or(0);
            break (end + 4, length);
        }
    };
    while buffer.len() < head_end + length {
        let Ok(read) = stream.read(&mut chunk).await else { return };
        if read == 0 {
            return;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_lowercase(), value.trim().to_owned()))
        .collect();
    let received = Received { at: Instant::now(), headers, body: buffer[head_end..head_end + length].to_vec() };
    let answer =
        shared.script.lock().unwrap_or_else(PoisonError::into_inner).pop_front().unwrap_or(Answer::Status(200));
    shared.received.lock().unwrap_or_else(PoisonError::into_inner).push(received);
    shared.arrived.notify_waiters();
    let reply = match answer {
        Answer::Status(status) => {
            format!("HTTP/1.1 {status} Scripted\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        }
        Answer::Redirect(location) => {
            format!("HTTP/1.1 302 Found\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        }
        Answer::Silence => {
            // Holds the connection open, unanswered, until the sender closes it.
            let _ = stream.read(&mut chunk).await;
            return;
        }
    };
    let _ = stream.write_all(reply.as_bytes()).await;
    let _ = stream.shutdown().await;
}
