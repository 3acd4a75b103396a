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
use crate::context::{Ctx, Request, Response};
use crate::db::{Db, DbError};
use crate::error::{ApiError, PlaygroundErrors};
use crate::{gateways, routes, trace_json};
use gateway_ledger::traces::{self as ledger, Trace};

/// Steps read per query: what bounds the rows and the bytes the component
/// holds at once (a page of the simulator's steps is ~64 KB of body),
/// whatever the trace's length.
pub const PAGE: i64 = 512;

/// A trace read. Every decision (the id, access, role) and the first
/// [`WRITE_AT`] bytes of steps happen before the answer exists, so a refusal
/// or a failure there is the usual typed error, and a trace that short is
/// one body as before. A longer trace's other pages are its [`StepPages`],
/// which the handler writes as it reads them ([`drain`]). The bytes are
/// those of the whole document as serde_json wrote it before ([`trace_json`]).
pub fn read(ctx: &Ctx, p: &Principal, raw_id: &str) -> Result<Response, ApiError> {
    let id = routes::trace_id(raw_id)?;
    let Some(tr) = ledger::read(ctx.db, &id)? else { return Err(ApiError::trace_not_found()) };
    let access = p.roles.access(&tr.tenant_id, &tr.gateway_id).ok_or_else(ApiError::trace_not_found)?;
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

/// The rest of a trace's body, page by page. Holds one trace row and a
/// position, never steps: memory does not grow with the trace.
///
/// A trace still being written may gain steps between two pages; the body
/// then has them (its `step_count` is always the number of steps it carries),
/// under the trace row as it was read first.
#[derive(Debug, Clone, PartialEq)]
pub struct StepPages {
    trace: Trace,
    page: i64,
    /// The `seq` of the last step written; `None` before the first page.
    after: Option<i64>,
    count: usize,
    done: bool,
}

impl StepPages {
    pub fn new(trace: Trace, page: i64) -> StepPages {
        StepPages { trace, page: page.max(1), after: None, count: 0, done: false }
    }

    /// Reads the next page and appends its bytes to `out`: the body's start
    /// before the first step, the trace object after the last. `Ok(false)`
    /// once the body is complete.
    pub fn next(&mut self, db: &dyn Db, out: &mut String) -> Result<bool, DbError> {
        if self.done {
            return Ok(false);
        }
        let steps = ledger::steps_page(db, &self.trace.id, self.after, self.page)?;
        if self.after.is_none() && self.count == 0 {
            out.push_str(trace_json::OPEN);
        }
        let last_page = (steps.len() as i64) < self.page;
        for step in &steps {
            trace_json::write_step(step, self.count == 0, out);
            self.count += 1;
            self.after = Some(step.seq);
        }
        if last_page {
            trace_json::write_close(&self.trace_object(), out);
            self.done = true;
        }
        Ok(!self.done)
    }

    fn trace_object(&self) -> Value {
        let tr = &self.trace;
        json!({
            "id": tr.id,
            "gateway_id": tr.gateway_id,
            "tenant_slug": tr.tenant_slug,
            "gateway_slug": tr.gateway_slug,
            "started_at": tr.started_at_ms,
            "ended_at": tr.ended_at_ms,
            "model": tr.model,
            "status": tr.status,
            "step_count": self.count,
        })
    }
}

/// How a streamed body ended.
#[derive(Debug, PartialEq)]
pub enum Drained {
    /// Every byte written: the body is to be finished.
    Complete,
    /// A write failed: the client is gone.
    ClientGone,
    /// A page failed after the head (200) was sent. The status cannot change
    /// any more, so the body must not end well-formed: the handler aborts it
    /// (the client sees a broken chunked body / a reset, never a short JSON
    /// document), and logs the error.
    Failed(DbError),
}

/// Pages are gathered into writes of at least this many bytes (the last may
/// be shorter). A write smaller than a TCP segment (64 KiB on loopback) that
/// follows another small one waits for the client's ACK under Nagle's
/// algorithm, which Spin leaves on: one delayed ACK is ~40 ms.
pub const WRITE_AT: usize = 256 * 1024;

/// Writes the rest of a streamed body through `write` (which waits under the
/// host's backpressure and says `false` once the client is gone), page by
/// page in writes of at least `write_at` bytes ([`WRITE_AT`]), reusing one
/// buffer: what is held at once is one write's bytes and one page of rows.
pub fn drain(mut pages: StepPages, db: &dyn Db, write_at: usize, mut write: impl FnMut(&[u8]) -> bool) -> Drained {
    let mut chunk = String::new();
    loop {
        let more = match pages.next(db, &mut chunk) {
            Ok(more) => more,
            Err(e) => return Drained::Failed(e),
        };
        if chunk.len() >= write_at || !more {
            if !chunk.is_empty() && !write(chunk.as_bytes()) {
                return Drained::ClientGone;
            }
            chunk.clear();
        }
        if !more {
            return Drained::Complete;
        }
    }
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
