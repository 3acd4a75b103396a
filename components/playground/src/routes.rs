//! The route table (below `/admin/v1`) and validation of every caller-supplied
//! value. Ids never reach SQL unvalidated (and SQL only ever binds them).

use crate::error::{self, ApiError};
use query::{percent_decode, query_values};

pub const MAX_ID_LEN: usize = 128;
/// Longest search query, in characters (after trimming).
pub const MAX_QUERY_CHARS: usize = 400;
pub const DEFAULT_TRACE_LIMIT: i64 = 20;
pub const MAX_TRACE_LIMIT: i64 = 100;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Login,
    Logout,
    LogoutAll,
    Password,
    Me,
    Impersonate,
    Mint,
    Search,
    /// `GET /playground/trace/{id}` and `GET /traces/{id}`; the raw id is
    /// validated after authentication.
    Trace(String),
    Traces,
    Gateways,
}

/// Routes by method and path. Unknown paths are 404 `not_found`, known
/// paths with another method 405 `method_not_allowed` with `Allow`.
pub fn route(method: &str, path: &str) -> Result<Route, ApiError> {
    let segments: Vec<&str> = path.strip_prefix('/').unwrap_or(path).split('/').collect();
    let (allow, route) = match segments.as_slice() {
        ["auth", "login"] => ("POST", Route::Login),
        ["auth", "logout"] => ("POST", Route::Logout),
        ["auth", "logout-all"] => ("POST", Route::LogoutAll),
        ["auth", "password"] => ("POST", Route::Password),
        ["auth", "me"] => ("GET", Route::Me),
        ["auth", "impersonate"] => ("POST", Route::Impersonate),
        ["playground", "token"] => ("POST", Route::Mint),
        ["playground", "search"] => ("GET", Route::Search),
        ["playground", "trace", id] | ["traces", id] if !id.is_empty() => ("GET", Route::Trace(id.to_string())),
        ["playground", "traces"] => ("GET", Route::Traces),
        ["gateways"] => ("GET", Route::Gateways),
        _ => return Err(error::not_found()),
    };
    if method != allow {
        return Err(ApiError::method_not_allowed(allow));
    }
    Ok(route)
}

