//! Traces: the simulator's inference endpoint writes them ([`start`], [`add_step`],
//! [`finish`]), the playground reads them ([`read`], [`steps`], [`list`]). Times are unix
//! milliseconds.

use crate::{Db, DbError, Row, Val};

/// The trace row, status `running`, before any step.
pub const INSERT: &str =
    "INSERT INTO traces (id, gateway_id, started_at, ended_at, model, status) VALUES (?, ?, ?, NULL, ?, 'running')";
pub const INSERT_STEP: &str =
    "INSERT INTO trace_steps (trace_id, seq, name, started_at, ended_at, data) VALUES (?, ?, ?, ?, ?, ?)";
pub const FINISH: &str = "UPDATE traces SET ended_at = ?, status = ? WHERE id = ?";

/// A trace with its gateway's slug and tenant: [`Trace`]'s columns.
pub const READ: &str =
    "SELECT tr.id, tr.gateway_id, tr.started_at, tr.ended_at, tr.model, tr.status, g.slug, g.tenant_id, t.slug
           FROM traces tr JOIN gateways g ON g.id = tr.gateway_id JOIN tenants t ON t.id = g.tenant_id
          WHERE tr.id = ?";
/// The first page of a trace's steps, in order: `seq`, then [`StoredStep`]'s columns.
pub const STEPS_FIRST: &str =
    "SELECT seq, name, started_at, ended_at, data FROM trace_steps WHERE trace_id = ? ORDER BY seq LIMIT ?";
/// The page after `seq = ?` (keyset paging on the primary key: each page is one index seek).
pub const STEPS_AFTER: &str =
    "SELECT seq, name, started_at, ended_at, data FROM trace_steps WHERE trace_id = ? AND seq > ? ORDER BY seq LIMIT ?";
/// A gateway's newest traces: [`Summary`]'s columns.
pub const LIST: &str =
    "SELECT id, started_at, model, status FROM traces WHERE gateway_id = ? ORDER BY started_at DESC, id LIMIT ?";

pub fn start(db: &dyn Db, trace_id: &str, gateway_id: &str, started_at_ms: i64, model: &str) -> Result<(), DbError> {
    db.exec(INSERT, &[trace_id.into(), gateway_id.into(), Val::Int(started_at_ms), model.into()])
}

/// One `trace_steps` row to insert.
#[derive(Debug, Clone, PartialEq)]
pub struct NewStep<'a> {
    pub trace_id: &'a str,
    pub seq: i64,
    pub name: &'a str,
    pub started_at_ms: i64,
    pub ended_at_ms: Option<i64>,
    /// A JSON document, as text.
    pub data: &'a str,
}

pub fn add_step(db: &dyn Db, s: &NewStep) -> Result<(), DbError> {
    db.exec(
        INSERT_STEP,
        &[
            s.trace_id.into(),
            Val::Int(s.seq),
            s.name.into(),
            Val::Int(s.started_at_ms),
            s.ended_at_ms.into(),
            s.data.into(),
        ],
    )
}

pub fn finish(db: &dyn Db, trace_id: &str, ended_at_ms: i64, status: &str) -> Result<(), DbError> {
    db.exec(FINISH, &[Val::Int(ended_at_ms), status.into(), trace_id.into()])
}

/// What [`READ`] finds.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    pub id: String,
    pub gateway_id: String,
    pub started_at_ms: Option<i64>,
    pub ended_at_ms: Option<i64>,
    pub model: String,
    pub status: String,
    pub gateway_slug: String,
    pub tenant_id: String,
    pub tenant_slug: String,
}

pub fn read(db: &dyn Db, trace_id: &str) -> Result<Option<Trace>, DbError> {
    let Some(row) = db.one(READ, &[trace_id.into()])? else { return Ok(None) };
    Ok(Some(Trace {
        id: row.text(0)?,
        gateway_id: row.text(1)?,
        started_at_ms: row.opt_int(2)?,
        ended_at_ms: row.opt_int(3)?,
        model: row.text(4)?,
        status: row.text(5)?,
        gateway_slug: row.text(6)?,
        tenant_id: row.text(7)?,
        tenant_slug: row.text(8)?,
    }))
}

/// One step of [`STEPS_FIRST`] / [`STEPS_AFTER`].
#[derive(Debug, Clone, PartialEq)]
pub struct StoredStep {
    /// Its position in the trace (what the next page starts after).
    pub seq: i64,
    pub name: String,
    pub started_at_ms: Option<i64>,
    pub ended_at_ms: Option<i64>,
    /// The stored text (a JSON document by contract, but not checked here).
    pub data: Option<String>,
}

