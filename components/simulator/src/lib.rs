//! The built-in upstream simulator for ratatoskr-web.
//!
//! A Spin HTTP component on a private route, reached only by service chaining at
//! `http://simulator.spin.internal/...`. It serves the Ratatoskr sessions API and the
//! Worldtree affect read exactly as the upstream wire contract (sections 1 and 2) fixes them,
//! with live, changing data, so the operator console works with no outside service.
//! For the Playground (section 3) it also serves fake Brave and Linkup web search and an
//! OpenAI-compatible streaming inference endpoint that validates the Playground's `myra_`
//! gateway tokens in the shared Spin SQLite database and records traces there.
//!
//! Module map:
//! - `handler` (wasm32 only): the Spin entry point — reads the request, checks bearers
//!   against the component variables `consumer_key` / `admin_key`, dispatches, and
//!   streams the SSE responses with real delays.
//! - [`routes`]: path/method routing, query parsing, bearer comparison.
//! - [`service`]: the state machine over the key-value store (sessions, running-turn
//!   flag, cancel flag, dispatch state, affect log). Documents the KV keys.
//! - [`catalog`]: the agents (sindra, brokkr, eitri) and their tools.
//! - [`turn`]: the turn script (events and delays) for one user message.
//! - [`admin`]: the deterministic admin event firehose.
//! - [`affect`]: the affect (PAD + relation_edge/1) model.
//! - [`providers`]: fake Brave (`/brave/...`) and Linkup (`/linkup/...`) with failure
//!   switches (`sim:401`, `sim:429`, `sim:500`, `sim:slow`, `sim:malformed`, `sim:empty`).
//! - [`inference`]: `/inference/{tenant}/{gateway}/v1/chat/completions` — token format and
//!   hash, chat body, reply script, chunk framing, trace step data.
//! - [`ledger`]: the Playground's SQLite tables as inference uses them (token lookup,
//!   trace writes), through `gateway-ledger`'s `Db`.
//! - [`sse`], [`time`], [`rng`], [`model`]: framing, RFC 3339, PRNG, serde types.
//!
//! Demo switches (details in `turn` and `catalog`):
//! - turn text `/error`  -> the turn ends with an `error` event instead of `done`;
//! - turn text `/slow`   -> ~0.35–1 s between deltas (12–25 s in all), to try cancel;
//! - agent `eitri`       -> bifrost answers 403 `scope_denied`, and its affect snapshots
//!   use the legacy flat `valence` instead of `relations`.
//!
//! Everything except `handler` is plain Rust: `cargo test -p simulator --lib` runs the
//! unit tests natively.
//!
//! Why one component for both upstreams (the console's and the Playground's): both halves
//! share the handler's plumbing, the PRNG, SSE framing and the streams' clock and client
//! ([`streams`]), which two components would have to copy or move into a crate of their
//! own; a second private component would be a second `*.spin.internal` host that every
//! default base URL and origin in spin.toml, the build's component list and the test
//! fixtures would have to name. The Playground half is already apart by module
//! ([`providers`], [`inference`], [`ledger`], [`streams::Chat`]) and does not reach into
//! the Playground: every statement, row type and the token hash it uses are
//! `gateway-ledger`'s, the definitions the Playground itself uses, and it never creates
//! or migrates a table. What the split would buy, each half without the other's store
//! (the sessions half needs no SQLite, the Playground half no key-value store), is worth
//! it once the simulator runs anywhere but a developer's machine and the tests.

pub mod admin;
pub mod affect;
pub mod catalog;
pub mod inference;
pub mod ledger;
pub mod model;
pub mod providers;
pub mod rng;
pub mod routes;
pub mod service;
pub mod sse;
pub mod streams;
pub mod time;
pub mod turn;

#[cfg(target_arch = "wasm32")]
mod handler;
