//! The streamed body of a long trace: its step pages, read from the
//! database as they are written ([`drain`]), in the bytes of the whole
//! document as serde_json wrote it before streaming ([`trace_json`]).

use serde_json::{json, Value};

use crate::db::{Db, DbError};
use crate::trace_json;
use gateway_ledger::traces::{self as ledger, Trace};

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
