//! `allowed_outbound_hosts`, enforced as Spin enforces it.
//!
//! An entry is `scheme://host[:port]`: `scheme` may be `*`; `host` may be `*`,
//! `*.suffix`, a name, an IP, or an IPv4 CIDR block; `port` may be a number, a
//! range `a..b` (Spin's syntax, end exclusive) or `*`, and defaults to the
//! scheme's well-known port. Paths are not allowed. `{{ var }}` templates are
//! expanded at load. Service chaining needs an explicit `http://<id>.spin.internal` (or
//! `http://*.spin.internal`) entry.

use std::net::Ipv4Addr;

use anyhow::{bail, Context, Result};

use crate::variables::ResolvedVariables;

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    Any,
    Suffix(String),
    Exact(String),
    Cidr { net: u32, bits: u32 },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum PortPattern {
    Any,
    Range(u16, u16),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct AllowedHost {
    scheme: Option<String>,
    host: HostPattern,
    port: PortPattern,
}

#[derive(Debug, Clone, Default)]
pub struct AllowedHosts {
    entries: Vec<AllowedHost>,
}

/// The target of an outgoing request, as the allow-list sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target<'a> {
    pub scheme: &'a str,
    pub host: &'a str,
    pub port: u16,
}

pub fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

impl AllowedHosts {
    pub fn parse(entries: &[String], variables: &ResolvedVariables) -> Result<Self> {
        let mut allowed = AllowedHosts::default();
        for raw in entries {
            let entry = variables.expand(raw)?;
            if entry == "self" || entry == "http://self" || entry == "https://self" {
                // Relative-URL self-requests never reach an outgoing-handler
                // hook in wasi:http 0.2; say so instead of accepting a no-op.
                bail!("'{raw}': self-requests are not supported by this host; use service chaining (http://<component>.spin.internal)");
            }
            let parsed =
                parse_entry(&entry).with_context(|| format!("invalid allowed_outbound_hosts entry '{raw}'"))?;
            allowed.entries.push(parsed);
        }
        Ok(allowed)
    }

    pub fn allows(&self, target: &Target<'_>) -> bool {
        let host = target.host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        self.entries.iter().any(|e| {
            e.scheme.as_deref().is_none_or(|s| s == target.scheme)
                && e.host.matches(&host)
                && e.port.matches(target.port)
        })
    }
}

impl HostPattern {
    fn matches(&self, host: &str) -> bool {
        match self {
            HostPattern::Any => true,
            HostPattern::Exact(h) => h == host,
            // `*.example.com` matches subdomains, not the apex (as in Spin).
            HostPattern::Suffix(suffix) => {
                host.len() > suffix.len() + 1
                    && host.ends_with(suffix.as_str())
                    && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
            }
            HostPattern::Cidr { net, bits } => host.parse::<Ipv4Addr>().is_ok_and(|ip| {
                let mask = if *bits == 0 { 0 } else { u32::MAX << (32 - bits) };
                u32::from(ip) & mask == *net
            }),
        }
    }
}

impl PortPattern {
    fn matches(&self, port: u16) -> bool {
        match self {
            PortPattern::Any => true,
            PortPattern::Range(start, end) => (*start..=*end).contains(&port),
        }
    }
}

