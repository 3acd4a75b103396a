//! Typed error envelopes: every failure the console sees is
//! `{"error_code": "...", ...}` with a fixed message, never upstream text
//! and never a key.

use serde_json::{json, Map, Value};

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub code: &'static str,
    pub message: &'static str,
    /// Extra typed fields (e.g. the preserved upstream `status`).
    pub fields: Map<String, Value>,
}

impl ApiError {
    pub fn new(status: u16, code: &'static str, message: &'static str) -> Self {
        Self { status, code, message, fields: Map::new() }
    }

    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.fields.insert(key.to_string(), value.into());
        self
    }

    /// An upstream non-2xx, passed on with its status (the seed's
    /// status-preserving envelope: `{error_code, status}` at that status).
    pub fn upstream_status(code: &'static str, status: u16) -> Self {
        // A 1xx/2xx/3xx here would be a lie to the browser; only 4xx/5xx pass.
        let http_status = if (400..=599).contains(&status) { status } else { 502 };
        Self::new(http_status, code, "the upstream refused the request").with("status", status)
    }

    pub fn body(&self) -> String {
        let mut map = Map::new();
        map.insert("error_code".into(), self.code.into());
        for (k, v) in &self.fields {
            map.insert(k.clone(), v.clone());
        }
        map.insert("message".into(), self.message.into());
        Value::Object(map).to_string()
    }

    pub fn not_found() -> Self {
        Self::new(404, "not_found", "no such API route")
    }

    pub fn method_not_allowed(allow: &'static str) -> Self {
        Self::new(405, "method_not_allowed", "method not allowed on this route").with("allow", allow)
    }

    pub fn admin_key_not_configured() -> Self {
        Self::new(400, "admin_key_not_configured", "the server has no admin key configured")
    }
}

/// Why an upstream call failed before any status arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportFailure {
    /// Refused, reset, DNS, or unreachable.
    Unreachable,
    /// Connect or first-byte timeout.
    Timeout,
    /// The host's allow-list refused the upstream's origin.
    NotAllowed,
    /// The upstream's body was larger than we accept.
    TooLarge,
    /// The upstream's body was not what the contract says (e.g. not JSON).
    Malformed,
}

impl From<TransportFailure> for ApiError {
    fn from(failure: TransportFailure) -> Self {
        match failure {
            TransportFailure::Unreachable => {
                ApiError::new(502, "upstream_unreachable", "the upstream could not be reached")
            }
            TransportFailure::Timeout => ApiError::new(504, "upstream_timeout", "the upstream did not answer in time"),
            TransportFailure::NotAllowed => {
                ApiError::new(502, "upstream_not_allowed", "the upstream's origin is not in allowed_outbound_hosts")
            }
            TransportFailure::TooLarge => {
                ApiError::new(502, "upstream_body_too_large", "the upstream's answer was too large")
            }
            TransportFailure::Malformed => {
                ApiError::new(502, "upstream_malformed", "the upstream's answer was not valid JSON")
            }
        }
    }
}

/// The body of a successful typed JSON answer, e.g. `{}` for a cancel.
pub fn empty_object() -> String {
    json!({}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_are_typed_and_status_preserving() {
        let e = ApiError::upstream_status("session_tools_unavailable", 404);
        assert_eq!(e.status, 404);
        let v: Value = serde_json::from_str(&e.body()).unwrap();
        assert_eq!(v["error_code"], "session_tools_unavailable");
        assert_eq!(v["status"], 404);
        // A non-error upstream status never becomes a success to the browser.
        assert_eq!(ApiError::upstream_status("x", 204).status, 502);
        assert_eq!(ApiError::upstream_status("x", 302).status, 502);
        let t: ApiError = TransportFailure::Timeout.into();
        assert_eq!((t.status, t.code), (504, "upstream_timeout"));
        let u: ApiError = TransportFailure::Unreachable.into();
        assert_eq!((u.status, u.code), (502, "upstream_unreachable"));
    }
}
