//! Request routing and bearer checks (pure).
//!
//! | method | path                                          | auth     |
//! |--------|-----------------------------------------------|----------|
//! | GET    | /v1/agents                                    | consumer |
//! | POST   | /v1/sessions                                  | consumer |
//! | POST   | /v1/sessions/{session_id}/turns               | consumer |
//! | POST   | /v1/sessions/{session_id}/turns/{turn_id}/cancel | consumer |
//! | GET    | /v1/sessions/{session_id}/tools               | consumer |
//! | GET    | /v1/sessions/{session_id}/bifrost             | admin    |
//! | GET    | /v1/admin/events                              | admin    |
//! | GET    | /worldtree/affect?agent_id=...                | none     |
//! | GET    | /brave/res/v1/web/search?q=...&count=N        | own      |
//! | POST   | /linkup/v1/search                             | own      |
//! | POST   | /inference/{tenant_slug}/{gateway_slug}/v1/chat/completions | own |
//!
//! `own`: the route checks its own credentials (the providers' keys, see [`crate::providers`];
//! the Playground's `myra_` gateway tokens, see [`crate::inference`]).
//!
//! An unknown path is 404 and a known path with another method is 405 (with `Allow`),
//! both before authentication.

use crate::service::UpstreamError;
use query::percent_decode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Agents,
    CreateSession,
    StartTurn { session_id: String },
    CancelTurn { session_id: String, turn_id: String },
    Tools { session_id: String },
    Bifrost { session_id: String },
    AdminEvents,
    Affect,
    BraveSearch,
    LinkupSearch,
    ChatCompletions { tenant_slug: String, gateway_slug: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Consumer,
    Admin,
    Public,
    /// The handler of the route authenticates the request itself.
    Own,
}

impl Route {
    pub fn scope(&self) -> Scope {
        match self {
            Route::Bifrost { .. } | Route::AdminEvents => Scope::Admin,
            Route::Affect => Scope::Public,
            Route::BraveSearch | Route::LinkupSearch | Route::ChatCompletions { .. } => Scope::Own,
            _ => Scope::Consumer,
        }
    }
}

/// Split `path?query` into its parts.
pub fn split_path_query(pq: &str) -> (&str, &str) {
    match pq.split_once('?') {
        Some((p, q)) => (p, q),
        None => (pq, ""),
    }
}

pub fn route(method: &str, path: &str) -> Result<Route, UpstreamError> {
    let segs: Vec<&str> = path.strip_prefix('/').unwrap_or(path).split('/').collect();
    let (route, allow) = match segs.as_slice() {
        ["v1", "agents"] => (Route::Agents, "GET"),
        ["v1", "sessions"] => (Route::CreateSession, "POST"),
        ["v1", "sessions", sid, "turns"] if !sid.is_empty() => {
            (Route::StartTurn { session_id: (*sid).to_owned() }, "POST")
        }
        ["v1", "sessions", sid, "turns", tid, "cancel"] if !sid.is_empty() && !tid.is_empty() => {
            (Route::CancelTurn { session_id: (*sid).to_owned(), turn_id: (*tid).to_owned() }, "POST")
        }
        ["v1", "sessions", sid, "tools"] if !sid.is_empty() => (Route::Tools { session_id: (*sid).to_owned() }, "GET"),
        ["v1", "sessions", sid, "bifrost"] if !sid.is_empty() => {
            (Route::Bifrost { session_id: (*sid).to_owned() }, "GET")
        }
        ["v1", "admin", "events"] => (Route::AdminEvents, "GET"),
        ["worldtree", "affect"] => (Route::Affect, "GET"),
        ["brave", "res", "v1", "web", "search"] => (Route::BraveSearch, "GET"),
        ["linkup", "v1", "search"] => (Route::LinkupSearch, "POST"),
        ["inference", tenant, gateway, "v1", "chat", "completions"] if !tenant.is_empty() && !gateway.is_empty() => {
            (Route::ChatCompletions { tenant_slug: (*tenant).to_owned(), gateway_slug: (*gateway).to_owned() }, "POST")
        }
        _ => return Err(UpstreamError::NotFound("not_found")),
    };
    if method == allow {
        Ok(route)
    } else {
        Err(UpstreamError::MethodNotAllowed(allow))
    }
}

