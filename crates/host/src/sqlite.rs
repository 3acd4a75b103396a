//! Spin SQLite databases (`spin:sqlite/sqlite@3.0.0`), backed by rusqlite with
//! a bundled SQLite, as Spin 4.0.2's in-process backend (`spin-sqlite-inproc`):
//!
//! - every `open` is a connection of its own, made at its first use, so a
//!   component's transaction is its own and never spans another request's;
//! - a database without a path is a fresh, empty in-memory database per `open`
//!   (Spin's "temporary in-memory database"): state that must outlive one
//!   request needs a file, in Spin and here alike;
//! - `ATTACH` of a file is refused; a result over 128 MiB is an error.

use std::cell::OnceCell;
use std::collections::{BTreeMap, HashMap};

use anyhow::{Context, Result};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::Connection;

use crate::runtime_config::StoreLocation;

/// Spin's `MAX_HOST_BUFFERED_BYTES`: the most a query result may hold.
const MAX_RESULT_BYTES: usize = 128 << 20;

/// A value crossing the interface, mirroring the WIT `value` variant.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
    Null,
}

impl SqlValue {
    /// What Spin counts against the result limit for one value.
    fn memory_size(&self) -> usize {
        std::mem::size_of::<Self>()
            + match self {
                SqlValue::Text(t) => t.len(),
                SqlValue::Blob(b) => b.len(),
                _ => 0,
            }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct QueryResult {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<SqlValue>>,
}

/// The configured databases by label.
#[derive(Clone, Default)]
pub struct SqliteDatabases {
    by_label: HashMap<String, StoreLocation>,
}

impl SqliteDatabases {
    /// Creates each file's directory at start-up, as Spin does.
    pub fn open(locations: &BTreeMap<String, StoreLocation>) -> Result<Self> {
        for location in locations.values() {
            if let StoreLocation::File(path) = location {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
                }
            }
        }
        Ok(Self { by_label: locations.clone().into_iter().collect() })
    }

    /// A new connection to `label` (opened when first used).
    pub fn connect(&self, label: &str) -> Option<SqliteConnection> {
        self.by_label.get(label).map(|location| SqliteConnection {
            location: location.clone(),
            conn: OnceCell::new(),
            last_insert_rowid: 0,
            changes: 0,
            // rusqlite opens a connection with its 5 s busy timeout.
            waits: true,
        })
    }
}

/// rusqlite's default wait for another connection's lock, which Spin keeps.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Why [`SqliteConnection::try_execute`] did not run a statement.
#[derive(Debug, PartialEq)]
pub enum TryError {
    /// Another connection holds a lock the statement needs.
    Busy,
    Failed(String),
}

enum RunError {
    Sqlite(rusqlite::Error),
    Other(String),
}

impl From<rusqlite::Error> for RunError {
    fn from(e: rusqlite::Error) -> Self {
        RunError::Sqlite(e)
    }
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Sqlite(e) => e.fmt(f),
            RunError::Other(e) => f.write_str(e),
        }
    }
}

/// The guest's `connection` resource.
pub struct SqliteConnection {
    location: StoreLocation,
    conn: OnceCell<Connection>,
    last_insert_rowid: i64,
    changes: u64,
    /// Whether a busy lock is waited for (rusqlite's 5 s) or refused at once;
    /// changed only when the mode changes, not per statement.
    waits: bool,
}

