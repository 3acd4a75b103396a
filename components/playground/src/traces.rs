//! Trace reads: `GET /playground/trace/{id}` (= `GET /traces/{id}`) and
//! `GET /playground/traces?gateway_id=&limit=`.
//!
//! Platform admins read any trace; a tenant admin needs access to the
//! trace's gateway; a member or viewer with access gets 403
//! `insufficient_role`; without access (another tenant, outside the scope)
//! or for an unknown id: 404 (`trace_not_found` / `gateway_not_found`),
//! the same answer, so nothing leaks.

use serde_json::{json, Value};

use crate::access::may_read_traces;
use crate::auth::Principal;
use crate::context::Ctx;
use crate::error::{self, ApiError};
use crate::http::{Request, Response};
use crate::trace_pages::{StepPages, WRITE_AT};
use crate::{gateways, routes};
use gateway_ledger::traces as ledger;

/// Steps read per query: what bounds the rows and the bytes the component
/// holds at once (a page of the simulator's steps is ~64 KB of body),
/// whatever the trace's length.
pub const PAGE: i64 = 512;

/// A trace read. Every decision (the id, access, role) and the first
/// [`WRITE_AT`] bytes of steps happen before the answer exists, so a refusal
/// or a failure there is the usual typed error, and a trace that short is
/// one body as before. A longer trace's other pages are its [`StepPages`],
/// which the handler writes as it reads them ([`crate::trace_pages::drain`]). The bytes are
/// those of the whole document as serde_json wrote it before ([`trace_json`]).
pub fn read(ctx: &Ctx, p: &Principal, raw_id: &str) -> Result<Response, ApiError> {
    let id = routes::trace_id(raw_id)?;
    let Some(tr) = ledger::read(ctx.db, &id)? else { return Err(error::trace_not_found()) };
    let access = p.roles.access(&tr.tenant_id, &tr.gateway_id).ok_or_else(error::trace_not_found)?;
    may_read_traces(access)?;
    let mut pages = StepPages::new(tr, PAGE);
    let mut first = String::new();
    let mut more = true;
    while more && first.len() < WRITE_AT {
        more = pages.next(ctx.db, &mut first)?;
    }
    let mut response = Response::text(200, first);
    response.stream = more.then_some(pages);
    Ok(response)
}

pub fn list(ctx: &Ctx, req: &Request, p: &Principal) -> Result<Response, ApiError> {
    let gateway_id = routes::gateway_param(&req.query)?;
    let limit = routes::limit_param(&req.query)?;
    let (gateway, access) = gateways::accessible(ctx, p, &gateway_id)?;
    may_read_traces(access)?;
    let traces: Vec<Value> = ledger::list(ctx.db, &gateway.id, limit)?
        .into_iter()
        .map(|t| json!({ "id": t.id, "started_at": t.started_at_ms, "model": t.model, "status": t.status }))
        .collect();
    Ok(Response::json(200, &json!({ "gateway_id": gateway.id, "traces": traces })))
}

#[cfg(test)]
#[path = "traces_tests.rs"]
pub(crate) mod tests;
