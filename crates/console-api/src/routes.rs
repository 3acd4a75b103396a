//! The console's API routes, and validation of everything taken from the
//! browser before it can reach an upstream URL.

use guest_http::ApiError;

use crate::error;

/// Session and turn ids: the upstream's `s_…` / `t_…` shape, generously.
/// Anything else never gets near an upstream path (no `/`, `?`, `%`, `..`).
const MAX_ID_LEN: usize = 128;
const MAX_AGENT_LEN: usize = 64;
const MAX_LAST_EVENT_ID_LEN: usize = 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Config,
    CreateSession,
    Turn { session_id: String },
    Cancel { session_id: String, turn_id: String },
    Tools { session_id: String },
    Bifrost { session_id: String },
    AdminEvents { session_id: Option<String> },
    Affect { agent_id: String },
    AffectHistory { agent_id: String },
}

/// The path below `/api` of a request for the console API, as Spin's
/// `/api/...` route sends it in `spin-path-info` (`/api` → "", `/api/x` →
/// `/x`); `None` for any other path (the site's).
pub fn below_api(path: &str) -> Option<&str> {
    match path.strip_prefix("/api") {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => Some(rest),
        _ => None,
    }
}

/// Routes a request by method and path below `/api` (Spin's `spin-path-info`
/// for the `/api/...` route) plus the raw query string.
pub fn route(method: &str, path: &str, query: &str) -> Result<Route, ApiError> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (allow, route) = match segments.as_slice() {
        ["config"] => ("GET", Ok(Route::Config)),
        ["sessions"] => ("POST", Ok(Route::CreateSession)),
        ["sessions", id, "turns"] => ("POST", session_id(id).map(|session_id| Route::Turn { session_id })),
        ["sessions", id, "turns", turn, "cancel"] => (
            "POST",
            session_id(id).and_then(|session_id| turn_id(turn).map(|turn_id| Route::Cancel { session_id, turn_id })),
        ),
        ["sessions", id, "tools"] => ("GET", session_id(id).map(|session_id| Route::Tools { session_id })),
        ["sessions", id, "bifrost"] => ("GET", session_id(id).map(|session_id| Route::Bifrost { session_id })),
        ["admin", "events"] => (
            "GET",
            match query_param(query, "session_id") {
                None => Ok(Route::AdminEvents { session_id: None }),
                Some(raw) => session_id(&raw).map(|id| Route::AdminEvents { session_id: Some(id) }),
            },
        ),
        ["affect"] => ("GET", agent_param(query).map(|agent_id| Route::Affect { agent_id })),
        ["affect", "history"] => ("GET", agent_param(query).map(|agent_id| Route::AffectHistory { agent_id })),
        _ => return Err(error::not_found()),
    };
    // HEAD is not offered: these are API calls, not documents.
    if method != allow {
        return Err(ApiError::method_not_allowed(allow));
    }
    route
}

/// The required, validated `agent_id` query parameter.
fn agent_param(query: &str) -> Result<String, ApiError> {
    match query_param(query, "agent_id") {
        None => Err(error::missing_agent_id()),
        Some(raw) => agent_id(&raw),
    }
}

fn is_id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

fn valid(raw: &str, max: usize) -> bool {
    !raw.is_empty() && raw.len() <= max && raw.chars().all(is_id_char)
}

pub fn session_id(raw: &str) -> Result<String, ApiError> {
    if valid(raw, MAX_ID_LEN) {
        Ok(raw.to_string())
    } else {
        Err(error::invalid_session_id())
    }
}

pub fn turn_id(raw: &str) -> Result<String, ApiError> {
    if valid(raw, MAX_ID_LEN) {
        Ok(raw.to_string())
    } else {
        Err(error::invalid_turn_id())
    }
}

pub fn agent_id(raw: &str) -> Result<String, ApiError> {
    if valid(raw, MAX_AGENT_LEN) {
        Ok(raw.to_string())
    } else {
        Err(error::invalid_agent_id())
    }
}

/// A browser's `Last-Event-ID` (ours came from upstream integer ids):
/// digits only, or it is refused rather than forwarded.
pub fn last_event_id(raw: &str) -> Result<String, ApiError> {
    if !raw.is_empty() && raw.len() <= MAX_LAST_EVENT_ID_LEN && raw.bytes().all(|b| b.is_ascii_digit()) {
        Ok(raw.to_string())
    } else {
        Err(error::invalid_last_event_id())
    }
}

/// The first value of `name` in the query, decoded strictly. A value that
/// does not decode is passed on raw, so the validators refuse it instead of
/// treating it as absent.
pub fn query_param(query: &str, name: &str) -> Option<String> {
    let raw = *query::query_values(query, name).first()?;
    Some(query::percent_decode(raw).unwrap_or_else(|| raw.to_string()))
}

