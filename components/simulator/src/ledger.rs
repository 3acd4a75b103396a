//! The Playground's tables, as the inference endpoint reads and writes them (Spin SQLite,
//! database `default`, shared with the `playground` component, whose
//! `components/playground/src/schema.rs` owns the schema and documents this contract):
//!
//! - reads `gateway_tokens` (`token_hash` = SHA-256 hex of the whole `myra_…` token,
//!   `gateway_id`, `kind`, `expires_at` in unix seconds, valid while `now < expires_at`)
//!   joined to `gateways` (`id`, `tenant_id`, `slug`) and `tenants` (`id`, `slug`);
//! - writes `traces` (`id`, `gateway_id`, `started_at`/`ended_at` in unix ms, `model`,
//!   `status` `running` → `ok` | `disconnected`) and `trace_steps` (`trace_id`, `seq` from
//!   0, `name`, `started_at`/`ended_at` ms, `data` JSON text). The trace row goes in first.
//!
//! One statement per call, values always bound as `?` parameters, no transactions (the host
//! shares one connection between concurrent requests). The simulator never creates or
//! migrates these tables: before the Playground has run its migrations, every token is
//! simply unknown (401 `invalid_token`).

use crate::inference::{InferenceError, Step};

/// A value crossing the SQLite interface.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlVal {
    Int(i64),
    Real(f64),
    Text(String),
    Null,
    Blob(Vec<u8>),
}

impl SqlVal {
    fn int(&self) -> Option<i64> {
        match self {
            SqlVal::Int(v) => Some(*v),
            SqlVal::Real(v) => Some(*v as i64),
            SqlVal::Text(t) => t.trim().parse().ok(),
            _ => None,
        }
    }

    fn text(&self) -> Option<&str> {
        match self {
            SqlVal::Text(t) => Some(t),
            _ => None,
        }
    }
}

pub trait Sql {
    /// Runs one statement; the rows (none for writes) or SQLite's message.
    fn query(&self, sql: &str, params: &[SqlVal]) -> Result<Vec<Vec<SqlVal>>, String>;
}

pub const TOKEN_LOOKUP: &str = "SELECT t.expires_at, t.kind, g.id, g.slug, te.slug \
     FROM gateway_tokens t JOIN gateways g ON g.id = t.gateway_id \
     JOIN tenants te ON te.id = g.tenant_id \
     WHERE t.token_hash = ?";

/// A token that may call this gateway.
#[derive(Debug, Clone, PartialEq)]
pub struct Grant {
    pub gateway_id: String,
    pub kind: String,
    pub expires_at_s: i64,
}

/// Checks the token (by its hash) against the tenant/gateway slugs of the URL at `now_s`.
/// Unknown, or bound to another gateway: `InvalidToken` (whether or not it has expired, so
/// nothing is said about other gateways' tokens). This gateway's but lapsed: `TokenExpired`.
pub fn authorize(
    db: &dyn Sql,
    token_hash: &str,
    tenant_slug: &str,
    gateway_slug: &str,
    now_s: i64,
) -> Result<Grant, InferenceError> {
    const UNKNOWN: InferenceError = InferenceError::InvalidToken("unknown gateway token");
    let rows = match db.query(TOKEN_LOOKUP, &[SqlVal::Text(token_hash.to_owned())]) {
        Ok(rows) => rows,
        // The Playground has not created its tables yet: no token exists.
        Err(e) if e.contains("no such table") => return Err(UNKNOWN),
        Err(e) => {
            eprintln!("simulator: gateway token lookup failed: {e}");
            return Err(InferenceError::Internal);
        }
    };
    let Some(row) = rows.first() else {
        return Err(UNKNOWN);
    };
    let col = |i: usize| row.get(i).cloned().unwrap_or(SqlVal::Null);
    let (Some(expires_at_s), Some(gateway_id), Some(g_slug), Some(t_slug)) = (
        col(0).int(),
        col(2).text().map(str::to_owned),
        col(3).text().map(str::to_owned),
        col(4).text().map(str::to_owned),
    ) else {
        eprintln!("simulator: a gateway token row has an unexpected shape");
        return Err(InferenceError::Internal);
    };
    if t_slug != tenant_slug || g_slug != gateway_slug {
        return Err(InferenceError::InvalidToken("the token does not belong to this gateway"));
    }
    if expires_at_s <= now_s {
        return Err(InferenceError::TokenExpired);
    }
    Ok(Grant { gateway_id, kind: col(1).text().unwrap_or("playground").to_owned(), expires_at_s })
}

