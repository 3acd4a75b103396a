//! A rusqlite-backed [`Db`] with Spin's semantics (only the first statement of a text
//! runs), for native tests; and the shared tables as the playground's migration creates them.

use crate::db::{Db, DbError, Row, Val};
use rusqlite::types::{ToSqlOutput, ValueRef};
use std::sync::Mutex;

pub struct MemDb(pub Mutex<rusqlite::Connection>);

impl Default for MemDb {
    fn default() -> Self {
        Self::new()
    }
}

impl MemDb {
    pub fn new() -> Self {
        MemDb(Mutex::new(rusqlite::Connection::open_in_memory().unwrap()))
    }

    pub fn file(path: &std::path::Path) -> Self {
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
        MemDb(Mutex::new(conn))
    }

    /// `tenants` and `gateways` with the columns the token lookup and the trace reads join
    /// on (the playground's migration 1 owns their full definition), then [`crate::TABLES`].
    pub fn with_shared_tables() -> Self {
        let db = Self::new();
        for sql in [
            "CREATE TABLE tenants (id TEXT PRIMARY KEY, slug TEXT NOT NULL UNIQUE)",
            "CREATE TABLE gateways (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id),
                slug TEXT NOT NULL, UNIQUE (tenant_id, slug))",
        ]
        .iter()
        .chain(crate::TABLES)
        {
            db.exec(sql, &[]).unwrap();
        }
        db
    }
}

impl rusqlite::ToSql for Val {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Val::Int(v) => ToSqlOutput::Borrowed(ValueRef::Integer(*v)),
            Val::Real(v) => ToSqlOutput::Borrowed(ValueRef::Real(*v)),
            Val::Text(t) => ToSqlOutput::Borrowed(ValueRef::Text(t.as_bytes())),
            Val::Blob(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
            Val::Null => ToSqlOutput::Borrowed(ValueRef::Null),
        })
    }
}

impl Db for MemDb {
    fn query(&self, sql: &str, params: &[Val]) -> Result<Vec<Row>, DbError> {
        let conn = self.0.lock().unwrap();
        let mut stmt = conn.prepare(sql).map_err(|e| DbError(e.to_string()))?;
        let width = stmt.column_count();
        let mut rows = stmt.query(rusqlite::params_from_iter(params.iter())).map_err(|e| DbError(e.to_string()))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(|e| DbError(e.to_string()))? {
            let mut values = Vec::with_capacity(width);
            for i in 0..width {
                values.push(match row.get_ref(i).map_err(|e| DbError(e.to_string()))? {
                    ValueRef::Null => Val::Null,
                    ValueRef::Integer(v) => Val::Int(v),
                    ValueRef::Real(v) => Val::Real(v),
                    ValueRef::Text(t) => Val::Text(String::from_utf8_lossy(t).into_owned()),
                    ValueRef::Blob(b) => Val::Blob(b.to_vec()),
                });
            }
            out.push(Row(values));
        }
        Ok(out)
    }
}
