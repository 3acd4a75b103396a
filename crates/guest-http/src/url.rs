//! Where a component sends its calls: an absolute `http(s)` base URL from a
//! variable (`upstream_url`, `affect_read_url`, the provider and inference
//! bases), split for wasi:http, which takes scheme, authority and path apart.

/// `http(s)://authority[/path][?query]`, without user info, fragment or
/// white space inside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseUrl {
    pub https: bool,
    pub authority: String,
    /// Path (and query, if the URL has one) without a trailing slash; "" for
    /// the root.
    pub base: String,
}

impl BaseUrl {
    pub fn parse(url: &str) -> Option<BaseUrl> {
        let url = url.trim();
        let (https, rest) = match url.strip_prefix("https://") {
            Some(rest) => (true, rest),
            None => (false, url.strip_prefix("http://")?),
        };
        let split = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, base) = rest.split_at(split);
        if authority.is_empty() || authority.contains(['@', ' ', '#']) || base.contains(['#', ' ']) {
            return None;
        }
        Some(BaseUrl { https, authority: authority.to_string(), base: base.trim_end_matches('/').to_string() })
    }

    /// Whether the URL carries a query (a base that paths are appended to
    /// must not).
    pub fn has_query(&self) -> bool {
        self.base.contains('?')
    }

    /// `base` + `path` (a path built from validated segments only).
    pub fn path(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The absolute URL of `path` below the base.
    pub fn url(&self, path: &str) -> String {
        format!("{}://{}{}", if self.https { "https" } else { "http" }, self.authority, self.path(path))
    }

    /// `base` with one more query parameter (the value must be encoded).
    pub fn with_query(&self, name: &str, encoded_value: &str) -> String {
        let base = if self.base.is_empty() { "/" } else { self.base.as_str() };
        let sep = if base.contains('?') { '&' } else { '?' };
        format!("{base}{sep}{name}={encoded_value}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bases_and_joins_paths() {
        let u = BaseUrl::parse("http://simulator.spin.internal").unwrap();
        assert_eq!(
            (u.https, u.authority.as_str(), u.path("/v1/agents")),
            (false, "simulator.spin.internal", "/v1/agents".into())
        );
        let u = BaseUrl::parse(" https://gw.example:8081/ratatoskr/ ").unwrap();
        assert!(u.https && !u.has_query());
        assert_eq!(u.path("/v1/agents"), "/ratatoskr/v1/agents");
        assert_eq!(u.url("/x"), "https://gw.example:8081/ratatoskr/x");
        let a = BaseUrl::parse("http://wt.local/affect").unwrap();
        assert_eq!(a.with_query("agent_id", "sindra"), "/affect?agent_id=sindra");
        let q = BaseUrl::parse("http://wt.local/affect?v=2").unwrap();
        assert!(q.has_query());
        assert_eq!(q.with_query("agent_id", "x"), "/affect?v=2&agent_id=x");
        assert_eq!(BaseUrl::parse("http://wt.local").unwrap().with_query("a", "b"), "/?a=b");
    }

    #[test]
    fn refuses_what_is_not_an_absolute_http_url() {
        for bad in [
            "",
            "simulator",
            "ftp://x",
            "http://",
            "http://user@host/",
            "http://u:p@host",
            "http://h/#f",
            "//h/x",
            "http://h/a b",
        ] {
            assert!(BaseUrl::parse(bad).is_none(), "{bad}");
        }
    }
}
