//! The console's server routes (`/api/...`): thin proxies to the Ratatoskr
//! sessions API and the Worldtree affect read, holding the consumer and admin
//! keys server-side (INV-ADMIN-KEY) and filtering the admin firehose before it
//! reaches a browser (INV-FILTER).
//!
//! - `handler` (wasm32 only): Spin entry point and wasi:http plumbing.
//! - [`routes`]: route table and validation of every browser-supplied value.
//! - [`error`]: typed `{"error_code": ...}` envelopes.
//! - [`relay`]: the turn-stream relay; the admin stream uses `sse::AdminEventFilter`.
//! - [`redact`]: keys in an upstream body never leave the server.
//! - [`upstream`]: upstream URL handling.

pub mod error;
pub mod redact;
pub mod relay;
pub mod routes;
pub mod upstream;

#[cfg(target_arch = "wasm32")]
mod handler;
