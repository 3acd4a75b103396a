//! [`Db`] over Spin SQLite: the one adapter the playground and the simulator
//! open the shared database with.

use spin_sdk::sqlite3;

use crate::db::{Db, DbError, Row, Val};

pub struct SpinDb(sqlite3::Connection);

impl SpinDb {
    /// Opens the database `label`: a connection of this request's own (a
    /// writer waits up to 5 s for another's lock, rusqlite's default in Spin
    /// and in the repo's host).
    pub fn open(label: &str) -> Result<SpinDb, DbError> {
        sqlite3::Connection::open(label).map(SpinDb).map_err(|e| DbError(format!("{e:?}")))
    }
}

fn to_spin(v: &Val) -> sqlite3::Value {
    match v.clone() {
        Val::Null => sqlite3::Value::Null,
        Val::Int(i) => sqlite3::Value::Integer(i),
        Val::Real(r) => sqlite3::Value::Real(r),
        Val::Text(t) => sqlite3::Value::Text(t),
        Val::Blob(b) => sqlite3::Value::Blob(b),
    }
}

fn from_spin(v: sqlite3::Value) -> Val {
    match v {
        sqlite3::Value::Null => Val::Null,
        sqlite3::Value::Integer(i) => Val::Int(i),
        sqlite3::Value::Real(r) => Val::Real(r),
        sqlite3::Value::Text(t) => Val::Text(t),
        sqlite3::Value::Blob(b) => Val::Blob(b),
    }
}

impl Db for SpinDb {
    fn query(&self, sql: &str, params: &[Val]) -> Result<Vec<Row>, DbError> {
        let params: Vec<sqlite3::Value> = params.iter().map(to_spin).collect();
        let result = self.0.execute(sql, &params).map_err(|e| DbError(format!("{e:?}")))?;
        Ok(result.rows.into_iter().map(|row| Row(row.values.into_iter().map(from_spin).collect())).collect())
    }
}