fn parse_entry(entry: &str) -> Result<AllowedHost> {
    let (scheme, rest) = entry.split_once("://").context("expected scheme://host[:port]")?;
    if scheme.is_empty() {
        bail!("missing scheme");
    }
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.contains('/') && !is_cidr(rest) {
        bail!("paths are not allowed");
    }
    // CIDR blocks may carry a port after the prefix length: 10.0.0.0/8:80.
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || rest.starts_with('[') => (h, Some(p)),
        _ => (rest, None),
    };
    if host.is_empty() {
        bail!("missing host");
    }
    let scheme = (scheme != "*").then(|| scheme.to_ascii_lowercase());
    let port = match port {
        None => {
            let p = scheme.as_deref().and_then(default_port).context("a port is required for this scheme")?;
            PortPattern::Range(p, p)
        }
        Some("*") => PortPattern::Any,
        Some(p) if p.contains("..") => {
            let (a, b) = p.split_once("..").unwrap();
            let (a, b): (u16, u16) = (a.parse()?, b.parse()?);
            if b <= a {
                bail!("empty port range {p}");
            }
            PortPattern::Range(a, b - 1)
        }
        Some(p) => {
            let n: u16 = p.parse().with_context(|| format!("bad port '{p}'"))?;
            PortPattern::Range(n, n)
        }
    };
    let host = host.to_ascii_lowercase();
    let host = if host == "*" {
        HostPattern::Any
    } else if let Some(suffix) = host.strip_prefix("*.") {
        if suffix.contains('*') {
            bail!("only a leading '*.' wildcard is allowed");
        }
        HostPattern::Suffix(suffix.to_string())
    } else if host.contains('*') {
        bail!("only a leading '*.' wildcard is allowed");
    } else if is_cidr(&host) {
        let (ip, bits) = host.split_once('/').unwrap();
        let ip: Ipv4Addr = ip.parse()?;
        let bits: u32 = bits.parse()?;
        if bits > 32 {
            bail!("bad prefix length");
        }
        let mask = if bits == 0 { 0 } else { u32::MAX << (32 - bits) };
        HostPattern::Cidr { net: u32::from(ip) & mask, bits }
    } else {
        HostPattern::Exact(host.trim_start_matches('[').trim_end_matches(']').to_string())
    };
    Ok(AllowedHost { scheme, host, port })
}

fn is_cidr(s: &str) -> bool {
    s.split_once('/').is_some_and(|(ip, rest)| {
        ip.parse::<Ipv4Addr>().is_ok() && rest.split(':').next().is_some_and(|b| b.parse::<u8>().is_ok())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::VariableDecl;
    use crate::variables::VariableSources;
    use std::collections::BTreeMap;

    fn vars() -> ResolvedVariables {
        let decls = BTreeMap::from([(
            "upstream_host".to_string(),
            VariableDecl { default: Some("gw.example.com:8081".into()), required: false, secret: false },
        )]);
        ResolvedVariables::resolve(&decls, &VariableSources::default()).unwrap()
    }

    fn allowed(entries: &[&str]) -> AllowedHosts {
        AllowedHosts::parse(&entries.iter().map(|s| s.to_string()).collect::<Vec<_>>(), &vars()).unwrap()
    }

    fn t<'a>(scheme: &'a str, host: &'a str, port: u16) -> Target<'a> {
        Target { scheme, host, port }
    }

    #[test]
    fn exact_host_defaults_to_the_scheme_port() {
        let a = allowed(&["https://api.example.com"]);
        assert!(a.allows(&t("https", "api.example.com", 443)));
        assert!(a.allows(&t("https", "API.example.com", 443)));
        assert!(!a.allows(&t("http", "api.example.com", 80)));
        assert!(!a.allows(&t("https", "api.example.com", 8443)));
        assert!(!a.allows(&t("https", "evil.com", 443)));
    }

    #[test]
    fn wildcards_ports_ranges_and_cidr() {
        let a = allowed(&["http://*.spin.internal", "*://localhost:*", "http://10.0.0.0/8:9000..9002"]);
        assert!(a.allows(&t("http", "simulator.spin.internal", 80)));
        assert!(!a.allows(&t("http", "spin.internal", 80)));
        assert!(!a.allows(&t("http", "evilspin.internal", 80)));
        assert!(a.allows(&t("https", "localhost", 1234)));
        assert!(a.allows(&t("http", "10.1.2.3", 9001)));
        assert!(!a.allows(&t("http", "10.1.2.3", 9002)), "ranges are end-exclusive");
        assert!(!a.allows(&t("http", "11.1.2.3", 9000)));
    }

    #[test]
    fn templates_expand_at_load() {
        let a = allowed(&["http://{{ upstream_host }}"]);
        assert!(a.allows(&t("http", "gw.example.com", 8081)));
        assert!(!a.allows(&t("http", "gw.example.com", 80)));
    }

    #[test]
    fn empty_list_denies_everything_and_self_is_refused_loudly() {
        assert!(!allowed(&[]).allows(&t("http", "anything", 80)));
        assert!(AllowedHosts::parse(&["self".to_string()], &vars()).is_err());
    }

    #[test]
    fn malformed_entries_are_refused() {
        for bad in [
            "example.com",
            "https://example.com/path",
            "https://*ample.com",
            "https://a.*.com",
            "https://x:notaport",
            "ftp://x",
            "https://",
        ] {
            assert!(AllowedHosts::parse(&[bad.to_string()], &vars()).is_err(), "{bad} should be refused");
        }
    }
}
