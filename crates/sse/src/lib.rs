//! Server-Sent Events for ratatoskr-web, as plain std Rust (no wasm, Spin or
//! async dependency): it runs inside the wasm32-wasip2 components and is
//! tested natively. The protocol only: what travels in the events is the
//! callers' (the admin firehose's model and filter: `admin-events`).
//!
//! - [`parser`]: incremental, bounded WHATWG event-stream parser
//! - [`encoder`]: frame writer that cannot emit an injected field
//! - `strategies` (feature `strategies`): proptest generators of hostile
//!   event-stream bytes, for this crate's and its users' property tests

pub mod encoder;
pub mod parser;
#[cfg(feature = "strategies")]
pub mod strategies;

pub use encoder::{encode_comment, encode_event, EncodeError, KEEPALIVE};
pub use parser::{Event, EventRef, Item, ItemRef, Limits, Parser, SseError, DEFAULT_MAX_BYTES};
