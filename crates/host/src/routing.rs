//! HTTP trigger routing with Spin's rules, and the `spin-*` headers Spin adds.
//!
//! Rules (Spin 3/4): exact routes beat wildcards, the longest wildcard prefix
//! wins, `:name` matches one segment, a trailing `/...` matches the rest;
//! `{ private = true }` components get no route (service chaining only);
//! `/.well-known/spin/...` is reserved. Matching uses `routefinder`, the crate
//! Spin itself routes with, so precedence cannot drift from Spin's.

use std::net::SocketAddr;

use anyhow::{anyhow, bail, Result};

use crate::manifest::{HttpTrigger, RouteDecl};

const RESERVED_PREFIX: &str = "/.well-known/spin/";

#[derive(Debug, Clone)]
struct RouteTarget {
    component_id: String,
    /// The route as written in the manifest, e.g. `/api/...`.
    raw_route: String,
}

#[derive(Debug)]
pub struct Router {
    inner: routefinder::Router<RouteTarget>,
}

/// The outcome of routing one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteMatch {
    pub component_id: String,
    pub raw_route: String,
    /// The path below the route's prefix (`spin-path-info`).
    pub path_info: String,
    /// `:name` captures (`spin-path-match-<name>`).
    pub named: Vec<(String, String)>,
}

impl Router {
    /// Builds the router. As in Spin, a route declared twice is not an error:
    /// the later declaration wins and the replaced one is reported back so the
    /// caller can warn.
    pub fn build(triggers: &[HttpTrigger]) -> Result<(Self, Vec<String>)> {
        let mut entries: Vec<(String, RouteTarget)> = Vec::new();
        let mut warnings = Vec::new();
        for trigger in triggers {
            let RouteDecl::Path(raw) = &trigger.route else { continue };
            let normalized = normalize(raw);
            if normalized.starts_with(RESERVED_PREFIX.trim_end_matches('/')) {
                bail!("route '{raw}' is under the reserved /.well-known/spin/ prefix");
            }
            let target = RouteTarget { component_id: trigger.component.clone(), raw_route: raw.clone() };
            match entries.iter_mut().find(|(n, _)| *n == normalized) {
                Some((_, existing)) => {
                    warnings.push(format!(
                        "route '{raw}' is declared twice: component '{}' replaces '{}'",
                        trigger.component, existing.component_id
                    ));
                    *existing = target;
                }
                None => entries.push((normalized, target)),
            }
        }
        let mut inner = routefinder::Router::new();
        for (normalized, target) in entries {
            let spec = match normalized.strip_suffix("/...") {
                Some(prefix) => format!("{prefix}/*"),
                None => normalized.clone(),
            };
            let what = format!("route '{}' of component '{}'", target.raw_route, target.component_id);
            inner.add(spec.as_str(), target).map_err(|e| anyhow!("{what}: {e}"))?;
        }
        Ok((Self { inner }, warnings))
    }

    /// Routes a request path (no query). `None` means 404.
    pub fn route(&self, path: &str) -> Option<RouteMatch> {
        let found = self.inner.best_match(path)?;
        let target = found.handler();
        let captures = found.captures();
        let path_info = match captures.wildcard() {
            // Spin keeps the trailing slash that routefinder drops.
            Some(rest) => match (rest.is_empty(), path.ends_with('/')) {
                (true, false) => String::new(),
                (true, true) => "/".to_string(),
                (false, false) => format!("/{rest}"),
                (false, true) => format!("/{rest}/"),
            },
            None => String::new(),
        };
        let named = captures.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Some(RouteMatch {
            component_id: target.component_id.clone(),
            raw_route: target.raw_route.clone(),
            path_info,
            named,
        })
    }
}

impl RouteMatch {
    /// What Spin sends a component reached by service chaining: a synthetic
    /// match as if the component were routed at `/...`.
    pub fn chained(component_id: &str, path: &str) -> Self {
        Self {
            component_id: component_id.to_string(),
            raw_route: "/...".to_string(),
            path_info: path.to_string(),
            named: Vec::new(),
        }
    }

    /// The `spin-*` headers for this match, as Spin 3/4 computes them.
    pub fn spin_headers(&self, full_url: &str, client: SocketAddr) -> Vec<(String, String)> {
        let component_route = self.raw_route.strip_suffix("/...").unwrap_or(&self.raw_route);
        let mut headers = vec![
            ("spin-full-url".to_string(), full_url.to_string()),
            ("spin-path-info".to_string(), self.path_info.clone()),
            ("spin-matched-route".to_string(), self.raw_route.clone()),
            ("spin-base-path".to_string(), "/".to_string()),
            ("spin-raw-component-route".to_string(), self.raw_route.clone()),
            ("spin-component-route".to_string(), component_route.to_string()),
            ("spin-client-addr".to_string(), client.to_string()),
        ];
        for (name, value) in &self.named {
            headers.push((format!("spin-path-match-{}", name.to_ascii_lowercase()), value.clone()));
        }
        headers
    }
}

