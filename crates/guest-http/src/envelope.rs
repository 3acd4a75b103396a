//! The typed error envelope: `{"error_code": "...", <fields>, "message": "..."}`
//! at a status, with optional response headers (`Allow`, `Retry-After`, a
//! clearing `Set-Cookie`). Messages are fixed text: never upstream text, never
//! a key.

use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub code: &'static str,
    pub message: &'static str,
    /// Extra typed body fields (e.g. the preserved upstream `status`).
    pub fields: Map<String, Value>,
    /// Extra response headers; the body never has to be re-read to find them.
    pub headers: Vec<(String, String)>,
}

impl ApiError {
    pub fn new(status: u16, code: &'static str, message: &'static str) -> Self {
        Self { status, code, message, fields: Map::new(), headers: Vec::new() }
    }

    /// Adds a typed body field.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.fields.insert(key.to_string(), value.into());
        self
    }

    /// Adds a response header.
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_string(), value.into()));
        self
    }

    /// 405 with the allowed method both in the body and in `Allow`.
    pub fn method_not_allowed(allow: &'static str) -> Self {
        Self::new(405, "method_not_allowed", "method not allowed on this route")
            .with("allow", allow)
            .header("allow", allow)
    }

    /// 415 for a body that is not `application/json` (a cross-site form cannot
    /// send that type without a preflight).
    pub fn unsupported_media_type() -> Self {
        Self::new(415, "unsupported_media_type", "send the body as application/json")
    }

    /// 421 for a `Host` the server does not serve ([`crate::hosts`]).
    pub fn host_not_allowed() -> Self {
        Self::new(crate::hosts::STATUS, crate::hosts::CODE, crate::hosts::MESSAGE)
    }

    /// The JSON body.
    pub fn body(&self) -> String {
        let mut map = Map::new();
        map.insert("error_code".into(), self.code.into());
        for (k, v) in &self.fields {
            map.insert(k.clone(), v.clone());
        }
        map.insert("message".into(), self.message.into());
        Value::Object(map).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_envelope_carries_code_fields_message_and_headers() {
        let e = ApiError::method_not_allowed("GET");
        assert_eq!(e.status, 405);
        let v: Value = serde_json::from_str(&e.body()).unwrap();
        assert_eq!(v["error_code"], "method_not_allowed");
        assert_eq!(v["allow"], "GET");
        assert!(v["message"].is_string());
        assert_eq!(e.headers, vec![("allow".to_string(), "GET".to_string())]);
        let v: Value =
            serde_json::from_str(&ApiError::new(429, "rate_limited", "slow down").with("retry_after", 3).body())
                .unwrap();
        assert_eq!(v, serde_json::json!({"error_code": "rate_limited", "retry_after": 3, "message": "slow down"}));
    }
}
