//! The gateway-token and trace contract between the two components that share Spin SQLite
//! database `default`: the playground mints tokens and reads traces, the simulator's
//! inference endpoint looks tokens up and writes traces. Everything both sides must agree
//! on is defined once here, so a minted token cannot drift from the lookup that accepts it:
//! the token format and hash ([`tokens`]), every statement either side runs on
//! `gateway_tokens`, `traces` and `trace_steps` with its row type, the tables' DDL (the
//! playground's migration 1 runs it), and the value/row/[`Db`] abstraction both implement
//! on Spin SQLite.
//!
//! # `gateway_tokens`: minted by the playground, validated by the inference endpoint
//!
//! | column | type | meaning |
//! |---|---|---|
//! | `token_hash` | TEXT PK | lowercase hex SHA-256 of the whole token string `myra_<64 hex>` |
//! | `gateway_id` | TEXT | `gateways.id` the token is bound to |
//! | `scopes` | TEXT | JSON list, `["playground"]` for minted tokens |
//! | `kind` | TEXT | `playground` |
//! | `created_at`, `expires_at` | INTEGER | unix seconds; valid while `now < expires_at` |
//! | `created_by` | TEXT | `users.id` of the minting user |
//!
//! A bearer `myra_…` is valid for `/{tenant_slug}/{gateway_slug}/…` when
//! [`tokens::LOOKUP`] finds its hash, the slugs match and it has not expired.
//!
//! # `traces` and `trace_steps`: written by the inference endpoint, read by the playground
//!
//! `traces(id, gateway_id, started_at ms, ended_at ms NULL, model, status)` — `status` is
//! free text (`running` → `ok` | `disconnected` from the simulator). `trace_steps(trace_id,
//! seq from 0, name, started_at ms, ended_at ms NULL, data JSON text)`, PRIMARY KEY
//! (`trace_id`, `seq`), read in `seq` order. The trace row goes in first.
//!
//! Times are integers: unix seconds for tokens, unix milliseconds for traces and steps.

mod db;
#[cfg(target_arch = "wasm32")]
mod spin;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod tokens;
pub mod traces;

pub use db::{transaction, Db, DbError, Row, Val};
#[cfg(target_arch = "wasm32")]
pub use spin::SpinDb;

/// `gateway_tokens` (what the inference endpoint validates).
pub const GATEWAY_TOKENS_TABLE: &str = "CREATE TABLE IF NOT EXISTS gateway_tokens (
            token_hash TEXT PRIMARY KEY,
            gateway_id TEXT NOT NULL REFERENCES gateways(id),
            scopes TEXT NOT NULL,
            kind TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            expires_at INTEGER NOT NULL,
            created_by TEXT)";
pub const GATEWAY_TOKENS_INDEX: &str =
    "CREATE INDEX IF NOT EXISTS gateway_tokens_by_gateway ON gateway_tokens (gateway_id, kind, expires_at)";
/// `traces` (what the inference endpoint writes).
pub const TRACES_TABLE: &str = "CREATE TABLE IF NOT EXISTS traces (
            id TEXT PRIMARY KEY,
            gateway_id TEXT NOT NULL REFERENCES gateways(id),
            started_at INTEGER NOT NULL,
            ended_at INTEGER,
            model TEXT NOT NULL DEFAULT '',
            status TEXT NOT NULL DEFAULT 'ok')";
pub const TRACES_INDEX: &str = "CREATE INDEX IF NOT EXISTS traces_by_gateway ON traces (gateway_id, started_at DESC)";
pub const TRACE_STEPS_TABLE: &str = "CREATE TABLE IF NOT EXISTS trace_steps (
            trace_id TEXT NOT NULL REFERENCES traces(id),
            seq INTEGER NOT NULL,
            name TEXT NOT NULL,
            started_at INTEGER NOT NULL,
            ended_at INTEGER,
            data TEXT NOT NULL DEFAULT '{}',
            PRIMARY KEY (trace_id, seq))";

/// The shared tables and their indexes, in creation order (after `tenants` and `gateways`).
pub const TABLES: &[&str] =
    &[GATEWAY_TOKENS_TABLE, GATEWAY_TOKENS_INDEX, TRACES_TABLE, TRACES_INDEX, TRACE_STEPS_TABLE];