/// Spin: routes are absolute, and one trailing slash is not significant.
fn normalize(route: &str) -> String {
    let absolute = if route.starts_with('/') { route.to_string() } else { format!("/{route}") };
    match absolute.strip_suffix('/') {
        Some(stripped) if !stripped.is_empty() => stripped.to_string(),
        _ => absolute,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router(routes: &[(&str, &str)]) -> Router {
        let triggers: Vec<HttpTrigger> = routes
            .iter()
            .map(|(route, component)| HttpTrigger {
                route: RouteDecl::Path(route.to_string()),
                component: component.to_string(),
                executor: None,
            })
            .collect();
        Router::build(&triggers).unwrap().0
    }

    fn id(r: &Router, path: &str) -> Option<String> {
        r.route(path).map(|m| m.component_id)
    }

    #[test]
    fn exact_beats_wildcard_and_longest_prefix_wins() {
        let r =
            router(&[("/...", "static"), ("/api/...", "api"), ("/api/admin/...", "admin"), ("/api/config", "config")]);
        assert_eq!(id(&r, "/").as_deref(), Some("static"));
        assert_eq!(id(&r, "/index.html").as_deref(), Some("static"));
        assert_eq!(id(&r, "/api/sessions/s_1").as_deref(), Some("api"));
        assert_eq!(id(&r, "/api/admin/events").as_deref(), Some("admin"));
        assert_eq!(id(&r, "/api/config").as_deref(), Some("config"));
        assert_eq!(id(&r, "/api").as_deref(), Some("api"));
        assert_eq!(id(&r, "/apix").as_deref(), Some("static"));
    }

    #[test]
    fn order_of_declaration_does_not_matter() {
        let a = router(&[("/one/...", "one"), ("/one/two/...", "two")]);
        let b = router(&[("/one/two/...", "two"), ("/one/...", "one")]);
        for r in [a, b] {
            assert_eq!(id(&r, "/one/two/three").as_deref(), Some("two"));
            assert_eq!(id(&r, "/one/three").as_deref(), Some("one"));
        }
    }

    #[test]
    fn exact_route_matches_only_itself() {
        let r = router(&[("/cart", "cart"), ("/cart/checkout", "checkout")]);
        assert_eq!(id(&r, "/cart").as_deref(), Some("cart"));
        assert_eq!(id(&r, "/cart/checkout").as_deref(), Some("checkout"));
        assert_eq!(id(&r, "/cart/other"), None);
        assert_eq!(id(&r, "/"), None);
    }

    #[test]
    fn path_info_keeps_spin_trailing_slash_rules() {
        let r = router(&[("/foo/...", "foo")]);
        assert_eq!(r.route("/foo").unwrap().path_info, "");
        assert_eq!(r.route("/foo/").unwrap().path_info, "/");
        assert_eq!(r.route("/foo/bar").unwrap().path_info, "/bar");
        assert_eq!(r.route("/foo/bar/").unwrap().path_info, "/bar/");
        let root = router(&[("/...", "all")]);
        assert_eq!(root.route("/").unwrap().path_info, "/");
        assert_eq!(root.route("/a/b.css").unwrap().path_info, "/a/b.css");
    }

    #[test]
    fn named_segments_are_captured_and_exposed_as_headers() {
        let r = router(&[("/users/:id/...", "users")]);
        let m = r.route("/users/42/posts").unwrap();
        assert_eq!(m.named, vec![("id".to_string(), "42".to_string())]);
        let headers = m.spin_headers("http://h/users/42/posts?x=1", "127.0.0.1:9".parse().unwrap());
        let get = |k: &str| headers.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("spin-path-match-id"), Some("42"));
        assert_eq!(get("spin-path-info"), Some("/posts"));
        assert_eq!(get("spin-matched-route"), Some("/users/:id/..."));
        assert_eq!(get("spin-raw-component-route"), Some("/users/:id/..."));
        assert_eq!(get("spin-component-route"), Some("/users/:id"));
        assert_eq!(get("spin-base-path"), Some("/"));
        assert_eq!(get("spin-full-url"), Some("http://h/users/42/posts?x=1"));
        assert_eq!(get("spin-client-addr"), Some("127.0.0.1:9"));
    }

    #[test]
    fn private_routes_are_unroutable_duplicates_warn_and_reserved_is_refused() {
        let triggers =
            vec![HttpTrigger { route: RouteDecl::Private { private: true }, component: "sim".into(), executor: None }];
        let (r, _) = Router::build(&triggers).unwrap();
        assert_eq!(id(&r, "/"), None);
        let dup = [("/a", "x"), ("/a/", "y")]
            .iter()
            .map(|(route, c)| HttpTrigger {
                route: RouteDecl::Path(route.to_string()),
                component: c.to_string(),
                executor: None,
            })
            .collect::<Vec<_>>();
        let (r, warnings) = Router::build(&dup).unwrap();
        assert_eq!(id(&r, "/a").as_deref(), Some("y"), "the later declaration wins, as in Spin");
        assert_eq!(warnings.len(), 1);
        let reserved = vec![HttpTrigger {
            route: RouteDecl::Path("/.well-known/spin/health".into()),
            component: "x".into(),
            executor: None,
        }];
        assert!(Router::build(&reserved).is_err());
    }
}
