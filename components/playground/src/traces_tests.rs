//! The streamed trace body against the body as it was built before streaming
//! (one `Value` for the whole trace, serialized once), on real SQLite.

use std::cell::Cell;

use serde_json::{json, Value};

use super::*;
use crate::db::testing::MemDb;
use crate::db::{Db, DbError};
use crate::db::{Row, Val};
use crate::trace_pages::{drain, Drained};
use gateway_ledger::traces::Trace;

/// The body exactly as `read` built it before streaming: every step in one
/// query, `data` decoded to a `Value` (text that is not JSON kept as a
/// string), the whole document serialized once.
pub(crate) fn reference_body(db: &dyn Db, id: &str) -> String {
    let tr = ledger::read(db, id).unwrap().unwrap();
    let rows = db.query(
        "SELECT name, started_at, ended_at, data FROM trace_steps WHERE trace_id = ? ORDER BY seq",
        &[id.into()],
    );
    let out: Vec<Value> = rows
        .unwrap()
        .iter()
        .map(|r: &Row| {
            let data = match r.opt_text(3).unwrap() {
                None => Value::Null,
                Some(text) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
            };
            json!({
                "name": r.text(0).unwrap(),
                "started_at": r.opt_int(1).unwrap(),
                "ended_at": r.opt_int(2).unwrap(),
                "data": data,
            })
        })
        .collect();
    let trace = json!({
        "id": tr.id,
        "gateway_id": tr.gateway_id,
        "tenant_slug": tr.tenant_slug,
        "gateway_slug": tr.gateway_slug,
        "started_at": tr.started_at_ms,
        "ended_at": tr.ended_at_ms,
        "model": tr.model,
        "status": tr.status,
        "step_count": out.len(),
    });
    json!({ "trace": trace, "steps": out }).to_string()
}

/// The shared tables, but `trace_steps.data` nullable (a NULL must still read as `null`).
fn db() -> MemDb {
    let db = MemDb::new();
    for sql in [
        "CREATE TABLE tenants (id TEXT PRIMARY KEY, slug TEXT NOT NULL UNIQUE)",
        "CREATE TABLE gateways (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, slug TEXT NOT NULL)",
        gateway_ledger::TRACES_TABLE,
        "CREATE TABLE trace_steps (trace_id TEXT NOT NULL, seq INTEGER NOT NULL, name TEXT NOT NULL,
            started_at INTEGER NOT NULL, ended_at INTEGER, data TEXT, PRIMARY KEY (trace_id, seq))",
        "INSERT INTO tenants (id, slug) VALUES ('ten_a', 'a\"cme')",
        "INSERT INTO gateways (id, tenant_id, slug) VALUES ('gw_a', 'ten_a', 'main')",
    ] {
        db.exec(sql, &[]).unwrap();
    }
    db
}

/// Every kind of stored `data` the fast path must copy or leave to serde_json.
const DATA: [Option<&str>; 18] = [
    Some("{\"model\":\"m\",\"output\":\"A streamed chunk.\",\"tokens\":41}"),
    Some("{\"seq\":3}"),
    Some("{\"tokens\":1,\"model\":\"unsorted\"}"),
    Some("{ \"a\" : [ 1 , 2 ] }\n"),
    Some("not json at all"),
    None,
    Some("{\"u\":\"\\u00e5\\u0001 \\ud83d\\ude00 å ✓\"}"),
    Some("[1.0,1e5,-0,0.5,1E-7,12345678901234567890]"),
    Some("{\"a\":{\"z\":null,\"b\":true},\"a\":\"duplicate\"}"),
    Some("\"a \\/ string\""),
    Some(""),
    Some("42"),
    Some("{\"q\":\"\\\"quoted\\\" \\\\ \\n\"}"),
    Some("{\"k\":\"tab\there\"}"),
    Some("[]"),
    Some("{}"),
    Some("{\"\\u0062\":1,\"a\":2}"),
    Some("-9223372036854775808"),
];

