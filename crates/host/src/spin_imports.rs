//! The Spin platform imports, bound from the WIT vendored in `wit/` (taken from
//! spin-sdk 5.2.0, so the guest and host agree on every signature).

use wasmtime::component::{HasData, Linker, Resource};

use crate::key_value::KeyValueStore;
use crate::state::RequestState;
use crate::variables::VariableError;

mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "ratatoskr:host/spin-imports",
        imports: { default: trappable },
        with: {
            "fermyon:spin/key-value.store": crate::key_value::KeyValueStore,
            "spin:sqlite/sqlite.connection": crate::sqlite::SqliteConnection,
        },
    });
}

use bindings::fermyon::spin::{key_value, variables};
use bindings::spin::sqlite::sqlite;

use crate::sqlite::{SqlValue, SqliteConnection, TryError};

/// Runs `work`, which may block, without stalling the other tasks of a
/// multi-threaded runtime's worker.
fn blocking<T>(work: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(work),
        _ => work(),
    }
}

/// The slice of per-request state the Spin imports need.
struct SpinImports;

impl HasData for SpinImports {
    type Data<'a> = &'a mut RequestState;
}

pub fn add_to_linker(linker: &mut Linker<RequestState>) -> anyhow::Result<()> {
    variables::add_to_linker::<RequestState, SpinImports>(linker, |s| s)?;
    key_value::add_to_linker::<RequestState, SpinImports>(linker, |s| s)?;
    sqlite::add_to_linker::<RequestState, SpinImports>(linker, |s| s)?;
    Ok(())
}

impl variables::Host for RequestState {
    fn get(&mut self, name: String) -> wasmtime::Result<Result<String, variables::Error>> {
        Ok(self.component.variables.get(&name).map_err(|e| match e {
            VariableError::InvalidName(m) => variables::Error::InvalidName(m),
            VariableError::Undefined(m) => variables::Error::Undefined(m),
        }))
    }
}

impl key_value::Host for RequestState {}

impl key_value::HostStore for RequestState {
    fn open(&mut self, label: String) -> wasmtime::Result<Result<Resource<KeyValueStore>, key_value::Error>> {
        // Spin: a label the component does not list is access-denied, even if it exists.
        if !self.component.key_value_stores.contains(&label) {
            return Ok(Err(key_value::Error::AccessDenied));
        }
        match self.app.key_value.get(&label) {
            Some(store) => Ok(Ok(self.table.push(store)?)),
            None => Ok(Err(key_value::Error::NoSuchStore)),
        }
    }

    fn get(
        &mut self,
        store: Resource<KeyValueStore>,
        key: String,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, key_value::Error>> {
        Ok(self.table.get(&store)?.get(&key).map_err(key_value::Error::Other))
    }

    fn set(
        &mut self,
        store: Resource<KeyValueStore>,
        key: String,
        value: Vec<u8>,
    ) -> wasmtime::Result<Result<(), key_value::Error>> {
        Ok(self.table.get(&store)?.set(&key, &value).map_err(key_value::Error::Other))
    }

    fn delete(
        &mut self,
        store: Resource<KeyValueStore>,
        key: String,
    ) -> wasmtime::Result<Result<(), key_value::Error>> {
        Ok(self.table.get(&store)?.delete(&key).map_err(key_value::Error::Other))
    }

    fn exists(
        &mut self,
        store: Resource<KeyValueStore>,
        key: String,
    ) -> wasmtime::Result<Result<bool, key_value::Error>> {
        Ok(self.table.get(&store)?.exists(&key).map_err(key_value::Error::Other))
    }

    fn get_keys(&mut self, store: Resource<KeyValueStore>) -> wasmtime::Result<Result<Vec<String>, key_value::Error>> {
        Ok(self.table.get(&store)?.keys().map_err(key_value::Error::Other))
    }

    fn drop(&mut self, store: Resource<KeyValueStore>) -> wasmtime::Result<()> {
        self.table.delete(store)?;
        Ok(())
    }
}

impl sqlite::Host for RequestState {}

impl sqlite::HostConnection for RequestState {
    fn open(&mut self, database: String) -> wasmtime::Result<Result<Resource<SqliteConnection>, sqlite::Error>> {
        // As in Spin: a database the component does not list is access-denied.
        if !self.component.sqlite_databases.contains(&database) {
            return Ok(Err(sqlite::Error::AccessDenied));
        }
        match self.app.sqlite.connect(&database) {
            Some(conn) => Ok(Ok(self.table.push(conn)?)),
            None => Ok(Err(sqlite::Error::NoSuchDatabase)),
        }
    }

    fn execute(
        &mut self,
        conn: Resource<SqliteConnection>,
        statement: String,
        parameters: Vec<sqlite::Value>,
    ) -> wasmtime::Result<Result<sqlite::QueryResult, sqlite::Error>> {
        let params: Vec<SqlValue> = parameters.into_iter().map(from_wit).collect();
        let conn = self.table.get_mut(&conn)?;
        // A statement may wait up to 5 s for another connection's lock
        // (rusqlite's busy timeout). Spin runs every statement on a blocking
        // thread; here one that would wait hands its worker's other tasks on
        // first, or the lock's holder (another request, between BEGIN and
        // COMMIT) could not run to release it. The common case, no wait, stays
        // inline: a block_in_place per statement cost /auth/me 5x in p99.
        let result = match conn.try_execute(&statement, &params) {
            Err(TryError::Busy) => blocking(|| conn.execute(&statement, &params)),
            Err(TryError::Failed(e)) => Err(e),
            Ok(result) => Ok(result),
        };
        Ok(result
            .map(|r| sqlite::QueryResult {
                columns: r.columns,
                rows: r
                    .rows
                    .into_iter()
                    .map(|values| sqlite::RowResult { values: values.into_iter().map(to_wit).collect() })
                    .collect(),
            })
            .map_err(sqlite::Error::Io))
    }

    fn last_insert_rowid(&mut self, conn: Resource<SqliteConnection>) -> wasmtime::Result<i64> {
        Ok(self.table.get(&conn)?.last_insert_rowid())
    }

    fn changes(&mut self, conn: Resource<SqliteConnection>) -> wasmtime::Result<u64> {
        Ok(self.table.get(&conn)?.changes())
    }

    fn drop(&mut self, conn: Resource<SqliteConnection>) -> wasmtime::Result<()> {
        self.table.delete(conn)?;
        Ok(())
    }
}

fn from_wit(value: sqlite::Value) -> SqlValue {
    match value {
        sqlite::Value::Integer(v) => SqlValue::Integer(v),
        sqlite::Value::Real(v) => SqlValue::Real(v),
        sqlite::Value::Text(v) => SqlValue::Text(v),
        sqlite::Value::Blob(v) => SqlValue::Blob(v),
        sqlite::Value::Null => SqlValue::Null,
    }
}

fn to_wit(value: SqlValue) -> sqlite::Value {
    match value {
        SqlValue::Integer(v) => sqlite::Value::Integer(v),
        SqlValue::Real(v) => sqlite::Value::Real(v),
        SqlValue::Text(v) => sqlite::Value::Text(v),
        SqlValue::Blob(v) => sqlite::Value::Blob(v),
        SqlValue::Null => sqlite::Value::Null,
    }
}
