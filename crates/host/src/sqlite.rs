//! Spin SQLite databases (`spin:sqlite/sqlite@3.0.0`), backed by rusqlite with
//! a bundled SQLite, one shared connection per configured database.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::Connection;

use crate::runtime_config::StoreLocation;

/// A value crossing the interface, mirroring the WIT `value` variant.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
    Null,
}

#[derive(Debug, Clone, PartialEq)]
pub struct QueryResult {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<SqlValue>>,
}

/// All configured databases, opened once at start-up.
#[derive(Clone, Default)]
pub struct SqliteDatabases {
    by_label: HashMap<String, Arc<Mutex<Connection>>>,
}

impl SqliteDatabases {
    pub fn open(locations: &BTreeMap<String, StoreLocation>) -> Result<Self> {
        let mut by_label = HashMap::new();
        for (label, location) in locations {
            let conn = match location {
                StoreLocation::Memory => Connection::open_in_memory()?,
                StoreLocation::File(path) => {
                    if let Some(dir) = path.parent() {
                        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
                    }
                    Connection::open(path).with_context(|| format!("opening {}", path.display()))?
                }
            };
            // Concurrent requests share the connection; a busy file waits briefly instead of failing.
            conn.busy_timeout(std::time::Duration::from_secs(5))?;
            by_label.insert(label.clone(), Arc::new(Mutex::new(conn)));
        }
        Ok(Self { by_label })
    }

    pub fn connect(&self, label: &str) -> Option<SqliteConnection> {
        self.by_label
            .get(label)
            .map(|conn| SqliteConnection { conn: conn.clone(), last_insert_rowid: 0, changes: 0 })
    }
}

/// The guest's `connection` resource.
pub struct SqliteConnection {
    conn: Arc<Mutex<Connection>>,
    last_insert_rowid: i64,
    changes: u64,
}

impl SqliteConnection {
    /// Runs the first statement of `statement` with positional parameters.
    /// As in Spin (same rusqlite call), anything after the first statement is
    /// never executed, so a stacked-query injection cannot ride along.
    pub fn execute(&mut self, statement: &str, params: &[SqlValue]) -> Result<QueryResult, String> {
        let conn = self.conn.lock().map_err(|_| "database lock poisoned".to_string())?;
        let mut stmt = conn.prepare_cached(statement).map_err(|e| e.to_string())?;
        let columns: Vec<String> = stmt.column_names().into_iter().map(str::to_string).collect();
        let width = columns.len();
        let mut rows = Vec::new();
        {
            let mut result = stmt
                .query(rusqlite::params_from_iter(params.iter()))
                .map_err(|e| e.to_string())?;
            while let Some(row) = result.next().map_err(|e| e.to_string())? {
                let mut values = Vec::with_capacity(width);
                for i in 0..width {
                    values.push(match row.get_ref(i).map_err(|e| e.to_string())? {
                        ValueRef::Null => SqlValue::Null,
                        ValueRef::Integer(v) => SqlValue::Integer(v),
                        ValueRef::Real(v) => SqlValue::Real(v),
                        ValueRef::Text(t) => SqlValue::Text(String::from_utf8_lossy(t).into_owned()),
                        ValueRef::Blob(b) => SqlValue::Blob(b.to_vec()),
                    });
                }
                rows.push(values);
            }
        }
        self.last_insert_rowid = conn.last_insert_rowid();
        self.changes = conn.changes();
        Ok(QueryResult { columns, rows })
    }

    pub fn last_insert_rowid(&self) -> i64 {
        self.last_insert_rowid
    }

    pub fn changes(&self) -> u64 {
        self.changes
    }
}

impl rusqlite::ToSql for SqlValue {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            SqlValue::Integer(v) => ToSqlOutput::Borrowed(ValueRef::Integer(*v)),
            SqlValue::Real(v) => ToSqlOutput::Borrowed(ValueRef::Real(*v)),
            SqlValue::Text(t) => ToSqlOutput::Borrowed(ValueRef::Text(t.as_bytes())),
            SqlValue::Blob(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
            SqlValue::Null => ToSqlOutput::Borrowed(ValueRef::Null),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> SqliteConnection {
        SqliteDatabases::open(&BTreeMap::from([("default".to_string(), StoreLocation::Memory)]))
            .unwrap()
            .connect("default")
            .unwrap()
    }

    #[test]
    fn statements_bind_values_and_report_rows_changes_and_rowids() {
        let mut c = db();
        c.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, score REAL, raw BLOB)", &[]).unwrap();
        c.execute(
            "INSERT INTO t (name, score, raw) VALUES (?, ?, ?)",
            &[SqlValue::Text("o'neil; DROP TABLE t".into()), SqlValue::Real(1.5), SqlValue::Blob(vec![0, 1])],
        )
        .unwrap();
        assert_eq!((c.last_insert_rowid(), c.changes()), (1, 1));
        let r = c.execute("SELECT id, name, score, raw, NULL AS empty FROM t WHERE name = ?", &[SqlValue::Text("o'neil; DROP TABLE t".into())]).unwrap();
        assert_eq!(r.columns, ["id", "name", "score", "raw", "empty"]);
        assert_eq!(
            r.rows,
            vec![vec![
                SqlValue::Integer(1),
                SqlValue::Text("o'neil; DROP TABLE t".into()),
                SqlValue::Real(1.5),
                SqlValue::Blob(vec![0, 1]),
                SqlValue::Null
            ]]
        );
    }

    #[test]
    fn stacked_statements_never_run_and_unknown_labels_are_refused() {
        let mut c = db();
        c.execute("CREATE TABLE t (x)", &[]).unwrap();
        let _ = c.execute("SELECT 1; DROP TABLE t", &[]);
        assert!(c.execute("SELECT * FROM t", &[]).is_ok(), "the table survived");
        let dbs = SqliteDatabases::open(&BTreeMap::new()).unwrap();
        assert!(dbs.connect("default").is_none());
    }
}