/// At most `limit` of a trace's steps in `seq` order: the first ones, or those after
/// `after` (the last `seq` of the page before). A page shorter than `limit` is the last.
/// Rows held at once are bounded by `limit`, whatever the trace's length.
pub fn steps_page(db: &dyn Db, trace_id: &str, after: Option<i64>, limit: i64) -> Result<Vec<StoredStep>, DbError> {
    let rows = match after {
        None => db.query(STEPS_FIRST, &[trace_id.into(), Val::Int(limit)])?,
        Some(seq) => db.query(STEPS_AFTER, &[trace_id.into(), Val::Int(seq), Val::Int(limit)])?,
    };
    rows.into_iter()
        .map(|mut r: Row| {
            Ok(StoredStep {
                seq: r.int(0)?,
                name: r.take_text(1)?,
                started_at_ms: r.opt_int(2)?,
                ended_at_ms: r.opt_int(3)?,
                data: r.take_opt_text(4)?,
            })
        })
        .collect()
}

/// One row of [`LIST`].
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub id: String,
    pub started_at_ms: Option<i64>,
    pub model: String,
    pub status: String,
}

pub fn list(db: &dyn Db, gateway_id: &str, limit: i64) -> Result<Vec<Summary>, DbError> {
    db.query(LIST, &[gateway_id.into(), Val::Int(limit)])?
        .iter()
        .map(|r| Ok(Summary { id: r.text(0)?, started_at_ms: r.opt_int(1)?, model: r.text(2)?, status: r.text(3)? }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MemDb;

    #[test]
    fn what_the_simulator_writes_the_playground_reads() {
        let db = MemDb::with_shared_tables();
        db.exec("INSERT INTO tenants (id, slug) VALUES ('ten_acme', 'acme')", &[]).unwrap();
        db.exec("INSERT INTO gateways (id, tenant_id, slug) VALUES ('gw_main', 'ten_acme', 'main')", &[]).unwrap();
        start(&db, "trc_1", "gw_main", 1_000, "m1").unwrap();
        start(&db, "trc_2", "gw_main", 2_000, "m2").unwrap();
        for (seq, name) in [(1, "route"), (0, "auth")] {
            let step = NewStep {
                trace_id: "trc_1",
                seq,
                name,
                started_at_ms: 1_000 + seq,
                ended_at_ms: Some(1_001 + seq),
                data: "{\"text\":\"it's \\\"quoted\\\"\"}",
            };
            add_step(&db, &step).unwrap();
        }
        let running = read(&db, "trc_1").unwrap().unwrap();
        assert_eq!((running.status.as_str(), running.ended_at_ms), ("running", None));
        finish(&db, "trc_1", 1_900, "ok").unwrap();
        assert_eq!(
            read(&db, "trc_1").unwrap().unwrap(),
            Trace {
                id: "trc_1".into(),
                gateway_id: "gw_main".into(),
                started_at_ms: Some(1_000),
                ended_at_ms: Some(1_900),
                model: "m1".into(),
                status: "ok".into(),
                gateway_slug: "main".into(),
                tenant_id: "ten_acme".into(),
                tenant_slug: "acme".into(),
            }
        );
        let names: Vec<_> = steps_page(&db, "trc_1", None, 10).unwrap().into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["auth", "route"], "in seq order");
        assert_eq!(
            steps_page(&db, "trc_1", None, 10).unwrap()[1].data.as_deref(),
            Some("{\"text\":\"it's \\\"quoted\\\"\"}")
        );
        let ids: Vec<_> = list(&db, "gw_main", 10).unwrap().into_iter().map(|s| s.id).collect();
        assert_eq!(ids, ["trc_2", "trc_1"], "newest first");
        assert_eq!(list(&db, "gw_main", 1).unwrap().len(), 1);
        assert_eq!(read(&db, "trc_none").unwrap(), None);
        // Paged: a page of `limit` rows, then the rest after its last seq.
        let first = steps_page(&db, "trc_1", None, 1).unwrap();
        assert_eq!((first.len(), first[0].seq, first[0].name.as_str()), (1, 0, "auth"));
        let rest = steps_page(&db, "trc_1", Some(0), 1).unwrap();
        assert_eq!((rest.len(), rest[0].seq, rest[0].name.as_str()), (1, 1, "route"));
        assert!(steps_page(&db, "trc_1", Some(1), 1).unwrap().is_empty());
        assert!(steps_page(&db, "trc_none", None, 10).unwrap().is_empty());
        // A duplicate seq fails on the primary key.
        let dup = NewStep { trace_id: "trc_1", seq: 0, name: "auth", started_at_ms: 0, ended_at_ms: None, data: "{}" };
        assert!(add_step(&db, &dup).is_err());
    }
}
