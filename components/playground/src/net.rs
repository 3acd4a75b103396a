//! Who is calling, and over what: the client address (through trusted
//! reverse proxies only), the address a sign-in limit counts against, and
//! whether the page was served over https.
//!
//! `spin-client-addr` is the peer (Spin appends its own value after any copy
//! a client sent; the handler keeps the last). When that peer is listed in
//! `trusted_proxies`, the client is the right-most `X-Forwarded-For` hop that
//! is not itself a trusted proxy, and the page's origin is the one
//! `guest_http::forwarded` reads from the proxy's headers; from any other
//! peer those headers are ignored (anyone can send them).

use std::net::{IpAddr, Ipv6Addr};

use guest_http::forwarded::{self, is_trusted as trusted, Forwarded};
pub use guest_http::forwarded::{parse_trusted, Cidr};

use crate::http::Request;

/// The peer as Spin saw it (`None` if absent or unreadable).
pub fn peer(req: &Request) -> Option<IpAddr> {
    req.headers_named("spin-client-addr").last().and_then(forwarded::peer_ip)
}

/// The client's address: the peer, or behind trusted proxies the right-most
/// `X-Forwarded-For` hop that is not a trusted proxy. A hop that does not
/// parse ends the walk at the last address that did (never a client-chosen
/// string).
pub fn client(req: &Request, trusted_proxies: &[Cidr]) -> Option<IpAddr> {
    let mut current = peer(req)?;
    if !trusted(trusted_proxies, current) {
        return Some(current);
    }
    let hops: Vec<&str> = req.headers_named("x-forwarded-for").flat_map(|h| h.split(',')).map(str::trim).collect();
    for hop in hops.iter().rev() {
        match forwarded::peer_ip(hop) {
            Some(ip) => {
                current = ip;
                if !trusted(trusted_proxies, ip) {
                    break;
                }
            }
            None => break,
        }
    }
    Some(current)
}

/// What a sign-in limit counts against: an IPv4 address, or an IPv6 /64 (one
/// host commonly holds a whole /64, so per-address limits would be free to dodge).
pub fn limit_key(ip: Option<IpAddr>) -> String {
    match ip {
        Some(IpAddr::V4(v4)) => v4.to_string(),
        Some(IpAddr::V6(v6)) => {
            let net = Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1));
            format!("{net}/64")
        }
        None => "unknown".to_string(),
    }
}

pub fn is_loopback(ip: Option<IpAddr>) -> bool {
    ip.is_some_and(|ip| ip.is_loopback())
}

/// What a proxy in `trusted_proxies` said of the browser's request.
fn forwarded(req: &Request, trusted_proxies: &[Cidr]) -> Forwarded {
    Forwarded::read(peer(req), trusted_proxies, |name| req.headers_named(name).map(str::to_string).collect())
}

/// This request's own origin as the browser saw it ([`forwarded::own_origin`]).
pub fn own_origin(req: &Request, trusted_proxies: &[Cidr]) -> Option<String> {
    forwarded::own_origin(req.full_url(), &forwarded(req, trusted_proxies))
}

/// Was the page served over https (the cookie's name and `Secure`)?
pub fn is_https(req: &Request, trusted_proxies: &[Cidr]) -> bool {
    own_origin(req, trusted_proxies).is_some_and(|o| o.starts_with("https://"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::Body;

    fn req(headers: &[(&str, &str)]) -> Request {
        Request {
            method: "POST".into(),
            path: "/auth/login".into(),
            query: String::new(),
            headers: headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect(),
            body: Body::Bytes(Vec::new()),
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn forwarded_for_counts_only_from_a_trusted_peer() {
        let spoof = [("spin-client-addr", "203.0.113.9:5000"), ("x-forwarded-for", "127.0.0.1")];
        assert_eq!(client(&req(&spoof), &[]), Some(ip("203.0.113.9")), "no trusted proxies: ignored");
        let proxies = parse_trusted("10.0.0.2, 10.0.0.3").unwrap();
        assert_eq!(client(&req(&spoof), &proxies), Some(ip("203.0.113.9")), "an untrusted peer: ignored");
        // Right-most untrusted hop: what the client wrote on the left does not count.
        let via = [
            ("spin-client-addr", "10.0.0.2:443"),
            ("x-forwarded-for", "1.1.1.1, 198.51.100.7"),
            ("x-forwarded-for", "10.0.0.3"),
        ];
        assert_eq!(client(&req(&via), &proxies), Some(ip("198.51.100.7")));
        let garbage = [("spin-client-addr", "10.0.0.2:443"), ("x-forwarded-for", "1.1.1.1, not-an-ip")];
        assert_eq!(client(&req(&garbage), &proxies), Some(ip("10.0.0.2")));
        let v6 = [("spin-client-addr", "10.0.0.2:443"), ("x-forwarded-for", "[2001:db8::5]:4711")];
        assert_eq!(client(&req(&v6), &proxies), Some(ip("2001:db8::5")));
        let none = [("spin-client-addr", "10.0.0.2:443")];
        assert_eq!(client(&req(&none), &proxies), Some(ip("10.0.0.2")));
        // Spin's own value comes last.
        let forged = [("spin-client-addr", "127.0.0.1:1"), ("spin-client-addr", "203.0.113.9:2")];
        assert_eq!(client(&req(&forged), &[]), Some(ip("203.0.113.9")));
    }

    #[test]
    fn ipv6_is_limited_per_64() {
        assert_eq!(limit_key(Some(ip("2001:db8:1:2:aaaa::1"))), limit_key(Some(ip("2001:db8:1:2:ffff::9"))));
        assert_ne!(limit_key(Some(ip("2001:db8:1:2::1"))), limit_key(Some(ip("2001:db8:1:3::1"))));
        assert_eq!(limit_key(Some(ip("2001:db8:1:2::1"))), "2001:db8:1:2::/64");
        assert_eq!(limit_key(Some(ip("192.0.2.1"))), "192.0.2.1");
        assert_ne!(limit_key(Some(ip("192.0.2.1"))), limit_key(Some(ip("192.0.2.2"))));
    }

    #[test]
    fn https_from_the_url_or_a_trusted_proxy_only() {
        let proxies = parse_trusted("10.0.0.2").unwrap();
        let url = ("spin-full-url", "http://console.test/admin/v1/auth/login");
        let forwarded = [url, ("spin-client-addr", "10.0.0.2:1"), ("x-forwarded-proto", "https")];
        assert!(is_https(&req(&forwarded), &proxies));
        assert_eq!(own_origin(&req(&forwarded), &proxies).as_deref(), Some("https://console.test"));
        let spoofed = [url, ("spin-client-addr", "10.0.0.9:1"), ("x-forwarded-proto", "https")];
        assert!(!is_https(&req(&spoofed), &proxies));
        assert_eq!(own_origin(&req(&spoofed), &proxies).as_deref(), Some("http://console.test"));
        assert!(is_https(&req(&[("spin-full-url", "https://console.test/x")]), &[]));
        assert!(!is_loopback(Some(ip("10.0.0.1"))) && is_loopback(Some(ip("::1"))) && !is_loopback(None));
        assert!(is_loopback(Some(forwarded::canonical(ip("::ffff:127.0.0.1")))));
    }
}