fn write_trace(db: &MemDb, id: &str, steps: usize) {
    db.exec(
        "INSERT INTO traces (id, gateway_id, started_at, ended_at, model, status) VALUES (?, 'gw_a', 1000, NULL, 'm\u{e5}', 'ok')",
        &[id.into()],
    )
    .unwrap();
    for seq in 0..steps {
        let name = ["llm.call", "tool \"q\"\n", "r\u{e9}sum\u{e9}", "\u{1f}ctl"][seq % 4];
        let ended = if seq % 5 == 0 { Val::Null } else { Val::Int(1_012 + seq as i64) };
        db.exec(
            "INSERT INTO trace_steps (trace_id, seq, name, started_at, ended_at, data) VALUES (?, ?, ?, ?, ?, ?)",
            &[
                id.into(),
                Val::Int(seq as i64),
                name.into(),
                Val::Int(1_000 + seq as i64),
                ended,
                DATA[seq % DATA.len()].into(),
            ],
        )
        .unwrap();
    }
}

fn trace(db: &MemDb, id: &str) -> Trace {
    ledger::read(db, id).unwrap().unwrap()
}

/// The whole body through `StepPages` pages of `page` steps.
fn streamed(db: &dyn Db, tr: Trace, page: i64) -> String {
    let mut pages = StepPages::new(tr, page);
    let mut first = String::new();
    let more = pages.next(db, &mut first).unwrap();
    if !more {
        return first;
    }
    let mut rest = Vec::new();
    assert_eq!(
        drain(pages, db, WRITE_AT, |chunk| {
            rest.extend_from_slice(chunk);
            true
        }),
        Drained::Complete
    );
    first + std::str::from_utf8(&rest).unwrap()
}

#[test]
fn the_streamed_body_is_byte_identical_to_the_whole_document() {
    let db = db();
    for steps in [0, 1, 2, 3, 17, 18, 36, 100, 1_025] {
        let id = format!("trc_{steps}");
        write_trace(&db, &id, steps);
        let expected = reference_body(&db, &id);
        for page in [1, 2, 3, 18, PAGE, 10_000] {
            assert_eq!(streamed(&db, trace(&db, &id), page), expected, "{steps} steps, pages of {page}");
        }
    }
    // Not in seq order on disk, with gaps and a negative seq: read in seq order all the same.
    db.exec(
        "INSERT INTO traces (id, gateway_id, started_at, model, status) VALUES ('trc_gaps', 'gw_a', 1, 'm', 'ok')",
        &[],
    )
    .unwrap();
    for seq in [40, -3, 7, 1_000_000, 0, 8] {
        db.exec(
            "INSERT INTO trace_steps (trace_id, seq, name, started_at, data) VALUES ('trc_gaps', ?, 'n', ?, '{\"seq\":1}')",
            &[Val::Int(seq), Val::Int(seq)],
        )
        .unwrap();
    }
    let expected = reference_body(&db, "trc_gaps");
    assert!(expected.contains("\"step_count\":6"));
    for page in [1, 2, 4, 6, 7] {
        assert_eq!(streamed(&db, trace(&db, "trc_gaps"), page), expected, "pages of {page}");
    }
}

/// A `Db` that counts queries and the most rows one returned, and fails the `fail_at`th.
struct Watched<'a> {
    db: &'a dyn Db,
    queries: Cell<usize>,
    most_rows: Cell<usize>,
    fail_at: Option<usize>,
}

impl Db for Watched<'_> {
    fn query(&self, sql: &str, params: &[Val]) -> Result<Vec<Row>, DbError> {
        self.queries.set(self.queries.get() + 1);
        if self.fail_at == Some(self.queries.get()) {
            return Err(DbError("disk I/O error".into()));
        }
        let rows = self.db.query(sql, params)?;
        self.most_rows.set(self.most_rows.get().max(rows.len()));
        Ok(rows)
    }
}

fn watched(db: &dyn Db, fail_at: Option<usize>) -> Watched<'_> {
    Watched { db, queries: Cell::new(0), most_rows: Cell::new(0), fail_at }
}

