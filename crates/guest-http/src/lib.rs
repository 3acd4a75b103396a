//! The wasm side of HTTP, written once for every component.
//!
//! - [`ApiError`]: the one typed error envelope (`{"error_code", "message", ...}`
//!   plus response headers) that components answer with.
//! - [`TransportFailure`]: the one classification of an outgoing call that
//!   produced no usable answer.
//! - On wasm32 only: reading request and upstream bodies with the same bound
//!   and the same rule (a broken stream is an error, never a short body),
//!   writing responses under the host's backpressure, SSE responses pumped
//!   from an upstream with a keepalive, and outgoing calls with connect /
//!   first-byte / between-bytes timeouts.
//!
//! - [`kv`]: the key-value store the components keep state in.
//! - [`BaseUrl`]: the one parser of the base URLs components call.
//! - [`hosts`]: the Host allow-list every component checks first (DNS
//!   rebinding), plain Rust; on wasm32 [`host_allowed`] applies it.
//! - [`forwarded`]: a request's own origin behind reverse proxies listed in
//!   `trusted_proxies`, the one rule every component's CSRF, cookie,
//!   cross-site and Host checks use.
//!
//! Handlers built on it only match routes and call: every decision stays in
//! the components' pure modules, which test natively.

#[cfg(any(feature = "testing", test))]
pub mod catalog;
#[cfg(any(target_arch = "wasm32", test))]
mod deadline;
#[cfg(feature = "envelope")]
mod envelope;
pub mod forwarded;
pub mod headers;
pub mod hosts;
pub mod kv;
mod transport;
pub mod url;

#[cfg(feature = "envelope")]
pub use envelope::ApiError;
pub use transport::{unix_ms, Method, TransportFailure};
pub use url::BaseUrl;

#[cfg(target_arch = "wasm32")]
mod body;
#[cfg(target_arch = "wasm32")]
mod outgoing;
#[cfg(target_arch = "wasm32")]
mod request;
#[cfg(target_arch = "wasm32")]
mod response;
#[cfg(target_arch = "wasm32")]
mod stream;

#[cfg(target_arch = "wasm32")]
pub use body::{read_to_end, READ_CHUNK};
#[cfg(target_arch = "wasm32")]
pub use outgoing::{call, start, Outgoing, Pending, Timeouts, Upstream};
#[cfg(target_arch = "wasm32")]
pub use request::{
    forwarded, header, host, host_allowed, host_allowed_by, path, path_and_query, query, read_request_body, spin_header,
};
#[cfg(all(target_arch = "wasm32", feature = "envelope"))]
pub use response::send_error;
#[cfg(target_arch = "wasm32")]
pub use response::{respond, send, send_host_not_allowed, send_json, Body};
#[cfg(target_arch = "wasm32")]
pub use stream::{pump, pump_beside, start_sse, Beside, Pump, Step};