/// The value of query parameter `name` (first occurrence, `+` and %XX decoded strictly by
/// the shared `query` codec: a broken escape or non-UTF-8 is no value).
pub fn query_param(query: &str, name: &str) -> Option<String> {
    query
        .split('&')
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k)? == name).then(|| percent_decode(v)).flatten()
        })
        .next()
}

/// Does the `Authorization` header (all its values) carry exactly `Bearer <configured>`?
/// An empty configured key accepts nothing. Comparison time does not depend on where
/// the token differs.
pub fn bearer_ok(values: &[Vec<u8>], configured: &str) -> bool {
    if configured.is_empty() || values.len() != 1 {
        return false;
    }
    let v = values[0].as_slice();
    let Some(sp) = v.iter().position(|c| *c == b' ') else {
        return false;
    };
    let (scheme, rest) = v.split_at(sp);
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return false;
    }
    let token = trim_ascii(rest);
    let want = configured.as_bytes();
    let mut diff = (token.len() ^ want.len()) as u64;
    for (i, w) in want.iter().enumerate() {
        diff |= (token.get(i).copied().unwrap_or(0) ^ w) as u64;
    }
    diff == 0
}

fn trim_ascii(b: &[u8]) -> &[u8] {
    let start = b.iter().position(|c| !c.is_ascii_whitespace()).unwrap_or(b.len());
    let end = b.iter().rposition(|c| !c.is_ascii_whitespace()).map_or(start, |e| e + 1);
    &b[start..end.max(start)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(route("GET", "/v1/agents"), Ok(Route::Agents));
        assert_eq!(route("POST", "/v1/sessions"), Ok(Route::CreateSession));
        assert_eq!(route("POST", "/v1/sessions/s_1/turns"), Ok(Route::StartTurn { session_id: "s_1".into() }));
        assert_eq!(
            route("POST", "/v1/sessions/s_1/turns/t_2/cancel"),
            Ok(Route::CancelTurn { session_id: "s_1".into(), turn_id: "t_2".into() })
        );
        assert_eq!(route("GET", "/v1/sessions/s_1/tools"), Ok(Route::Tools { session_id: "s_1".into() }));
        assert_eq!(route("GET", "/v1/sessions/s_1/bifrost"), Ok(Route::Bifrost { session_id: "s_1".into() }));
        assert_eq!(route("GET", "/v1/admin/events"), Ok(Route::AdminEvents));
        assert_eq!(route("GET", "/worldtree/affect"), Ok(Route::Affect));
        assert_eq!(route("GET", "/v1/admin/events").unwrap().scope(), Scope::Admin);
        assert_eq!(route("GET", "/v1/sessions/x/bifrost").unwrap().scope(), Scope::Admin);
        assert_eq!(route("GET", "/v1/sessions/x/tools").unwrap().scope(), Scope::Consumer);
        assert_eq!(route("GET", "/worldtree/affect").unwrap().scope(), Scope::Public);
    }

    #[test]
    fn playground_upstream_routes() {
        assert_eq!(route("GET", "/brave/res/v1/web/search"), Ok(Route::BraveSearch));
        assert_eq!(route("POST", "/linkup/v1/search"), Ok(Route::LinkupSearch));
        assert_eq!(
            route("POST", "/inference/acme/main/v1/chat/completions"),
            Ok(Route::ChatCompletions { tenant_slug: "acme".into(), gateway_slug: "main".into() })
        );
        for r in [Route::BraveSearch, Route::LinkupSearch] {
            assert_eq!(r.scope(), Scope::Own);
        }
        assert_eq!(route("POST", "/inference/a/b/v1/chat/completions").unwrap().scope(), Scope::Own);
        assert_eq!(route("POST", "/brave/res/v1/web/search"), Err(UpstreamError::MethodNotAllowed("GET")));
        assert_eq!(route("GET", "/linkup/v1/search"), Err(UpstreamError::MethodNotAllowed("POST")));
        assert_eq!(route("GET", "/inference/a/b/v1/chat/completions"), Err(UpstreamError::MethodNotAllowed("POST")));
        for p in [
            "/inference//b/v1/chat/completions",
            "/inference/a//v1/chat/completions",
            "/inference/a/v1/chat/completions",
            "/inference/a/b/v1/chat/completions/x",
            "/brave/res/v1/web/search/",
            "/linkup/v1/search/x",
        ] {
            assert_eq!(route("POST", p), Err(UpstreamError::NotFound("not_found")), "{p}");
        }
    }

    #[test]
    fn not_found_and_method_not_allowed() {
        for p in [
            "/",
            "",
            "/v1",
            "/v1/agents/",
            "/v1/sessions//turns",
            "/v1/sessions/s/turns/",
            "/v1/sessions/s/turns//cancel",
            "/V1/agents",
            "/v1/sessions/s/other",
        ] {
            assert_eq!(route("GET", p), Err(UpstreamError::NotFound("not_found")), "{p}");
        }
        assert_eq!(route("POST", "/v1/agents"), Err(UpstreamError::MethodNotAllowed("GET")));
        assert_eq!(route("GET", "/v1/sessions"), Err(UpstreamError::MethodNotAllowed("POST")));
        assert_eq!(route("GET", "/v1/sessions/s/turns"), Err(UpstreamError::MethodNotAllowed("POST")));
        assert_eq!(route("DELETE", "/v1/sessions/s/tools"), Err(UpstreamError::MethodNotAllowed("GET")));
        assert_eq!(route("HEAD", "/worldtree/affect"), Err(UpstreamError::MethodNotAllowed("GET")));
        assert_eq!(route("GET", "/v1/sessions/s/turns/t/cancel").unwrap_err().status(), 405);
    }

    #[test]
    fn query() {
        assert_eq!(split_path_query("/a?b=c"), ("/a", "b=c"));
        assert_eq!(split_path_query("/a"), ("/a", ""));
        assert_eq!(query_param("agent_id=sindra", "agent_id").as_deref(), Some("sindra"));
        assert_eq!(query_param("x=1&agent_id=br%6Fkkr&agent_id=no", "agent_id").as_deref(), Some("brokkr"));
        assert_eq!(query_param("agent_id=", "agent_id").as_deref(), Some(""));
        assert_eq!(query_param("agent_id", "agent_id").as_deref(), Some(""));
        assert_eq!(query_param("a+b=c+d", "a b").as_deref(), Some("c d"));
        assert_eq!(query_param("agent_id=%", "agent_id"), None);
        assert_eq!(query_param("agent_id=%4", "agent_id"), None);
        assert_eq!(query_param("agent_id=%zz", "agent_id"), None);
        assert_eq!(query_param("agent_id=%+1", "agent_id"), None);
        assert_eq!(query_param("", "agent_id"), None);
    }

    #[test]
    fn bearer() {
        let h = |s: &str| vec![s.as_bytes().to_vec()];
        assert!(bearer_ok(&h("Bearer k1"), "k1"));
        assert!(bearer_ok(&h("bearer  k1 "), "k1"));
        assert!(!bearer_ok(&h("Bearer k1"), ""));
        assert!(!bearer_ok(&h("Bearer "), ""));
        assert!(!bearer_ok(&h("Bearer k2"), "k1"));
        assert!(!bearer_ok(&h("Bearer k1x"), "k1"));
        assert!(!bearer_ok(&h("Bearer k"), "k1"));
        assert!(!bearer_ok(&h("Basic k1"), "k1"));
        assert!(!bearer_ok(&h("k1"), "k1"));
        assert!(!bearer_ok(&[], "k1"));
        assert!(!bearer_ok(&[b"Bearer k1".to_vec(), b"Bearer k1".to_vec()], "k1"));
    }
}
