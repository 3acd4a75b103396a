//! Typed error envelopes: every failure is `{"error_code", "message", ...}`
//! with a fixed message (plus typed fields such as `reason`, `status`,
//! `retry_after`), never provider text, never a key, hash or token.

use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub code: &'static str,
    pub message: &'static str,
    /// Extra typed body fields.
    pub fields: Map<String, Value>,
    /// Extra response headers (`Allow`, `Retry-After`, a clearing `Set-Cookie`).
    pub headers: Vec<(String, String)>,
}

impl ApiError {
    pub fn new(status: u16, code: &'static str, message: &'static str) -> Self {
        Self { status, code, message, fields: Map::new(), headers: Vec::new() }
    }

    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.fields.insert(key.to_string(), value.into());
        self
    }

    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_string(), value.into()));
        self
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

    // ---- the shared vocabulary ---------------------------------------------

    pub fn not_found() -> Self {
        Self::new(404, "not_found", "no such Playground API route")
    }

    pub fn method_not_allowed(allow: &'static str) -> Self {
        Self::new(405, "method_not_allowed", "method not allowed on this route")
            .with("allow", allow)
            .header("allow", allow)
    }

    pub fn unauthenticated() -> Self {
        Self::new(
            401,
            "unauthenticated",
            "sign in first: send the session cookie or Authorization: Bearer <session token>",
        )
    }

    pub fn session_expired() -> Self {
        Self::new(401, "session_expired", "the session has expired or was revoked: sign in again")
    }

    pub fn csrf_rejected(reason: &'static str) -> Self {
        Self::new(
            403,
            "csrf_rejected",
            "cookie-authenticated writes need Content-Type: application/json and a same-origin Origin",
        )
        .with("reason", reason)
    }

    pub fn insufficient_role() -> Self {
        Self::new(403, "insufficient_role", "your role on this gateway does not allow this")
    }

    pub fn impersonation_forbidden() -> Self {
        Self::new(403, "impersonation_forbidden", "not allowed while impersonating a user")
    }

    pub fn gateway_not_found() -> Self {
        Self::new(404, "gateway_not_found", "no such gateway, or you have no access to it")
    }

    pub fn trace_not_found() -> Self {
        Self::new(404, "trace_not_found", "no such trace, or you have no access to it")
    }

    pub fn invalid_json() -> Self {
        Self::new(400, "invalid_json", "the body must be a JSON object")
    }

    pub fn body_too_large() -> Self {
        Self::new(413, "body_too_large", "the request body is larger than 16 KiB")
    }

    pub fn unsupported_media_type() -> Self {
        Self::new(415, "unsupported_media_type", "send the body as application/json")
    }

    pub fn misconfigured(message: &'static str) -> Self {
        Self::new(500, "server_misconfigured", message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_are_typed_with_fields_and_headers() {
        let e = ApiError::method_not_allowed("GET");
        assert_eq!(e.status, 405);
        let v: Value = serde_json::from_str(&e.body()).unwrap();
        assert_eq!(v["error_code"], "method_not_allowed");
        assert_eq!(v["allow"], "GET");
        assert!(v["message"].is_string());
        assert_eq!(e.headers, vec![("allow".to_string(), "GET".to_string())]);
        let c = ApiError::csrf_rejected("origin_mismatch");
        let v: Value = serde_json::from_str(&c.body()).unwrap();
        assert_eq!((v["error_code"].as_str(), v["reason"].as_str()), (Some("csrf_rejected"), Some("origin_mismatch")));
    }
}
