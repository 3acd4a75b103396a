//! The request as the handler read it and the answer it writes, plain data
//! the routes work on (the wasi:http side is `handler.rs`).

use serde_json::Value;

use crate::egress::TransportFailure;
use crate::error::{self, ApiError};
use crate::trace_pages::StepPages;

/// Request bodies here are tiny JSON objects.
pub const MAX_REQUEST_BODY: usize = 16 * 1024;

/// A request body as the handler read it. The rule of every component: a
/// body is whole when its stream ended, and a stream that broke first is an
/// error, never a short body.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Bytes(Vec<u8>),
    /// More bytes arrived than the route's limit (the rest was not read).
    TooLarge,
    /// The stream broke before its end.
    Unreadable,
}

impl Body {
    /// What a bounded read of the request body gave.
    pub fn from_read(read: Result<Vec<u8>, TransportFailure>) -> Body {
        match read {
            Ok(bytes) => Body::Bytes(bytes),
            Err(TransportFailure::TooLarge) => Body::TooLarge,
            Err(_) => Body::Unreadable,
        }
    }

    /// The whole body, or the typed 4xx for one that is not.
    pub fn bytes(&self) -> Result<&[u8], ApiError> {
        match self {
            Body::Bytes(bytes) => Ok(bytes),
            Body::TooLarge => Err(error::body_too_large()),
            Body::Unreadable => Err(error::body_unreadable()),
        }
    }
}

/// An incoming request, as the handler saw it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// The path below `/admin/v1` (Spin's `spin-path-info`), e.g. `/auth/me`.
    pub path: String,
    /// The raw query string, without `?`.
    pub query: String,
    /// Header names lowercase; `spin-full-url` and `spin-client-addr` included.
    pub headers: Vec<(String, String)>,
    pub body: Body,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// All values of a header, e.g. several `Cookie` lines.
    pub fn headers_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers.iter().filter(move |(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn full_url(&self) -> &str {
        self.header("spin-full-url").unwrap_or("")
    }

    /// Served over https: the session cookie gets `Secure`.
    pub fn is_https(&self) -> bool {
        self.full_url().to_ascii_lowercase().starts_with("https://")
    }
}

/// An answer: JSON, with the standard JSON headers plus `headers`.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The body, or with a `stream` its first bytes.
    pub body: String,
    /// The rest of the body, read and written page by page after `body`
    /// (a long trace read): [`crate::traces::drain`] writes it.
    pub stream: Option<StepPages>,
}

impl Response {
    pub fn json(status: u16, body: &Value) -> Self {
        Self::text(status, body.to_string())
    }

    /// A body already encoded.
    pub fn text(status: u16, body: String) -> Self {
        Response { status, headers: Vec::new(), body, stream: None }
    }

    pub fn with_header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_string(), value.into()));
        self
    }
}

impl From<ApiError> for Response {
    fn from(e: ApiError) -> Self {
        Response { status: e.status, headers: e.headers.clone(), body: e.body(), stream: None }
    }
}

/// Reads a JSON object body. A cookie-authenticated request has already
/// passed the CSRF check (JSON content type included); anyone else sending
/// another type gets 415.
pub fn json_body(req: &Request, allow_empty: bool) -> Result<serde_json::Map<String, Value>, ApiError> {
    let content_type = req.header("content-type").unwrap_or("");
    let bytes = req.body.bytes()?;
    if allow_empty && bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(serde_json::Map::new());
    }
    if !guest_http::headers::is_json(content_type) {
        return Err(ApiError::unsupported_media_type());
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(error::invalid_json()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(body: Body) -> Request {
        Request {
            method: "POST".into(),
            path: "/auth/logout".into(),
            query: String::new(),
            headers: vec![("content-type".into(), "application/json".into())],
            body,
        }
    }

    #[test]
    fn a_broken_request_stream_is_a_typed_400_never_a_short_body() {
        assert_eq!(Body::from_read(Ok(b"{}".to_vec())), Body::Bytes(b"{}".to_vec()));
        assert_eq!(Body::from_read(Err(TransportFailure::TooLarge)), Body::TooLarge);
        for broken in [TransportFailure::Unreachable, TransportFailure::Timeout, TransportFailure::NotAllowed] {
            assert_eq!(Body::from_read(Err(broken)), Body::Unreadable, "{broken:?}");
        }
        // Not even an empty body is accepted from a stream that broke.
        let e = json_body(&post(Body::Unreadable), true).unwrap_err();
        assert_eq!((e.status, e.code, e.message), (400, "invalid_json", "the request body was not readable"));
        let e = json_body(&post(Body::TooLarge), true).unwrap_err();
        assert_eq!((e.status, e.code), (413, "body_too_large"));
        assert!(json_body(&post(Body::Bytes(b" ".to_vec())), true).unwrap().is_empty());
    }
}
