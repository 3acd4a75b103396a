//! A host that runs a Spin application's `spin.toml` on wasmtime, the way
//! `spin up` does, for machines without the spin CLI and for component tests.
//!
//! - [`manifest`], [`variables`], [`routing`], [`outbound`], [`runtime_config`]:
//!   pure models of Spin's configuration rules, unit-tested natively;
//!   [`files`]: `files` copied into a per-run directory (or mounted directly).
//! - [`app`]: compile and pre-instantiate every component once, then one fresh
//!   store per request; [`guest_run`]: where an instance runs (in the task
//!   that waits on it, then detached); [`server`]: the HTTP front door.
//! - [`outbound_http`]: the outgoing-request hook (allow-list, service
//!   chaining, test redirects), [`outbound_pool`]: kept-alive upstream connections; [`spin_imports`] + [`key_value`] + [`sqlite`]:
//!   Spin's own interfaces; [`clock`]: a wall clock tests can move;
//!   [`memory`]: each component's peak guest linear memory.
//! - [`testing`]: what tests need: ephemeral apps and counting mock upstreams.

pub mod app;
pub mod clock;
pub mod files;
mod guest_run;
pub mod key_value;
pub mod log;
pub mod manifest;
pub mod memory;
pub mod outbound;
mod outbound_http;
mod outbound_pool;
pub mod routing;
pub mod runtime_config;
pub mod server;
mod spin_imports;
pub mod sqlite;
mod state;
pub mod testing;
pub mod variables;

pub use app::{App, AppOptions};
pub use files::FilesMountStrategy;
pub use log::LogSink;
