//! The status and result answers of a simulated request, as fal's queue gives them.

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::json;

use actix_web::http::StatusCode;

use crate::requests::{Phase, ResultFault, billable_units, output, queue_position};
use crate::{Sim, admit, chaos, not_found, refusal};

pub(crate) async fn status(
    sim: web::Data<Sim>,
    req: HttpRequest,
    path: web::Path<(String, String, String)>,
) -> HttpResponse {
    let (_, _, id) = path.into_inner();
    let fault = match admit(&sim, &req, "status", Some(&id)).await {
        Ok(fault) => fault,
        Err(answer) => return answer,
    };
    chaos::after(fault, status_answer(&sim, &id))
}

fn status_answer(sim: &Sim, id: &str) -> HttpResponse {
    let mut requests = sim.state.requests();
    // Counting those ahead walks every request, so only for one that waits.
    let position =
        requests.all.get(id).filter(|r| matches!(r.phase(), Phase::Queued)).map(|_| queue_position(&requests.all, id));
    let Some(request) = requests.all.get_mut(id) else {
        return not_found();
    };
    request.status_calls += 1;
    if request.status_calls <= request.directives.flaky {
        return HttpResponse::ServiceUnavailable().body("upstream overloaded");
    }
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    match request.phase() {
        Phase::Queued => HttpResponse::Accepted().json(json!({"status": "IN_QUEUE", "queue_position": position.unwrap_or_default(), "logs": []})),
        Phase::Running(percent) => HttpResponse::Accepted().json(json!({
            "status": "IN_PROGRESS",
            "logs": [{"message": format!("progress: {percent}%"), "level": "INFO", "source": "user", "timestamp": now.to_string()}],
        })),
        Phase::Completed if request.directives.error_status => HttpResponse::Ok().json(json!({
            "status": "COMPLETED",
            "logs": [],
            "error": "the runner disconnected while generating",
            "error_type": "runner_disconnected",
        })),
        Phase::Completed => HttpResponse::Ok().json(json!({"status": "COMPLETED", "logs": []})),
    }
}

pub(crate) async fn result(
    sim: web::Data<Sim>,
    base: web::Data<String>,
    req: HttpRequest,
    path: web::Path<(String, String, String)>,
) -> HttpResponse {
    let (_, _, id) = path.into_inner();
    let fault = match admit(&sim, &req, "result", Some(&id)).await {
        Ok(fault) => fault,
        Err(answer) => return answer,
    };
    chaos::after(fault, result_answer(&sim, base.as_str(), &id))
}

fn result_answer(sim: &Sim, base: &str, id: &str) -> HttpResponse {
    let mut requests = sim.state.requests();
    let Some(request) = requests.all.get_mut(id) else {
        return not_found();
    };
    if !matches!(request.phase(), Phase::Completed) {
        return HttpResponse::BadRequest().json(json!({"detail": "Request is still in progress"}));
    }
    request.result_calls += 1;
    let d = &request.directives;
    if let Some(fault) = d.result_fault.filter(|_| request.result_calls <= d.result_faults) {
        return fault_answer(fault);
    }
    if d.expired {
        return not_found();
    }
    if let Some(violations) = &request.invalid {
        return HttpResponse::UnprocessableEntity().json(json!({"detail": violations}));
    }
    if d.reject {
        return HttpResponse::UnprocessableEntity().json(refusal());
    }
    if d.content_policy {
        return HttpResponse::UnprocessableEntity().json(crate::content_policy_violation());
    }
    if d.fail {
        // A run that crashed is billed only as far as a `billable` directive says.
        let mut answer = HttpResponse::InternalServerError();
        if let Some(units) = &d.billable {
            answer.insert_header((genjobs_upstream_fal::BILLABLE_UNITS_HEADER, units.as_str()));
        }
        return answer.json(json!({"detail": "the model crashed while generating"}));
    }
    if d.error_status {
        return HttpResponse::ServiceUnavailable()
            .insert_header(("x-fal-error-type", "runner_disconnected"))
            .json(json!({"detail": "the runner disconnected while generating", "error_type": "runner_disconnected"}));
    }
    if d.malformed {
        return HttpResponse::Ok().json(json!({"images": "not a list", "video": 7}));
    }
    let mut answer = HttpResponse::Ok();
    if let Some(units) = billable_units(request) {
        answer.insert_header((genjobs_upstream_fal::BILLABLE_UNITS_HEADER, units));
    }
    answer.json(output(request, &format!("{base}/_sim/files/{id}")))
}

/// A result call failed as a busy or restarting queue fails it.
fn fault_answer(fault: ResultFault) -> HttpResponse {
    match fault {
        ResultFault::Status(429) => HttpResponse::TooManyRequests()
            .insert_header(("retry-after", "1"))
            .json(json!({"detail": "Too many requests"})),
        ResultFault::Status(code) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
            HttpResponse::build(status).content_type("text/plain").body("upstream unavailable")
        }
        ResultFault::Dropped => chaos::after(Some(chaos::Fault::Dropped), HttpResponse::Ok().finish()),
    }
}
