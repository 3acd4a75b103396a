//! Server-Sent Events for ratatoskr-web, as plain std Rust (no wasm, Spin or
//! async dependency): it runs inside the wasm32-wasip2 components and is
//! tested natively.
//!
//! - [`parser`]: incremental, bounded WHATWG event-stream parser
//! - [`encoder`]: frame writer that cannot emit an injected field
//! - [`admin`]: the admin event model, the session filter
//!   (`_admin_event_matches_web`) and the proxy's upstream -> downstream
//!   frame pipeline (`_admin_events_endpoint`)

pub mod admin;
pub mod encoder;
pub mod parser;

pub use admin::{
    admin_event_matches, encode_admin_event, encode_stream_error, AdminEvent, AdminEventError, AdminEventFilter,
    FilterStats, Flow, StreamError, ADMIN_EVENT_NAME, STREAM_ERROR_NAME,
};
pub use encoder::{encode_comment, encode_event, encode_keepalive, EncodeError, KEEPALIVE};
pub use parser::{Event, EventRef, Item, ItemRef, Limits, Parser, SseError, DEFAULT_MAX_BYTES};
