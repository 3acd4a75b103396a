//! All SQL goes through [`Db`]: the component implements it on Spin SQLite
//! (`spin:sqlite@3.0.0`), the native tests on rusqlite ([`testing::MemDb`]).
//! The value/row/`Db` abstraction and its rules (one statement per call, values
//! always bound; [`transaction`] where one request must decide alone) are `gateway-ledger`'s, shared with the
//! simulator; a [`DbError`] answers as 500 `storage_error` (its `envelope` feature).

pub use gateway_ledger::{transaction, Db, DbError, Row, Val};

#[cfg(test)]
pub use gateway_ledger::testing;