/// Percent-encodes a validated id for an upstream URL query.
pub use query::percent_encode as encode_query_value;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_is_everything_below_api_as_spin_routes_it() {
        assert_eq!(below_api("/api"), Some(""));
        assert_eq!(below_api("/api/"), Some("/"));
        assert_eq!(below_api("/api/sessions/s_1/tools"), Some("/sessions/s_1/tools"));
        for site in ["/", "/apis", "/api.json", "/index.html", "/x/api/config", ""] {
            assert_eq!(below_api(site), None, "{site}");
        }
    }

    #[test]
    fn every_route_and_its_method() {
        assert_eq!(route("GET", "/config", ""), Ok(Route::Config));
        assert_eq!(route("POST", "/sessions", ""), Ok(Route::CreateSession));
        assert_eq!(route("POST", "/sessions/s_1/turns", ""), Ok(Route::Turn { session_id: "s_1".into() }));
        assert_eq!(
            route("POST", "/sessions/s_1/turns/t_2/cancel", ""),
            Ok(Route::Cancel { session_id: "s_1".into(), turn_id: "t_2".into() })
        );
        assert_eq!(route("GET", "/sessions/s_1/tools", ""), Ok(Route::Tools { session_id: "s_1".into() }));
        assert_eq!(route("GET", "/sessions/s_1/bifrost", ""), Ok(Route::Bifrost { session_id: "s_1".into() }));
        assert_eq!(route("GET", "/admin/events", ""), Ok(Route::AdminEvents { session_id: None }));
        assert_eq!(
            route("GET", "/admin/events", "session_id=s_9&x=1"),
            Ok(Route::AdminEvents { session_id: Some("s_9".into()) })
        );
        assert_eq!(route("GET", "/affect", "agent_id=sindra"), Ok(Route::Affect { agent_id: "sindra".into() }));
        assert_eq!(
            route("GET", "/affect/history", "agent_id=sindra"),
            Ok(Route::AffectHistory { agent_id: "sindra".into() })
        );
    }

    #[test]
    fn wrong_methods_are_405_with_allow_and_unknown_paths_404() {
        let e = route("POST", "/config", "").unwrap_err();
        assert_eq!((e.status, e.code), (405, "method_not_allowed"));
        assert_eq!(e.fields["allow"], "GET");
        assert_eq!(e.headers, [("allow".to_string(), "GET".to_string())]);
        assert_eq!(route("GET", "/sessions", "").unwrap_err().status, 405);
        assert_eq!(route("DELETE", "/sessions/s_1/tools", "").unwrap_err().status, 405);
        for path in ["/", "/nope", "/sessions/s_1", "/sessions/s_1/tools/extra", "/admin", "/config/", "/affect/x"] {
            assert_eq!(route("GET", path, "").unwrap_err().code, "not_found", "{path}");
        }
    }

    #[test]
    fn ids_that_could_inject_into_upstream_urls_are_refused() {
        let attacks = [
            "..",
            "s_1/..",
            "s_1%2F..",
            "s_1?admin=1",
            "s_1#x",
            "s 1",
            "s_1%00",
            "",
            "s_1\n",
            "ä",
            "s_1;rm",
            "%2e%2e",
            "s_1\\..",
        ];
        for id in attacks {
            let path = format!("/sessions/{id}/tools");
            let result = route("GET", &path, "");
            assert!(
                matches!(&result, Err(e) if e.code == "invalid_session_id" || e.code == "not_found"),
                "{id:?} -> {result:?}"
            );
        }
        let long = "s".repeat(129);
        assert_eq!(route("GET", &format!("/sessions/{long}/tools"), "").unwrap_err().code, "invalid_session_id");
        assert!(route("GET", &format!("/sessions/{}/tools", "s".repeat(128)), "").is_ok());
        assert_eq!(route("POST", "/sessions/s_1/turns/t%2F1/cancel", "").unwrap_err().code, "invalid_turn_id");
        assert_eq!(route("GET", "/admin/events", "session_id=s_1%26x%3D1").unwrap_err().code, "invalid_session_id");
        assert_eq!(route("GET", "/admin/events", "session_id=%zz").unwrap_err().code, "invalid_session_id");
        assert_eq!(route("GET", "/affect", "agent_id=../x").unwrap_err().code, "invalid_agent_id");
        assert_eq!(route("GET", "/affect", "").unwrap_err().code, "missing_agent_id");
        assert_eq!(route("GET", "/affect/history", "agent_id=../x").unwrap_err().code, "invalid_agent_id");
        assert_eq!(route("GET", "/affect/history", "agent_id=a%3Ab").unwrap_err().code, "invalid_agent_id");
        assert_eq!(route("GET", "/affect/history", "").unwrap_err().code, "missing_agent_id");
        assert_eq!(route("POST", "/affect/history", "agent_id=a").unwrap_err().headers[0].1, "GET");
    }

    #[test]
    fn last_event_id_is_digits_only() {
        assert_eq!(last_event_id("1042"), Ok("1042".into()));
        for bad in ["", "-1", "1e3", "12 ", "abc", "1\r\nX-Evil: 1", &"9".repeat(21)] {
            assert!(last_event_id(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn query_values_decode_and_encode() {
        assert_eq!(query_param("a=1&agent_id=sin%64ra", "agent_id").as_deref(), Some("sindra"));
        assert_eq!(query_param("agent_id=", "agent_id").as_deref(), Some(""));
        assert_eq!(query_param("x=1", "agent_id"), None);
        assert_eq!(encode_query_value("a b/&"), "a%20b%2F%26");
    }
}
