//! Who is calling, and over what: the client address (through trusted
//! reverse proxies only), the address a sign-in limit counts against, and
//! whether the page was served over https.
//!
//! `spin-client-addr` is the peer (Spin appends its own value after any copy
//! a client sent; the handler keeps the last). When that peer is listed in
//! `trusted_proxies`, the client is the right-most `X-Forwarded-For` hop that
//! is not itself a trusted proxy, and `X-Forwarded-Proto` says the scheme;
//! from any other peer both headers are ignored (anyone can send them).

use std::net::{IpAddr, Ipv6Addr};

use crate::http::Request;
use crate::util::client_ip;

/// An IP network: `addr/len`, or a bare address (a full-length prefix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    len: u8,
}

impl Cidr {
    pub fn parse(raw: &str) -> Option<Cidr> {
        let raw = raw.trim();
        let (ip, len) = match raw.split_once('/') {
            Some((ip, len)) => (ip, Some(len)),
            None => (raw, None),
        };
        let addr = canonical(ip.trim().parse().ok()?);
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            None => max,
            Some(l) if !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()) && l.len() <= 3 => l.parse().ok()?,
            Some(_) => return None,
        };
        (len <= max).then_some(Cidr { addr, len })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, canonical(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                prefix(u32::from(net) as u128, self.len, 32) == prefix(u32::from(ip) as u128, self.len, 32)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                prefix(u128::from(net), self.len, 128) == prefix(u128::from(ip), self.len, 128)
            }
            _ => false,
        }
    }
}

fn prefix(bits: u128, len: u8, width: u8) -> u128 {
    if len == 0 {
        0
    } else {
        bits >> (width - len)
    }
}

/// An IPv4-mapped IPv6 address is the IPv4 address it carries.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

/// The `trusted_proxies` variable: comma-separated IPs or CIDRs. `Err` names
/// the first entry that is neither.
pub fn parse_trusted(raw: &str) -> Result<Vec<Cidr>, String> {
    raw.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|e| Cidr::parse(e).ok_or_else(|| e.to_string()))
        .collect()
}

fn trusted(list: &[Cidr], ip: IpAddr) -> bool {
    list.iter().any(|c| c.contains(ip))
}

fn parse_ip(raw: &str) -> Option<IpAddr> {
    let ip = client_ip(raw);
    ip.parse().ok().map(canonical)
}

/// The peer as Spin saw it (`None` if absent or unreadable).
pub fn peer(req: &Request) -> Option<IpAddr> {
    req.headers_named("spin-client-addr").last().and_then(parse_ip)
}

fn from_trusted_proxy(req: &Request, trusted_proxies: &[Cidr]) -> bool {
    peer(req).is_some_and(|p| trusted(trusted_proxies, p))
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
        match parse_ip(hop) {
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

/// Was the page served over https: `spin-full-url`'s scheme, or the
/// `X-Forwarded-Proto` a trusted proxy sent (the last one, its own).
pub fn is_https(req: &Request, trusted_proxies: &[Cidr]) -> bool {
    if req.is_https() {
        return true;
    }
    from_trusted_proxy(req, trusted_proxies)
        && req
            .headers_named("x-forwarded-proto")
            .flat_map(|h| h.split(','))
            .last()
            .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"))
}

/// This request's own origin as the browser saw it: `spin-full-url`'s, with
/// the scheme a trusted TLS-terminating proxy reported.
pub fn own_origin(req: &Request, trusted_proxies: &[Cidr]) -> Option<String> {
    let origin = guest_http::headers::origin_of(req.full_url())?;
    if is_https(req, trusted_proxies) {
        let (_, authority) = origin.split_once("://")?;
        return Some(format!("https://{authority}"));
    }
    Some(origin)
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
    fn cidrs_parse_and_match() {
        let list = parse_trusted(" 10.0.0.0/8, 192.168.1.7 ,fd00::/8,, ::1").unwrap();
        assert_eq!(list.len(), 4);
        assert!(trusted(&list, ip("10.200.3.4")));
        assert!(trusted(&list, ip("192.168.1.7")) && !trusted(&list, ip("192.168.1.8")));
        assert!(trusted(&list, ip("fd12::1")) && !trusted(&list, ip("fe80::1")));
        assert!(trusted(&list, ip("::ffff:10.1.1.1")), "IPv4-mapped is IPv4");
        assert!(trusted(&list, ip("::1")));
        assert!(Cidr::parse("0.0.0.0/0").unwrap().contains(ip("8.8.8.8")));
        for bad in ["10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/-1", "example.com", "10.0.0.0/8/8", "1.2.3"] {
            assert!(Cidr::parse(bad).is_none(), "{bad}");
        }
        assert_eq!(parse_trusted("10.0.0.1, nope").unwrap_err(), "nope");
        assert_eq!(parse_trusted("").unwrap(), vec![]);
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
        assert!(is_loopback(Some(canonical(ip("::ffff:127.0.0.1")))));
    }
}