#[test]
fn rows_held_at_once_are_one_page_whatever_the_trace_length() {
    let db = db();
    write_trace(&db, "trc_long", 5 * PAGE as usize + 3);
    let w = watched(&db, None);
    let body = streamed(&w, trace(&db, "trc_long"), PAGE);
    assert_eq!(body, reference_body(&db, "trc_long"));
    assert_eq!(w.most_rows.get(), PAGE as usize);
    assert_eq!(w.queries.get(), 6, "one query per page, the last one short");
    // A trace of exactly one page needs one more (empty) page to know it ended.
    write_trace(&db, "trc_one_page", PAGE as usize);
    let w = watched(&db, None);
    assert_eq!(streamed(&w, trace(&db, "trc_one_page"), PAGE), reference_body(&db, "trc_one_page"));
    assert_eq!(w.queries.get(), 2);
}

#[test]
fn a_page_that_fails_after_the_head_aborts_the_body() {
    let db = db();
    write_trace(&db, "trc_fail", 10 * 4);
    let whole = reference_body(&db, "trc_fail");
    // Page 1 is read before the answer exists: its failure is an ordinary error (a 500).
    let w = watched(&db, Some(1));
    assert!(StepPages::new(trace(&db, "trc_fail"), 4).next(&w, &mut String::new()).is_err());
    // Page 5 fails after the head and four pages went out.
    let w = watched(&db, Some(5));
    let mut pages = StepPages::new(trace(&db, "trc_fail"), 4);
    let mut sent = String::new();
    assert!(pages.next(&w, &mut sent).unwrap());
    let mut rest = Vec::new();
    let end = drain(pages, &w, 1, |chunk| {
        rest.extend_from_slice(chunk);
        true
    });
    assert_eq!(end, Drained::Failed(DbError("disk I/O error".into())));
    sent.push_str(std::str::from_utf8(&rest).unwrap());
    assert!(whole.starts_with(&sent), "what was sent is the body's start");
    assert_eq!(sent.matches("\"name\"").count(), 16, "four pages of four");
    assert!(serde_json::from_str::<Value>(&sent).is_err(), "never a well-formed short document");
    assert_eq!(w.queries.get(), 5, "nothing read after the failure");
    // A row the reader cannot take (a blob as data) fails the same way, mid-stream.
    db.exec("UPDATE trace_steps SET data = x'00ff' WHERE trace_id = 'trc_fail' AND seq = 30", &[]).unwrap();
    let mut pages = StepPages::new(trace(&db, "trc_fail"), 4);
    assert!(pages.next(&db, &mut String::new()).unwrap());
    assert!(matches!(drain(pages, &db, 1, |_| true), Drained::Failed(_)));
}

#[test]
fn a_client_that_leaves_stops_the_reads() {
    let db = db();
    write_trace(&db, "trc_gone", 40);
    let w = watched(&db, None);
    let mut pages = StepPages::new(trace(&db, "trc_gone"), 4);
    assert!(pages.next(&w, &mut String::new()).unwrap());
    let mut writes = 0;
    let end = drain(pages, &w, 1, |_| {
        writes += 1;
        writes < 2
    });
    assert_eq!(end, Drained::ClientGone);
    assert_eq!(w.queries.get(), 3, "the first page, then two: no read after the failed write");
}

#[test]
fn pages_are_gathered_into_writes_of_at_least_write_at_bytes() {
    let db = db();
    write_trace(&db, "trc_writes", 100);
    let mut pages = StepPages::new(trace(&db, "trc_writes"), 5);
    let mut body = String::new();
    assert!(pages.next(&db, &mut body).unwrap());
    let mut writes = Vec::new();
    assert_eq!(
        drain(pages, &db, 2_000, |chunk| {
            writes.push(chunk.to_vec());
            true
        }),
        Drained::Complete
    );
    let (last, full) = writes.split_last().unwrap();
    assert!(
        full.len() >= 2 && full.iter().all(|w| w.len() >= 2_000),
        "{:?}",
        writes.iter().map(Vec::len).collect::<Vec<_>>()
    );
    assert!(!last.is_empty());
    for w in &writes {
        body.push_str(std::str::from_utf8(w).unwrap());
    }
    assert_eq!(body, reference_body(&db, "trc_writes"));
}
