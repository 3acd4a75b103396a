//! The console's server routes (`/api/...`): thin proxies to the Ratatoskr
//! sessions API and the Worldtree affect read, holding the consumer and admin
//! keys server-side (INV-ADMIN-KEY) and filtering the admin firehose before it
//! reaches a browser (INV-FILTER).
//!
//! - `handler` (wasm32 only): the Spin entry point; it moves bytes with
//!   `guest-http` and decides nothing.
//! - [`plan`]: every decision: route + body + variables in, a typed answer
//!   or an upstream call plan out, and what the upstream's answer means.
//! - [`access`]: the optional `console_access = "signed-in"` session check.
//! - [`routes`]: route table and validation of every browser-supplied value.
//! - [`error`]: the API's `{"error_code": ...}` envelopes (the kit's `ApiError`).
//! - [`relay`]: the turn-stream relay and the admin relay (`admin_events::AdminEventFilter`).
//! - [`history`]: the durable affect history (one key-value key per snapshot).
//! - [`redact`]: keys in an upstream body never leave the server.

pub mod access;
pub mod error;
pub mod history;
pub mod plan;
pub mod redact;
pub mod relay;
pub mod routes;

#[cfg(target_arch = "wasm32")]
mod handler;
