//! The console's server routes (`/api/...`): thin proxies to the Ratatoskr
//! sessions API and the Worldtree affect read, holding the consumer and admin
//! keys server-side (INV-ADMIN-KEY) and filtering the admin firehose before it
//! reaches a browser (INV-FILTER). One library, two packagings: the Spin
//! component `debug-api` and the portable `ratatoskr-console` serve it through
//! [`Platform`], which says where variables and the key-value store come from.
//!
//! - `handler` (wasm32 only): the entry point both components call; it moves
//!   bytes with `guest-http` and decides nothing.
//! - [`plan`]: every decision: route + body + variables in, a typed answer
//!   or an upstream call plan out, and what the upstream's answer means.
//! - [`access`]: the optional `console_access = "signed-in"` session check.
//! - [`routes`]: route table and validation of every browser-supplied value.
//! - [`error`]: the API's `{"error_code": ...}` envelopes (the kit's `ApiError`).
//! - [`relay`]: the turn-stream relay and the admin relay (`admin_events::AdminEventFilter`).
//! - [`alert`]: a turn's alert rules (stall, error, drop) and the webhook body;
//!   `webhook` (wasm32 only) sends them beside the stream without waiting.
//! - [`history`]: the durable affect history (one key-value key per snapshot).
//! - [`redact`]: keys in an upstream body never leave the server.
//! - [`env`]: the portable configuration: `RATATOSKR_<VARIABLE>` with spin.toml's
//!   defaults, and the outbound allow-list a runtime without one needs.

pub mod access;
pub mod alert;
pub mod env;
pub mod error;
pub mod history;
pub mod plan;
pub mod redact;
pub mod relay;
pub mod routes;

#[cfg(target_arch = "wasm32")]
mod handler;
#[cfg(target_arch = "wasm32")]
mod webhook;
#[cfg(target_arch = "wasm32")]
pub use handler::serve;

use guest_http::kv::{Kv, KvError};

/// What a runtime gives the console's routes.
pub trait Platform {
    /// The store the affect history lives in.
    type Store: Kv;
    /// A variable by the debug-api's name in spin.toml (`None`: unset).
    fn var(&self, name: &str) -> Option<String>;
    /// The key-value store, or why there is none.
    fn store(&self) -> Result<Self::Store, KvError>;
    /// The reverse proxies whose forwarded headers are believed
    /// (`guest_http::forwarded`); none where the peer's address is unknown.
    fn trusted_proxies(&self) -> Vec<guest_http::forwarded::Cidr>;
    /// Whether an upstream call to this origin may leave. Spin enforces
    /// `allowed_outbound_hosts` itself; a runtime without one leaves it to the component.
    fn may_call(&self, https: bool, authority: &str) -> bool;
}