impl SqliteConnection {
    fn connection(&self) -> Result<&Connection, String> {
        if let Some(conn) = self.conn.get() {
            return Ok(conn);
        }
        // rusqlite's own defaults, as in Spin (a busy file waits up to 5 s).
        let conn = match &self.location {
            StoreLocation::Memory => Connection::open_in_memory(),
            StoreLocation::File(path) => Connection::open(path),
        }
        .map_err(|e| e.to_string())?;
        conn.authorizer(Some(|ctx: rusqlite::hooks::AuthContext<'_>| {
            use rusqlite::hooks::{AuthAction, Authorization};
            match ctx.action {
                AuthAction::Attach { filename } if !matches!(filename, "" | ":memory:") => Authorization::Deny,
                _ => Authorization::Allow,
            }
        }));
        Ok(self.conn.get_or_init(|| conn))
    }

    /// Runs the first statement of `statement` with positional parameters.
    /// As in Spin (same rusqlite call), anything after the first statement is
    /// never executed, so a stacked-query injection cannot ride along. A lock
    /// held by another connection is waited for, up to rusqlite's 5 s.
    pub fn execute(&mut self, statement: &str, params: &[SqlValue]) -> Result<QueryResult, String> {
        self.wait_when_busy(true)?;
        self.run(statement, params).map_err(|e| e.to_string())
    }

    fn wait_when_busy(&mut self, waits: bool) -> Result<(), String> {
        if self.waits != waits {
            let timeout = if waits { BUSY_TIMEOUT } else { std::time::Duration::ZERO };
            self.connection()?.busy_timeout(timeout).map_err(|e| e.to_string())?;
            self.waits = waits;
        }
        Ok(())
    }

    /// [`Self::execute`], but `Busy` at once where it would wait for another
    /// connection's lock (nothing has run then: SQLite takes the locks a
    /// statement needs at its first step, and a busy `COMMIT` may be retried).
    pub fn try_execute(&mut self, statement: &str, params: &[SqlValue]) -> Result<QueryResult, TryError> {
        self.wait_when_busy(false).map_err(TryError::Failed)?;
        self.run(statement, params).map_err(|e| match e {
            RunError::Sqlite(rusqlite::Error::SqliteFailure(f, _)) if f.code == rusqlite::ErrorCode::DatabaseBusy => {
                TryError::Busy
            }
            e => TryError::Failed(e.to_string()),
        })
    }

    fn run(&mut self, statement: &str, params: &[SqlValue]) -> Result<QueryResult, RunError> {
        let conn = self.connection().map_err(RunError::Other)?;
        let mut stmt = conn.prepare_cached(statement)?;
        let columns: Vec<String> = stmt.column_names().into_iter().map(str::to_string).collect();
        let width = columns.len();
        let mut rows = Vec::new();
        let mut bytes = std::mem::size_of::<QueryResult>();
        {
            let mut result = stmt.query(rusqlite::params_from_iter(params.iter()))?;
            while let Some(row) = result.next()? {
                let mut values = Vec::with_capacity(width);
                for i in 0..width {
                    values.push(match row.get_ref(i)? {
                        ValueRef::Null => SqlValue::Null,
                        ValueRef::Integer(v) => SqlValue::Integer(v),
                        ValueRef::Real(v) => SqlValue::Real(v),
                        ValueRef::Text(t) => SqlValue::Text(String::from_utf8_lossy(t).into_owned()),
                        ValueRef::Blob(b) => SqlValue::Blob(b.to_vec()),
                    });
                }
                bytes += values.iter().map(SqlValue::memory_size).sum::<usize>();
                if bytes > MAX_RESULT_BYTES {
                    return Err(RunError::Other(format!("query result exceeds limit of {MAX_RESULT_BYTES} bytes")));
                }
                rows.push(values);
            }
        }
        drop(stmt);
        let (rowid, changes) = (conn.last_insert_rowid(), conn.changes());
        (self.last_insert_rowid, self.changes) = (rowid, changes);
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
    fn a_statement_that_would_wait_for_a_lock_is_busy_without_waiting_and_runs_once_it_is_free() {
        let dir = tempfile::tempdir().unwrap();
        let databases = SqliteDatabases::open(&BTreeMap::from([(
            "default".to_string(),
            StoreLocation::File(dir.path().join("db")),
        )]))
        .unwrap();
        let (mut a, mut b) = (databases.connect("default").unwrap(), databases.connect("default").unwrap());
        a.execute("CREATE TABLE t (x INTEGER)", &[]).unwrap();
        a.execute("BEGIN IMMEDIATE", &[]).unwrap();
        let started = std::time::Instant::now();
        assert_eq!(b.try_execute("INSERT INTO t VALUES (1)", &[]).unwrap_err(), TryError::Busy);
        assert!(started.elapsed() < std::time::Duration::from_millis(500), "it did not wait");
        a.execute("COMMIT", &[]).unwrap();
        // Free again, and the busy timeout is back for the waiting path.
        b.try_execute("INSERT INTO t VALUES (1)", &[]).unwrap();
        assert_eq!(b.execute("SELECT COUNT(*) FROM t", &[]).unwrap().rows, vec![vec![SqlValue::Integer(1)]]);
        a.execute("BEGIN IMMEDIATE", &[]).unwrap();
        let waiter = std::thread::spawn(move || b.execute("INSERT INTO t VALUES (2)", &[]).map(|_| ()));
        std::thread::sleep(std::time::Duration::from_millis(100));
        a.execute("COMMIT", &[]).unwrap();
        waiter.join().unwrap().unwrap();
        assert_eq!(a.execute("SELECT COUNT(*) FROM t", &[]).unwrap().rows, vec![vec![SqlValue::Integer(2)]]);
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
        let r = c
            .execute(
                "SELECT id, name, score, raw, NULL AS empty FROM t WHERE name = ?",
                &[SqlValue::Text("o'neil; DROP TABLE t".into())],
            )
            .unwrap();
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

    #[test]
    fn each_open_is_its_own_connection_and_memory_databases_start_empty() {
        let mut a = db();
        a.execute("CREATE TABLE t (x)", &[]).unwrap();
        let mut b = db();
        assert!(
            b.execute("SELECT * FROM t", &[]).unwrap_err().contains("no such table"),
            "as Spin: a fresh in-memory database"
        );

        let dir = tempfile::tempdir().unwrap();
        let dbs = SqliteDatabases::open(&BTreeMap::from([(
            "default".to_string(),
            StoreLocation::File(dir.path().join("x/db.sqlite")),
        )]))
        .unwrap();
        let (mut one, mut two) = (dbs.connect("default").unwrap(), dbs.connect("default").unwrap());
        one.execute("CREATE TABLE t (x)", &[]).unwrap();
        one.execute("BEGIN", &[]).unwrap();
        one.execute("INSERT INTO t VALUES (1)", &[]).unwrap();
        assert_eq!(
            two.execute("SELECT count(*) FROM t", &[]).unwrap().rows,
            vec![vec![SqlValue::Integer(0)]],
            "uncommitted work is the connection's own"
        );
        one.execute("COMMIT", &[]).unwrap();
        assert_eq!(two.execute("SELECT count(*) FROM t", &[]).unwrap().rows, vec![vec![SqlValue::Integer(1)]]);
    }

    #[test]
    fn attaching_a_file_is_refused_as_in_spin() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("other.db").display().to_string();
        let mut c = db();
        assert!(c.execute(&format!("ATTACH DATABASE '{file}' AS other"), &[]).is_err());
        c.execute("ATTACH DATABASE ':memory:' AS scratch", &[]).unwrap();
    }
}
