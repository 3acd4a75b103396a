//! Typed error envelopes: every failure is `guest_http`'s [`ApiError`]
//! (`{"error_code", "message", ...}`) with a fixed message (plus typed fields
//! such as `reason`, `status`, `retry_after`), never provider text, never a
//! key, hash or token. [`PlaygroundErrors`] is the Playground's vocabulary.

pub use guest_http::ApiError;

/// The envelopes more than one route answers with (`ApiError::not_found()`
/// and so on, with this trait in scope). `method_not_allowed` and
/// `unsupported_media_type` are the kit's own.
pub trait PlaygroundErrors {
    fn not_found() -> Self;
    fn unauthenticated() -> Self;
    fn session_expired() -> Self;
    fn csrf_rejected(reason: &'static str) -> Self;
    fn insufficient_role() -> Self;
    fn impersonation_forbidden() -> Self;
    fn gateway_not_found() -> Self;
    fn trace_not_found() -> Self;
    fn invalid_json() -> Self;
    /// The request body's stream broke before its end.
    fn body_unreadable() -> Self;
    fn body_too_large() -> Self;
    fn misconfigured(message: &'static str) -> Self;
}

impl PlaygroundErrors for ApiError {
    fn not_found() -> Self {
        Self::new(404, "not_found", "no such Playground API route")
    }

    fn unauthenticated() -> Self {
        Self::new(
            401,
            "unauthenticated",
            "sign in first: send the session cookie or Authorization: Bearer <session token>",
        )
    }

    fn session_expired() -> Self {
        Self::new(401, "session_expired", "the session has expired or was revoked: sign in again")
    }

    fn csrf_rejected(reason: &'static str) -> Self {
        Self::new(
            403,
            "csrf_rejected",
            "cookie-authenticated writes need Content-Type: application/json and a same-origin Origin",
        )
        .with("reason", reason)
    }

    fn insufficient_role() -> Self {
        Self::new(403, "insufficient_role", "your role on this gateway does not allow this")
    }

    fn impersonation_forbidden() -> Self {
        Self::new(403, "impersonation_forbidden", "not allowed while impersonating a user")
    }

    fn gateway_not_found() -> Self {
        Self::new(404, "gateway_not_found", "no such gateway, or you have no access to it")
    }

    fn trace_not_found() -> Self {
        Self::new(404, "trace_not_found", "no such trace, or you have no access to it")
    }

    fn invalid_json() -> Self {
        Self::new(400, "invalid_json", "the body must be a JSON object")
    }

    fn body_unreadable() -> Self {
        Self::new(400, "invalid_json", "the request body was not readable")
    }

    fn body_too_large() -> Self {
        Self::new(413, "body_too_large", "the request body is larger than 16 KiB")
    }

    fn misconfigured(message: &'static str) -> Self {
        Self::new(500, "server_misconfigured", message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

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
