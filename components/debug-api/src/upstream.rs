//! Upstream URLs, from the `upstream_url` / `affect_read_url` variables.

/// An absolute `http(s)://authority[/base]` URL split for wasi:http.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamUrl {
    pub https: bool,
    pub authority: String,
    /// Path (and, for the affect URL, query) without a trailing slash.
    pub base: String,
}

impl UpstreamUrl {
    pub fn parse(url: &str) -> Option<Self> {
        let (https, rest) = if let Some(rest) = url.strip_prefix("https://") {
            (true, rest)
        } else {
            (false, url.strip_prefix("http://")?)
        };
        let split = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, base) = rest.split_at(split);
        if authority.is_empty() || authority.contains(['@', ' ', '#']) || base.contains(['#', ' ']) {
            return None;
        }
        Some(Self { https, authority: authority.to_string(), base: base.trim_end_matches('/').to_string() })
    }

    /// `base` + `path` (a path built from validated segments only).
    pub fn path(&self, path: &str) -> String {
        format!("{}{path}", self.base)
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
        let u = UpstreamUrl::parse("http://simulator.spin.internal").unwrap();
        assert_eq!(
            (u.https, u.authority.as_str(), u.path("/v1/agents")),
            (false, "simulator.spin.internal", "/v1/agents".into())
        );
        let u = UpstreamUrl::parse("https://gw.example:8081/ratatoskr/").unwrap();
        assert!(u.https);
        assert_eq!(u.path("/v1/agents"), "/ratatoskr/v1/agents");
        let a = UpstreamUrl::parse("http://wt.local/affect").unwrap();
        assert_eq!(a.with_query("agent_id", "sindra"), "/affect?agent_id=sindra");
        let q = UpstreamUrl::parse("http://wt.local/affect?v=2").unwrap();
        assert_eq!(q.with_query("agent_id", "x"), "/affect?v=2&agent_id=x");
        assert_eq!(UpstreamUrl::parse("http://wt.local").unwrap().with_query("a", "b"), "/?a=b");
    }

    #[test]
    fn refuses_what_is_not_an_absolute_http_url() {
        for bad in ["", "simulator", "ftp://x", "http://", "http://user@host/", "http://h/#f", "//h/x"] {
            assert!(UpstreamUrl::parse(bad).is_none(), "{bad}");
        }
    }
}
