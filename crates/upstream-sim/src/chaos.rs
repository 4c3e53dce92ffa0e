//! Random faults, for soak tests: with `SimConfig::chaos` above zero, each call draws whether it
//! fails and how, the way a provider and the network between fail: an unavailable queue (503), a
//! server error without detail (500), a call that hangs past the adapter's timeout, an answer cut
//! off in the middle of its JSON, and a connection dropped after the headers.

use std::time::Duration;

use actix_web::HttpResponse;
use actix_web::web::Bytes;

/// Longer than the adapter's 15 s timeout of one call.
const HANG: Duration = Duration::from_secs(16);

/// One fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// 503 before anything is done.
    Unavailable,
    /// The work is done, then a 500 without detail.
    ServerError,
    /// The call waits past the caller's timeout, then goes on.
    Hang,
    /// The work is done, then a 200 whose JSON is cut off.
    Truncated,
    /// The work is done, then the connection drops after the headers.
    Dropped,
}

impl Fault {
    /// The name stats count it under.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Fault::Unavailable => "fault_unavailable",
            Fault::ServerError => "fault_server_error",
            Fault::Hang => "fault_hang",
            Fault::Truncated => "fault_truncated",
            Fault::Dropped => "fault_dropped",
        }
    }
}

/// Whether this call fails (with probability `rate`), and how.
pub(crate) fn draw(rate: f64) -> Option<Fault> {
    if rate <= 0.0 {
        return None;
    }
    let random = uuid::Uuid::new_v4().as_u128();
    let unit = (random >> 64) as u64 as f64 / u64::MAX as f64;
    if unit >= rate {
        return None;
    }
    Some(match random % 5 {
        0 => Fault::Unavailable,
        1 => Fault::ServerError,
        2 => Fault::Hang,
        3 => Fault::Truncated,
        _ => Fault::Dropped,
    })
}

/// Before the work: an unavailable queue answers at once, a hang waits.
pub(crate) async fn before(fault: Option<Fault>) -> Option<HttpResponse> {
    match fault {
        Some(Fault::Unavailable) => Some(HttpResponse::ServiceUnavailable().body("service unavailable")),
        Some(Fault::Hang) => {
            tokio::time::sleep(HANG).await;
            None
        }
        _ => None,
    }
}

/// After the work: the answer as the fault leaves it.
pub(crate) fn after(fault: Option<Fault>, answer: HttpResponse) -> HttpResponse {
    match fault {
        Some(Fault::ServerError) => HttpResponse::InternalServerError().json(serde_json::json!({})),
        Some(Fault::Truncated) => {
            HttpResponse::Ok().content_type("application/json").body(r#"{"status": "COMPLETED", "images": [{"url": "#)
        }
        Some(Fault::Dropped) => {
            HttpResponse::Ok().content_type("application/json").streaming(futures_util::stream::once(async {
                Err::<Bytes, std::io::Error>(std::io::Error::other("connection dropped"))
            }))
        }
        _ => answer,
    }
}