fn ms(v: u64) -> SqlVal {
    SqlVal::Int(v.min(i64::MAX as u64) as i64)
}

fn write(db: &dyn Sql, sql: &str, params: &[SqlVal]) -> Result<(), String> {
    db.query(sql, params).map(|_| ())
}

/// The trace row, status `running`, before any step.
pub fn start_trace(
    db: &dyn Sql,
    trace_id: &str,
    gateway_id: &str,
    started_at_ms: u64,
    model: &str,
) -> Result<(), String> {
    write(
        db,
        "INSERT INTO traces (id, gateway_id, started_at, ended_at, model, status) VALUES (?, ?, ?, NULL, ?, 'running')",
        &[
            SqlVal::Text(trace_id.to_owned()),
            SqlVal::Text(gateway_id.to_owned()),
            ms(started_at_ms),
            SqlVal::Text(model.to_owned()),
        ],
    )
}

pub fn add_step(db: &dyn Sql, trace_id: &str, seq: u32, step: &Step) -> Result<(), String> {
    write(
        db,
        "INSERT INTO trace_steps (trace_id, seq, name, started_at, ended_at, data) VALUES (?, ?, ?, ?, ?, ?)",
        &[
            SqlVal::Text(trace_id.to_owned()),
            SqlVal::Int(seq as i64),
            SqlVal::Text(step.name.to_owned()),
            ms(step.started_at_ms),
            ms(step.ended_at_ms),
            SqlVal::Text(step.data.to_string()),
        ],
    )
}

pub fn finish_trace(db: &dyn Sql, trace_id: &str, ended_at_ms: u64, status: &str) -> Result<(), String> {
    write(
        db,
        "UPDATE traces SET ended_at = ?, status = ? WHERE id = ?",
        &[ms(ended_at_ms), SqlVal::Text(status.to_owned()), SqlVal::Text(trace_id.to_owned())],
    )
}

/// Appends steps in order, numbering them from `next_seq`.
pub struct TraceWriter<'a> {
    pub db: &'a dyn Sql,
    pub trace_id: String,
    pub next_seq: u32,
}

