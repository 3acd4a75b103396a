//! Outbound HTTP as the pure modules see it: a request spec in, a status and
//! a bounded body out ([`Egress`]: wasi:http through `guest-http` in the
//! component, a scripted fake in the native tests).

pub use guest_http::{Method, TransportFailure};

/// A request to a provider. It carries the key: never log or print it.
pub struct OutboundRequest {
    pub method: Method,
    pub https: bool,
    pub authority: String,
    pub path_and_query: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<String>,
    pub timeout_ms: u64,
}

pub struct OutboundResponse {
    pub status: u16,
    /// The `Retry-After` header, if any.
    pub retry_after: Option<String>,
    pub body: Vec<u8>,
}

/// Outbound HTTP (wasi:http in the component, a fake in the tests).
pub trait Egress {
    fn send(&self, request: &OutboundRequest) -> Result<OutboundResponse, TransportFailure>;
}