fn is_id(raw: &str) -> bool {
    !raw.is_empty()
        && raw.len() <= MAX_ID_LEN
        && raw.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

pub fn gateway_id(raw: &str) -> Result<String, ApiError> {
    if is_id(raw) {
        Ok(raw.to_string())
    } else {
        Err(error::invalid_gateway_id())
    }
}

pub fn trace_id(raw: &str) -> Result<String, ApiError> {
    if is_id(raw) {
        Ok(raw.to_string())
    } else {
        Err(error::invalid_trace_id())
    }
}

pub fn user_id(raw: &str) -> Result<String, ApiError> {
    if is_id(raw) {
        Ok(raw.to_string())
    } else {
        Err(error::invalid_user_id())
    }
}

/// One query parameter, decoded: `Ok(None)` when absent; a repeated or
/// undecodable parameter is `bad`.
pub fn single_param(query: &str, name: &str, bad: fn() -> ApiError) -> Result<Option<String>, ApiError> {
    match query_values(query, name).as_slice() {
        [] => Ok(None),
        [raw] => percent_decode(raw).map(Some).ok_or_else(bad),
        _ => Err(bad()),
    }
}

/// `gateway_id` from a query string (required).
pub fn gateway_param(query: &str) -> Result<String, ApiError> {
    let raw = single_param(query, "gateway_id", error::invalid_gateway_id)?.ok_or_else(error::invalid_gateway_id)?;
    gateway_id(&raw)
}

/// `q`: required, trimmed, 1-400 characters, no control characters.
pub fn search_query(query: &str) -> Result<String, ApiError> {
    let raw = single_param(query, "q", error::invalid_query)?.ok_or_else(error::invalid_query)?;
    let q = raw.trim();
    if q.is_empty() || q.chars().count() > MAX_QUERY_CHARS || q.chars().any(char::is_control) {
        return Err(error::invalid_query());
    }
    Ok(q.to_string())
}

/// `limit`: optional, 1-100, default 20.
pub fn limit_param(query: &str) -> Result<i64, ApiError> {
    match single_param(query, "limit", error::invalid_limit)? {
        None => Ok(DEFAULT_TRACE_LIMIT),
        Some(raw) => match raw.parse::<i64>() {
            Ok(n) if (1..=MAX_TRACE_LIMIT).contains(&n) && raw.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
            _ => Err(error::invalid_limit()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_and_methods() {
        assert_eq!(route("POST", "/auth/login").unwrap(), Route::Login);
        assert_eq!(route("GET", "/playground/trace/trc_1").unwrap(), Route::Trace("trc_1".into()));
        assert_eq!(route("GET", "/traces/trc_1").unwrap(), Route::Trace("trc_1".into()));
        assert_eq!(route("GET", "/playground/traces").unwrap(), Route::Traces);
        assert_eq!(route("GET", "/gateways").unwrap(), Route::Gateways);
        let e = route("GET", "/playground/token").unwrap_err();
        assert_eq!((e.status, e.code), (405, "method_not_allowed"));
        assert_eq!(e.headers, vec![("allow".into(), "POST".into())]);
        assert_eq!(route("HEAD", "/gateways").unwrap_err().status, 405);
        for unknown in
            ["", "/", "/gateways/", "/auth", "/playground/trace/", "/playground/trace/a/b", "/nope", "//gateways"]
        {
            assert_eq!(route("GET", unknown).unwrap_err().code, "not_found", "{unknown:?}");
        }
    }

    #[test]
    fn ids_are_strictly_shaped() {
        assert!(gateway_id("gw_acme_main").is_ok());
        assert!(gateway_id("gw_euco_eu-linkup").is_ok());
        for bad in ["", "a b", "x'; DROP TABLE gateways;--", "../x", "a%20", "é", &"a".repeat(129)] {
            assert_eq!(gateway_id(bad).unwrap_err().code, "invalid_gateway_id", "{bad}");
            assert_eq!(trace_id(bad).unwrap_err().code, "invalid_trace_id", "{bad}");
            assert_eq!(user_id(bad).unwrap_err().code, "invalid_user_id", "{bad}");
        }
        assert!(trace_id(&"a".repeat(128)).is_ok());
    }

    #[test]
    fn search_queries_are_validated_and_kept_literal() {
        assert_eq!(search_query("q=hello+world&gateway_id=x").unwrap(), "hello world");
        assert_eq!(search_query("q=%20%20rust%20").unwrap(), "rust");
        let injection = "q=x%27%20OR%201%3D1%3B%20DROP%20TABLE%20users%3B--";
        assert_eq!(search_query(injection).unwrap(), "x' OR 1=1; DROP TABLE users;--");
        assert_eq!(search_query(&format!("q={}", "é".repeat(400))).unwrap().chars().count(), 400);
        for bad in ["", "q=", "q=+++", "q=a&q=b", "q=%zz", "q=a%00b", &format!("q={}", "a".repeat(401))] {
            assert_eq!(search_query(bad).unwrap_err().code, "invalid_query", "{bad}");
        }
    }

    #[test]
    fn gateway_and_limit_params() {
        assert_eq!(gateway_param("gateway_id=gw_1").unwrap(), "gw_1");
        for bad in ["", "gateway_id=", "gateway_id=a&gateway_id=b", "gateway_id=%27"] {
            assert_eq!(gateway_param(bad).unwrap_err().code, "invalid_gateway_id", "{bad}");
        }
        assert_eq!(limit_param("").unwrap(), 20);
        assert_eq!(limit_param("limit=1").unwrap(), 1);
        assert_eq!(limit_param("limit=100").unwrap(), 100);
        for bad in [
            "limit=0",
            "limit=101",
            "limit=-1",
            "limit=+5",
            "limit=1e2",
            "limit=",
            "limit=99999999999999999999",
            "limit=1&limit=2",
        ] {
            assert_eq!(limit_param(bad).unwrap_err().code, "invalid_limit", "{bad}");
        }
    }
}