impl TraceWriter<'_> {
    /// A failed write is logged and otherwise ignored: the reply matters more than its trace.
    pub fn step(&mut self, step: &Step) {
        if let Err(e) = add_step(self.db, &self.trace_id, self.next_seq, step) {
            eprintln!("simulator: could not record trace step {}: {e}", step.name);
        }
        self.next_seq += 1;
    }

    pub fn finish(&self, ended_at_ms: u64, status: &str) {
        if let Err(e) = finish_trace(self.db, &self.trace_id, ended_at_ms, status) {
            eprintln!("simulator: could not finish the trace: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inference::{token_hash, Step};
    use rusqlite::types::{ToSqlOutput, ValueRef};
    use serde_json::json;
    use std::sync::Mutex;

    /// The tables of the Playground contract the simulator touches, as its migration 1
    /// creates them (components/playground/src/schema.rs).
    const DDL: &[&str] = &[
        "CREATE TABLE tenants (id TEXT PRIMARY KEY, slug TEXT NOT NULL UNIQUE,
            playground_enabled INTEGER NOT NULL DEFAULT 1, eu_region_routing INTEGER NOT NULL DEFAULT 0)",
        "CREATE TABLE gateways (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id),
            slug TEXT NOT NULL, eu_region_routing INTEGER NOT NULL DEFAULT 0,
            web_search_provider TEXT, web_search_api_key TEXT, UNIQUE (tenant_id, slug))",
        "CREATE TABLE gateway_tokens (token_hash TEXT PRIMARY KEY, gateway_id TEXT NOT NULL REFERENCES gateways(id),
            scopes TEXT NOT NULL, kind TEXT NOT NULL, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,
            created_by TEXT)",
        "CREATE TABLE traces (id TEXT PRIMARY KEY, gateway_id TEXT NOT NULL REFERENCES gateways(id),
            started_at INTEGER NOT NULL, ended_at INTEGER, model TEXT NOT NULL DEFAULT '',
            status TEXT NOT NULL DEFAULT 'ok')",
        "CREATE TABLE trace_steps (trace_id TEXT NOT NULL REFERENCES traces(id), seq INTEGER NOT NULL,
            name TEXT NOT NULL, started_at INTEGER NOT NULL, ended_at INTEGER,
            data TEXT NOT NULL DEFAULT '{}', PRIMARY KEY (trace_id, seq))",
    ];

    struct MemDb(Mutex<rusqlite::Connection>);

    struct P<'a>(&'a SqlVal);

    impl rusqlite::ToSql for P<'_> {
        fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
            Ok(ToSqlOutput::Borrowed(match self.0 {
                SqlVal::Int(v) => ValueRef::Integer(*v),
                SqlVal::Real(v) => ValueRef::Real(*v),
                SqlVal::Text(t) => ValueRef::Text(t.as_bytes()),
                SqlVal::Blob(b) => ValueRef::Blob(b),
                SqlVal::Null => ValueRef::Null,
            }))
        }
    }

    impl Sql for MemDb {
        fn query(&self, sql: &str, params: &[SqlVal]) -> Result<Vec<Vec<SqlVal>>, String> {
            let conn = self.0.lock().unwrap();
            let mut stmt = conn.prepare(sql).map_err(|e| e.to_string())?;
            let width = stmt.column_count();
            let mut rows = stmt.query(rusqlite::params_from_iter(params.iter().map(P))).map_err(|e| e.to_string())?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(|e| e.to_string())? {
                out.push(
                    (0..width)
                        .map(|i| match row.get_ref(i).unwrap() {
                            ValueRef::Null => SqlVal::Null,
                            ValueRef::Integer(v) => SqlVal::Int(v),
                            ValueRef::Real(v) => SqlVal::Real(v),
                            ValueRef::Text(t) => SqlVal::Text(String::from_utf8_lossy(t).into_owned()),
                            ValueRef::Blob(b) => SqlVal::Blob(b.to_vec()),
                        })
                        .collect(),
                );
            }
            Ok(out)
        }
    }

    const T1: &str = "myra_1111111111111111111111111111111111111111111111111111111111111111";
    const T2: &str = "myra_2222222222222222222222222222222222222222222222222222222222222222";
    const NOW: i64 = 1_700_000_000;

    fn db() -> MemDb {
        let db = MemDb(Mutex::new(rusqlite::Connection::open_in_memory().unwrap()));
        for sql in DDL {
            db.query(sql, &[]).unwrap();
        }
        let run = |sql: &str| db.query(sql, &[]).unwrap();
        run("INSERT INTO tenants (id, slug) VALUES ('ten_acme', 'acme'), ('ten_euco', 'euco')");
        run("INSERT INTO gateways (id, tenant_id, slug) VALUES ('gw_main', 'ten_acme', 'main'), ('gw_second', 'ten_acme', 'second'), ('gw_eu', 'ten_euco', 'main')");
        for (token, gw, exp) in [(T1, "gw_main", NOW + 1800), (T2, "gw_second", NOW - 1)] {
            db.query(
                "INSERT INTO gateway_tokens (token_hash, gateway_id, scopes, kind, created_at, expires_at) VALUES (?, ?, '[\"playground\"]', 'playground', ?, ?)",
                &[SqlVal::Text(token_hash(token)), SqlVal::Text(gw.into()), SqlVal::Int(exp - 1800), SqlVal::Int(exp)],
            )
            .unwrap();
        }
        db
    }

    #[test]
    fn a_valid_token_for_its_own_gateway_is_granted() {
        let db = db();
        let grant = authorize(&db, &token_hash(T1), "acme", "main", NOW).unwrap();
        assert_eq!(grant, Grant { gateway_id: "gw_main".into(), kind: "playground".into(), expires_at_s: NOW + 1800 });
        // Valid while now < expires_at.
        assert!(authorize(&db, &token_hash(T1), "acme", "main", NOW + 1799).is_ok());
        assert_eq!(authorize(&db, &token_hash(T1), "acme", "main", NOW + 1800), Err(InferenceError::TokenExpired));
    }

    #[test]
    fn unknown_wrong_gateway_and_expired_tokens_are_refused() {
        let db = db();
        let invalid = |r: Result<Grant, InferenceError>| matches!(r, Err(InferenceError::InvalidToken(_)));
        assert!(invalid(authorize(&db, &token_hash("myra_nope"), "acme", "main", NOW)));
        // Another gateway of the same tenant, the same gateway slug of another tenant.
        assert!(invalid(authorize(&db, &token_hash(T1), "acme", "second", NOW)));
        assert!(invalid(authorize(&db, &token_hash(T1), "euco", "main", NOW)));
        // The raw token is not the key: only its hash is.
        assert!(invalid(authorize(&db, T1, "acme", "main", NOW)));
        // Expired on its own gateway; on another gateway it says nothing about expiry.
        assert_eq!(authorize(&db, &token_hash(T2), "acme", "second", NOW), Err(InferenceError::TokenExpired));
        assert!(invalid(authorize(&db, &token_hash(T2), "acme", "main", NOW)));
        // Injection-shaped slugs and hashes are only ever compared.
        assert!(invalid(authorize(&db, "' OR 1=1 --", "acme", "main", NOW)));
        assert!(invalid(authorize(&db, &token_hash(T1), "acme' --", "main", NOW)));
    }

    #[test]
    fn before_the_playground_migrates_every_token_is_unknown() {
        let empty = MemDb(Mutex::new(rusqlite::Connection::open_in_memory().unwrap()));
        assert!(matches!(
            authorize(&empty, &token_hash(T1), "acme", "main", NOW),
            Err(InferenceError::InvalidToken(_))
        ));
    }

    #[test]
    fn a_trace_and_its_ordered_steps_are_written() {
        let db = db();
        start_trace(&db, "tr_1", "gw_main", 1_000, "m1").unwrap();
        let mut w = TraceWriter { db: &db, trace_id: "tr_1".into(), next_seq: 0 };
        for (name, at) in
            [("auth", 1_000u64), ("route", 1_002), ("model.request", 1_003), ("stream", 1_010), ("complete", 1_900)]
        {
            w.step(&Step {
                name,
                started_at_ms: at,
                ended_at_ms: at + 1,
                data: json!({"name": name, "text": "it's \"quoted\""}),
            });
        }
        let running = db.query("SELECT status, ended_at, model FROM traces WHERE id = 'tr_1'", &[]).unwrap();
        assert_eq!(running[0], vec![SqlVal::Text("running".into()), SqlVal::Null, SqlVal::Text("m1".into())]);
        w.finish(1_901, "ok");
        let trace =
            db.query("SELECT gateway_id, started_at, ended_at, status FROM traces WHERE id = 'tr_1'", &[]).unwrap();
        assert_eq!(
            trace[0],
            vec![SqlVal::Text("gw_main".into()), SqlVal::Int(1_000), SqlVal::Int(1_901), SqlVal::Text("ok".into())]
        );
        let steps = db
            .query(
                "SELECT seq, name, started_at, ended_at, data FROM trace_steps WHERE trace_id = 'tr_1' ORDER BY seq",
                &[],
            )
            .unwrap();
        let names: Vec<_> = steps.iter().map(|r| r[1].clone()).collect();
        assert_eq!(names, ["auth", "route", "model.request", "stream", "complete"].map(|n| SqlVal::Text(n.into())));
        assert_eq!(steps[4][0], SqlVal::Int(4));
        assert_eq!(steps[3][2], SqlVal::Int(1_010));
        let SqlVal::Text(data) = &steps[0][4] else { panic!() };
        assert_eq!(serde_json::from_str::<serde_json::Value>(data).unwrap()["text"], "it's \"quoted\"");
        // A duplicate seq fails on the primary key and is only logged.
        w.next_seq = 0;
        w.step(&Step { name: "auth", started_at_ms: 0, ended_at_ms: 0, data: json!({}) });
        assert_eq!(db.query("SELECT COUNT(*) FROM trace_steps", &[]).unwrap()[0][0], SqlVal::Int(5));
    }
}
