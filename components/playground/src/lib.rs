//! The Playground API (`/admin/v1/...`, seed 001): admin sessions and roles,
//! the gateway token mint, the web-search probe behind the fail-closed EU
//! gate, and trace reads, on Spin SQLite.
//!
//! - `handler` (wasm32 only): Spin entry point; wasi:http, SQLite, random,
//!   outbound requests with timeouts. It moves bytes, nothing else.
//! - [`api`]: the whole API as a pure function over injected storage, clock,
//!   randomness and egress (tested natively end to end); it only dispatches.
//! - [`http`]: the request, its body and the response as plain data;
//!   [`context`]: the configuration and the injected services; [`egress`]:
//!   outbound HTTP as a trait.
//! - [`routes`]: route table and validation; [`error`]: the catalog of error
//!   envelopes (one function each; `ApiError::new` nowhere else).
//! - [`auth`]: sign-in, sessions, cookies, CSRF, rate limits, impersonation;
//!   [`net`]: the client address (trusted proxies) and https.
//! - [`access`]: roles, gateway scopes and the per-route decisions.
//! - [`tokens`]: playground token mint; [`search`]: the probe, EU gate and
//!   provider classification; [`traces`] (a long trace streamed page by
//!   page by [`trace_pages`], [`trace_json`] its exact bytes); [`gateways`]; [`inference`]: the
//!   console's same-origin chat pass-through (`/gw/{tenant}/{gateway}/...`).
//! - [`db`]: the SQL trait; [`schema`]: tables (and the contract the
//!   simulator's inference endpoint relies on) and migrations; [`seed`]:
//!   bootstrap admin and demo world.
//!
//! Never in a response or a log: a password or its hash, a session or
//! gateway token's hash, a provider key. A session token only ever leaves in
//! `Set-Cookie`; a gateway token only in the mint's answer.

pub mod access;
pub mod api;
pub mod auth;
pub mod context;
pub mod db;
pub mod egress;
pub mod error;
pub mod gateways;
pub mod http;
pub mod inference;
pub mod net;
pub mod plain_text;
pub mod routes;
pub mod schema;
pub mod search;
pub mod seed;
pub mod tokens;
pub mod trace_json;
pub mod trace_pages;
pub mod traces;
pub mod util;

#[cfg(target_arch = "wasm32")]
mod handler;

#[cfg(test)]
mod api_tests;
