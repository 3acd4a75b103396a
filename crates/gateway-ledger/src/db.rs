//! The one SQLite abstraction of both components: the playground implements [`Db`] on Spin
//! SQLite (`spin:sqlite@3.0.0`) for all its tables, the simulator for the shared ones, and
//! the native tests on rusqlite ([`crate::testing::MemDb`]).
//!
//! Rules every caller follows (Spin's host runs only the FIRST statement of a text, and
//! every `open` is a connection of its own, so concurrent requests race on the file):
//! - one statement per call, values always bound as `?` parameters, never formatted into
//!   the SQL text;
//! - every write is atomic on its own and idempotent where a race is possible
//!   (`INSERT OR IGNORE` on natural keys, `CREATE ... IF NOT EXISTS`).

use std::fmt;

/// A value crossing the interface (Spin's `value` variant).
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
    Null,
}

impl From<&str> for Val {
    fn from(v: &str) -> Self {
        Val::Text(v.to_string())
    }
}

impl From<String> for Val {
    fn from(v: String) -> Self {
        Val::Text(v)
    }
}

impl From<&String> for Val {
    fn from(v: &String) -> Self {
        Val::Text(v.clone())
    }
}

impl From<i64> for Val {
    fn from(v: i64) -> Self {
        Val::Int(v)
    }
}

impl From<bool> for Val {
    fn from(v: bool) -> Self {
        Val::Int(v as i64)
    }
}

impl<T: Into<Val>> From<Option<T>> for Val {
    fn from(v: Option<T>) -> Self {
        v.map_or(Val::Null, Into::into)
    }
}

/// A storage failure. The text is SQLite's own message (it never contains bound values);
/// it is logged, never sent to a client.
#[derive(Debug, Clone, PartialEq)]
pub struct DbError(pub String);

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DbError {}

/// The answer to a request whose storage failed: 500 `storage_error`, never SQLite's text.
#[cfg(feature = "envelope")]
impl From<DbError> for guest_http::ApiError {
    fn from(_: DbError) -> Self {
        guest_http::ApiError::new(500, "storage_error", "the Playground database could not answer")
    }
}

/// One result row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row(pub Vec<Val>);

impl Row {
    fn get(&self, i: usize) -> Result<&Val, DbError> {
        self.0.get(i).ok_or_else(|| DbError(format!("no column {i}")))
    }

    pub fn text(&self, i: usize) -> Result<String, DbError> {
        self.opt_text(i)?.ok_or_else(|| DbError(format!("column {i} is NULL")))
    }

    pub fn opt_text(&self, i: usize) -> Result<Option<String>, DbError> {
        match self.get(i)? {
            Val::Text(t) => Ok(Some(t.clone())),
            Val::Null => Ok(None),
            Val::Int(v) => Ok(Some(v.to_string())),
            other => Err(DbError(format!("column {i} is not text: {other:?}"))),
        }
    }

    /// [`Self::text`], moving the value out (the column reads NULL after).
    pub fn take_text(&mut self, i: usize) -> Result<String, DbError> {
        self.take_opt_text(i)?.ok_or_else(|| DbError(format!("column {i} is NULL")))
    }

    /// [`Self::opt_text`], moving the value out instead of copying it (the column reads
    /// NULL after): a page of long texts is not held twice.
    pub fn take_opt_text(&mut self, i: usize) -> Result<Option<String>, DbError> {
        if let Some(Val::Text(t)) = self.0.get_mut(i) {
            let t = std::mem::take(t);
            self.0[i] = Val::Null;
            return Ok(Some(t));
        }
        self.opt_text(i)
    }

    pub fn int(&self, i: usize) -> Result<i64, DbError> {
        self.opt_int(i)?.ok_or_else(|| DbError(format!("column {i} is NULL")))
    }

    pub fn opt_int(&self, i: usize) -> Result<Option<i64>, DbError> {
        match self.get(i)? {
            Val::Int(v) => Ok(Some(*v)),
            Val::Real(v) => Ok(Some(*v as i64)),
            Val::Null => Ok(None),
            Val::Text(t) => t.parse().map(Some).map_err(|_| DbError(format!("column {i} is not an integer"))),
            Val::Blob(_) => Err(DbError(format!("column {i} is a blob"))),
        }
    }

    pub fn flag(&self, i: usize) -> Result<bool, DbError> {
        Ok(self.opt_int(i)?.unwrap_or(0) != 0)
    }
}

pub trait Db {
    /// Runs one statement and returns its rows (none for writes).
    fn query(&self, sql: &str, params: &[Val]) -> Result<Vec<Row>, DbError>;

    fn exec(&self, sql: &str, params: &[Val]) -> Result<(), DbError> {
        self.query(sql, params).map(|_| ())
    }

    fn one(&self, sql: &str, params: &[Val]) -> Result<Option<Row>, DbError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }
}

/// Runs `work` in one transaction: one commit (one fsync of a file database)
/// for all its writes, and none of them if it fails. `BEGIN IMMEDIATE` takes
/// the write lock up front, so two concurrent writers queue on SQLite's busy
/// timeout instead of one failing at its first write.
pub fn transaction<T>(db: &dyn Db, work: impl FnOnce() -> Result<T, DbError>) -> Result<T, DbError> {
    db.exec("BEGIN IMMEDIATE", &[])?;
    match work() {
        Ok(value) => {
            if let Err(e) = db.exec("COMMIT", &[]) {
                let _ = db.exec("ROLLBACK", &[]);
                return Err(e);
            }
            Ok(value)
        }
        Err(e) => {
            let _ = db.exec("ROLLBACK", &[]);
            Err(e)
        }
    }
}
