//! [`Gate`]: a TCP forwarder in front of the test server that a test can close, to make the
//! database unreachable from a PgBouncer put behind it, and open again. Closed, it ends every
//! forwarded connection and ends new ones as soon as they arrive, which is what a pooler sees of
//! a database that went away: its server connections die and it cannot log in again.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

/// The forwarder; it runs until dropped.
#[derive(Debug)]
pub struct Gate {
    /// Where clients connect instead of the server.
    pub addr: SocketAddr,
    open: Arc<AtomicBool>,
    forwarding: Arc<Mutex<Vec<AbortHandle>>>,
    accepting: AbortHandle,
}

impl Gate {
    /// An open gate to `server` (`host:port`) on a free port of 127.0.0.1; must be called in a
    /// tokio runtime, which runs it.
    ///
    /// # Panics
    /// When no port can be bound.
    pub async fn open_to(server: &str) -> Gate {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("no port for the gate: {e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("the gate has no address: {e}"));
        let open = Arc::new(AtomicBool::new(true));
        let forwarding = Arc::new(Mutex::new(Vec::new()));
        let server = server.to_owned();
        let accepting = {
            let (open, forwarding) = (Arc::clone(&open), Arc::clone(&forwarding));
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    if !open.load(Ordering::SeqCst) {
                        continue;
                    }
                    let task = tokio::spawn(forward(client, server.clone()));
                    forwarding.lock().unwrap_or_else(PoisonError::into_inner).push(task.abort_handle());
                }
            })
            .abort_handle()
        };
        Gate { addr, open, forwarding, accepting }
    }

    /// Makes the server unreachable: ends every forwarded connection, and every new one at once.
    pub fn close(&self) {
        self.open.store(false, Ordering::SeqCst);
        for task in self.forwarding.lock().unwrap_or_else(PoisonError::into_inner).drain(..) {
            task.abort();
        }
    }

    /// Forwards new connections again.
    pub fn open(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.close();
        self.accepting.abort();
    }
}

async fn forward(mut client: TcpStream, server: String) {
    if let Ok(mut upstream) = TcpStream::connect(&server).await {
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    }
}
