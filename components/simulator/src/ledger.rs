//! The inference endpoint's side of the Playground's tables (Spin SQLite, database
//! `default`, shared with the `playground` component, whose migrations create them): it
//! reads `gateway_tokens` (joined to `gateways` and `tenants`) and writes `traces` and
//! `trace_steps`. The token hash, every statement, the row types and the [`Db`]
//! abstraction are `gateway-ledger`'s, the same definitions the playground mints and reads
//! with; here is only what the simulator decides: which refusal a lookup gives, and that a
//! failed trace write is logged, never fatal.
//!
//! One statement per call, values always bound as `?` parameters; every write stands on its
//! own (a trace and its steps need no transaction: a reader sees the steps written so
//! far). The simulator never creates or
//! migrates these tables: before the Playground has run its migrations, every token is
//! simply unknown (401 `invalid_token`).

use crate::inference::{InferenceError, Step};
pub use gateway_ledger::tokens::Grant;
use gateway_ledger::{tokens, traces};
pub use gateway_ledger::{Db, DbError, Row, Val};

/// Checks the token (by its hash) against the tenant/gateway slugs of the URL at `now_s`.
/// Unknown, or bound to another gateway: `InvalidToken` (whether or not it has expired, so
/// nothing is said about other gateways' tokens). This gateway's but lapsed: `TokenExpired`.
pub fn authorize(
    db: &dyn Db,
    token_hash: &str,
    tenant_slug: &str,
    gateway_slug: &str,
    now_s: i64,
) -> Result<Grant, InferenceError> {
    const UNKNOWN: InferenceError = InferenceError::InvalidToken("unknown gateway token");
    let grant = match tokens::lookup(db, token_hash) {
        Ok(Some(grant)) => grant,
        Ok(None) => return Err(UNKNOWN),
        // The Playground has not created its tables yet: no token exists.
        Err(e) if e.0.contains("no such table") => return Err(UNKNOWN),
        Err(e) => {
            eprintln!("simulator: gateway token lookup failed: {e}");
            return Err(InferenceError::Internal);
        }
    };
    if grant.tenant_slug != tenant_slug || grant.gateway_slug != gateway_slug {
        return Err(InferenceError::InvalidToken("the token does not belong to this gateway"));
    }
    if !grant.is_valid_at(now_s) {
        return Err(InferenceError::TokenExpired);
    }
    Ok(grant)
}

fn ms(v: u64) -> i64 {
    v.min(i64::MAX as u64) as i64
}

/// The trace row, status `running`, before any step.
pub fn start_trace(
    db: &dyn Db,
    trace_id: &str,
    gateway_id: &str,
    started_at_ms: u64,
    model: &str,
) -> Result<(), DbError> {
    traces::start(db, trace_id, gateway_id, ms(started_at_ms), model)
}

pub fn add_step(db: &dyn Db, trace_id: &str, seq: u32, step: &Step) -> Result<(), DbError> {
    let data = step.data.to_string();
    traces::add_step(
        db,
        &traces::NewStep {
            trace_id,
            seq: seq as i64,
            name: step.name,
            started_at_ms: ms(step.started_at_ms),
            ended_at_ms: Some(ms(step.ended_at_ms)),
            data: &data,
        },
    )
}

pub fn finish_trace(db: &dyn Db, trace_id: &str, ended_at_ms: u64, status: &str) -> Result<(), DbError> {
    traces::finish(db, trace_id, ms(ended_at_ms), status)
}

/// Appends steps in order, numbering them from `next_seq`.
pub struct TraceWriter<'a> {
    pub db: &'a dyn Db,
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
    use gateway_ledger::testing::MemDb;
    use serde_json::json;

    const T1: &str = "myra_1111111111111111111111111111111111111111111111111111111111111111";
    const T2: &str = "myra_2222222222222222222222222222222222222222222222222222222222222222";
    const NOW: i64 = 1_700_000_000;

    fn db() -> MemDb {
        let db = MemDb::with_shared_tables();
        let run = |sql: &str| db.query(sql, &[]).unwrap();
        run("INSERT INTO tenants (id, slug) VALUES ('ten_acme', 'acme'), ('ten_euco', 'euco')");
        run("INSERT INTO gateways (id, tenant_id, slug) VALUES ('gw_main', 'ten_acme', 'main'), ('gw_second', 'ten_acme', 'second'), ('gw_eu', 'ten_euco', 'main')");
        for (token, gw, exp) in [(T1, "gw_main", NOW + 1800), (T2, "gw_second", NOW - 1)] {
            db.query(
                "INSERT INTO gateway_tokens (token_hash, gateway_id, scopes, kind, created_at, expires_at) VALUES (?, ?, '[\"playground\"]', 'playground', ?, ?)",
                &[Val::Text(token_hash(token)), Val::Text(gw.into()), Val::Int(exp - 1800), Val::Int(exp)],
            )
            .unwrap();
        }
        db
    }

    #[test]
    fn a_valid_token_for_its_own_gateway_is_granted() {
        let db = db();
        let grant = authorize(&db, &token_hash(T1), "acme", "main", NOW).unwrap();
        assert_eq!(
            grant,
            Grant {
                gateway_id: "gw_main".into(),
                kind: "playground".into(),
                expires_at_s: NOW + 1800,
                gateway_slug: "main".into(),
                tenant_slug: "acme".into(),
            }
        );
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
        let empty = MemDb::new();
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
        assert_eq!(running[0].0, vec![Val::Text("running".into()), Val::Null, Val::Text("m1".into())]);
        w.finish(1_901, "ok");
        let trace =
            db.query("SELECT gateway_id, started_at, ended_at, status FROM traces WHERE id = 'tr_1'", &[]).unwrap();
        assert_eq!(
            trace[0].0,
            vec![Val::Text("gw_main".into()), Val::Int(1_000), Val::Int(1_901), Val::Text("ok".into())]
        );
        let steps = db
            .query(
                "SELECT seq, name, started_at, ended_at, data FROM trace_steps WHERE trace_id = 'tr_1' ORDER BY seq",
                &[],
            )
            .unwrap();
        let names: Vec<_> = steps.iter().map(|r| r.0[1].clone()).collect();
        assert_eq!(names, ["auth", "route", "model.request", "stream", "complete"].map(|n| Val::Text(n.into())));
        assert_eq!(steps[4].0[0], Val::Int(4));
        assert_eq!(steps[3].0[2], Val::Int(1_010));
        let Val::Text(data) = &steps[0].0[4] else { panic!() };
        assert_eq!(serde_json::from_str::<serde_json::Value>(data).unwrap()["text"], "it's \"quoted\"");
        // A duplicate seq fails on the primary key and is only logged.
        w.next_seq = 0;
        w.step(&Step { name: "auth", started_at_ms: 0, ended_at_ms: 0, data: json!({}) });
        assert_eq!(db.query("SELECT COUNT(*) FROM trace_steps", &[]).unwrap()[0].0[0], Val::Int(5));
    }
}
