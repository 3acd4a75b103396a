//! The Host allow-list every component checks before anything else.
//!
//! A page on the open web can rebind its own DNS name to the console's LAN
//! address (DNS rebinding): the browser then sends `Host: <attacker's name>`
//! and treats the console as same-origin with the attacker. What such a page
//! can never send is an IP literal, a loopback name (`localhost`,
//! `*.localhost`: browsers resolve them to loopback themselves) or a name the
//! operator chose. Those pass; every other name gets 421 `host_not_allowed`
//! before any route, upstream call or password check.
//!
//! `allowed_hosts` (a Spin variable) lists the operator's names, separated by
//! commas or white space: `console.lan`, `*.corp.example` (any name below
//! it), or `*` (every name: only behind a proxy that checks Host itself).
//! Ports never matter. Service chaining (`<component>.spin.internal`) always
//! passes: no public DNS name ends in `.internal`.

use std::net::{Ipv4Addr, Ipv6Addr};

pub const STATUS: u16 = 421;
pub const CODE: &str = "host_not_allowed";
pub const MESSAGE: &str = "this host name is not in the server's allowed_hosts; add it there to use it";

/// The refusal's body, for components without the JSON envelope (it is what
/// `ApiError::host_not_allowed().body()` writes).
pub const BODY: &str = concat!(
    r#"{"error_code":"host_not_allowed","message":"#,
    r#""this host name is not in the server's allowed_hosts; add it there to use it"}"#
);

/// Whether a request whose `Host` is `host` (`None`: missing, or sent more
/// than once) may be served, given the `allowed_hosts` variable.
pub fn allowed(host: Option<&str>, allowed_hosts: &str) -> bool {
    let Some(name) = host.and_then(name_of) else { return false };
    if is_ip_literal(&name) || is_loopback_name(&name) || name.ends_with(".spin.internal") {
        return true;
    }
    allowed_hosts.split([',', ' ', '\t', '\n']).filter(|e| !e.is_empty()).any(|entry| matches(entry, &name))
}

/// The name of a `Host` value (`name[:port]`, `[v6]:port`), lowercased, one
/// trailing dot dropped; `None` for anything that is not a plausible name.
fn name_of(host: &str) -> Option<String> {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        if !(after.is_empty() || after.strip_prefix(':').is_some_and(is_port)) {
            return None;
        }
        return inside.parse::<Ipv6Addr>().ok().map(|_| format!("[{}]", inside.to_ascii_lowercase()));
    } else {
        match host.split_once(':') {
            Some((name, port)) if is_port(port) => name,
            Some(_) => return None,
            None => host,
        }
    };
    let name = name.strip_suffix('.').unwrap_or(name);
    let plausible = !name.is_empty()
        && name.len() <= 253
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_');
    plausible.then(|| name.to_ascii_lowercase())
}

fn is_port(raw: &str) -> bool {
    !raw.is_empty() && raw.len() <= 5 && raw.bytes().all(|b| b.is_ascii_digit())
}

/// Dotted-quad IPv4 (the strict form: `0x7f.1` is a DNS name) or `[v6]`.
fn is_ip_literal(name: &str) -> bool {
    name.starts_with('[') || name.parse::<Ipv4Addr>().is_ok()
}

fn is_loopback_name(name: &str) -> bool {
    name == "localhost" || name.ends_with(".localhost")
}

fn matches(entry: &str, name: &str) -> bool {
    let entry = entry.trim().to_ascii_lowercase();
    let entry = entry.split(':').next().unwrap_or_default();
    let entry = entry.strip_suffix('.').unwrap_or(entry);
    match entry.strip_prefix("*.") {
        _ if entry == "*" => true,
        Some(parent) => name.ends_with(&format!(".{parent}")),
        None => entry == name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_literals_and_loopback_names_pass_by_default() {
        for host in [
            "127.0.0.1",
            "127.0.0.1:3000",
            "192.168.1.20:3000",
            "10.0.0.7",
            "[::1]:3000",
            "[fe80::1]",
            "localhost",
            "LOCALHOST:3000",
            "localhost.",
            "console.localhost:3000",
            "debug-api.spin.internal",
            "playground.spin.internal",
        ] {
            assert!(allowed(Some(host), ""), "{host}");
        }
    }

    #[test]
    fn a_rebinding_name_is_refused_unless_the_operator_lists_it() {
        for host in [
            "rebind.attacker.example",
            "rebind.attacker.example:3000",
            "localhost.attacker.example",
            "127.0.0.1.nip.io",
            "0x7f.1",
            "2130706433x",
            "console.lan",
            "spin.internal.attacker.example",
        ] {
            assert!(!allowed(Some(host), ""), "{host}");
        }
        assert!(allowed(Some("console.lan:3000"), "console.lan"));
        assert!(allowed(Some("Console.LAN."), "other.lan, console.lan"));
        assert!(allowed(Some("console.lan"), "other.lan console.lan:3000"));
        assert!(!allowed(Some("evil-console.lan"), "console.lan"));
        assert!(!allowed(Some("console.lan.attacker.example"), "console.lan"));
    }

    #[test]
    fn wildcards_match_below_their_name_only() {
        assert!(allowed(Some("ops.corp.example"), "*.corp.example"));
        assert!(allowed(Some("a.b.corp.example:443"), "*.corp.example"));
        assert!(!allowed(Some("corp.example"), "*.corp.example"));
        assert!(!allowed(Some("evilcorp.example"), "*.corp.example"));
        assert!(allowed(Some("anything.example"), "*"));
    }

    #[test]
    fn missing_or_malformed_hosts_are_refused_even_with_a_star() {
        for host in [
            None,
            Some(""),
            Some(":3000"),
            Some("a b"),
            Some("name:port"),
            Some("name:99999999"),
            Some("[::1"),
            Some("[::1]x"),
            Some("[nope]"),
            Some("user@host"),
            Some("host/path"),
        ] {
            assert!(!allowed(host, "*"), "{host:?}");
        }
    }

    #[cfg(feature = "envelope")]
    #[test]
    fn the_fixed_body_is_the_envelope() {
        let e = crate::ApiError::host_not_allowed();
        assert_eq!((e.status, e.code, e.message), (STATUS, CODE, MESSAGE));
        let fixed: serde_json::Value = serde_json::from_str(BODY).unwrap();
        assert_eq!(fixed, serde_json::from_str::<serde_json::Value>(&e.body()).unwrap());
    }
}
