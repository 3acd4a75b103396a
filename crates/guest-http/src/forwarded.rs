//! A request's own origin: the scheme and host the browser used, which a
//! reverse proxy in front may have replaced on this hop (nginx's default
//! `proxy_pass` sends `Host: <upstream address>`; a TLS-terminating proxy
//! talks http to us).
//!
//! Only a peer listed in `trusted_proxies` is believed about the original
//! request, through `X-Forwarded-Proto` / `X-Forwarded-Host` or RFC 7239
//! `Forwarded`; from any other peer those headers change nothing (anyone
//! can send them). What a trusted proxy says is taken only when it is
//! unambiguous: one header line with one value, a `Forwarded` of exactly one
//! well-formed element, and both forms agreeing when both are sent. Anything
//! else is ignored whole, never half-parsed, and the origin is this hop's
//! own (`spin-full-url`). Every component decides its CSRF, cookie and
//! cross-site rules with [`own_origin`] and its Host allow-list with
//! [`Forwarded::hosts`].

use std::net::IpAddr;

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
        let bits = |ip: IpAddr| match ip {
            IpAddr::V4(v4) => (u32::from(v4) as u128, 32),
            IpAddr::V6(v6) => (u128::from(v6), 128),
        };
        let ((net, width), (ip, ip_width)) = (bits(self.addr), bits(canonical(ip)));
        width == ip_width && (self.len == 0 || net >> (width - self.len) == ip >> (width - self.len))
    }
}

/// An IPv4-mapped IPv6 address is the IPv4 address it carries.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

/// The `trusted_proxies` variable: IPs or CIDRs separated by commas. `Err`
/// names the first entry that is neither.
pub fn parse_trusted(raw: &str) -> Result<Vec<Cidr>, String> {
    raw.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|e| Cidr::parse(e).ok_or_else(|| e.to_string()))
        .collect()
}

/// [`parse_trusted`] for a check that must not fail open: a bad list trusts nobody.
pub fn trusted_or_none(raw: &str) -> Vec<Cidr> {
    parse_trusted(raw).unwrap_or_default()
}

pub fn is_trusted(list: &[Cidr], ip: IpAddr) -> bool {
    list.iter().any(|c| c.contains(ip))
}

/// The address of a `spin-client-addr` value (`ip:port`, `[v6]:port`, a bare ip).
pub fn peer_ip(addr: &str) -> Option<IpAddr> {
    let addr = addr.trim();
    let ip = match addr.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => match addr.rsplit_once(':') {
            // One colon: IPv4 with a port. More: a bare IPv6 address.
            Some((ip, _)) if !ip.contains(':') => ip,
            _ => addr,
        },
    };
    ip.parse().ok().map(canonical)
}

/// What a trusted proxy said of the browser's request. Empty when the peer is
/// not trusted or said nothing readable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Forwarded {
    /// The browser's scheme (`http` or `https`), when the proxy's headers agree on one.
    pub proto: Option<&'static str>,
    /// The browser's `Host` (`name[:port]`, lowercased), when they agree on one.
    pub host: Option<String>,
    /// Every host the proxy's headers name, readable or not: each must pass
    /// the allow-list too, so a second, conflicting header cannot slip a
    /// name past it by making the rest ambiguous.
    named: Vec<String>,
}

impl Forwarded {
    /// Reads the forwarded headers when `peer` is in `trusted`. `values(name)`
    /// gives every value of a request header, in order.
    pub fn read(peer: Option<IpAddr>, trusted: &[Cidr], values: impl Fn(&str) -> Vec<String>) -> Forwarded {
        if !peer.is_some_and(|p| is_trusted(trusted, p)) {
            return Forwarded::default();
        }
        let x_proto = single(&values("x-forwarded-proto"), proto);
        let x_hosts = values("x-forwarded-host");
        let x_host = single(&x_hosts, host);
        let element = match values("forwarded").as_slice() {
            [] => Said::Nothing,
            [one] => element(one).map_or(Said::Unreadable, Said::Value),
            _ => Said::Unreadable,
        };
        let (f_proto, f_host) = match element {
            Said::Nothing => (Said::Nothing, Said::Nothing),
            Said::Unreadable => (Said::Unreadable, Said::Unreadable),
            Said::Value(e) => (e.proto.map_or(Said::Nothing, Said::Value), e.host.map_or(Said::Nothing, Said::Value)),
        };
        let mut named: Vec<String> = x_hosts.iter().flat_map(|v| v.split(',')).map(|h| h.trim().to_string()).collect();
        if let Said::Value(h) = &f_host {
            named.push(h.clone());
        }
        Forwarded { proto: agree(x_proto, f_proto), host: agree(x_host, f_host), named }
    }

    /// Every name the proxy's headers give this request (the allow-list
    /// checks each one beside `Host`).
    pub fn hosts(&self) -> impl Iterator<Item = &str> {
        self.named.iter().map(String::as_str)
    }
}

/// This request's own origin as the browser saw it: `spin-full-url`'s scheme
/// and authority, each replaced by what a trusted proxy said. Lowercased,
/// the scheme's default port dropped (`https://a:443` is `https://a`).
pub fn own_origin(full_url: &str, forwarded: &Forwarded) -> Option<String> {
    let (scheme, rest) = full_url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let scheme = forwarded.proto.unwrap_or(scheme);
    let authority = forwarded.host.as_deref().unwrap_or(authority);
    normalize(scheme, authority)
}

/// An `Origin` header's value in [`own_origin`]'s form; `None` for `null`,
/// a path, or anything else that is not `scheme://host[:port]`.
pub fn origin(value: &str) -> Option<String> {
    let (scheme, authority) = value.trim().split_once("://")?;
    if authority.contains(['/', '?', '#', '@']) {
        return None;
    }
    normalize(scheme, authority)
}

/// The authority part of an origin (`host[:port]`).
pub fn authority(origin: &str) -> &str {
    origin.split_once("://").map_or(origin, |(_, a)| a)
}

fn normalize(scheme: &str, authority: &str) -> Option<String> {
    let scheme = scheme.to_ascii_lowercase();
    let authority = host(authority)?;
    let default = match scheme.as_str() {
        "https" => ":443",
        "http" => ":80",
        _ => return None,
    };
    let authority = authority.strip_suffix(default).unwrap_or(&authority);
    Some(format!("{scheme}://{authority}"))
}

/// What one source (a header) said of one thing.
enum Said<T> {
    Nothing,
    /// Sent, but not one readable value: the thing is unknown, whatever
    /// another source says.
    Unreadable,
    Value(T),
}

/// A header sent once, without a list, and readable by `parse`.
fn single<T>(values: &[String], parse: impl Fn(&str) -> Option<T>) -> Said<T> {
    match values {
        [] => Said::Nothing,
        [one] if !one.contains(',') => parse(one.trim()).map_or(Said::Unreadable, Said::Value),
        _ => Said::Unreadable,
    }
}

fn agree<T: PartialEq>(a: Said<T>, b: Said<T>) -> Option<T> {
    match (a, b) {
        (Said::Unreadable, _) | (_, Said::Unreadable) => None,
        (Said::Value(a), Said::Value(b)) => (a == b).then_some(a),
        (Said::Value(v), Said::Nothing) | (Said::Nothing, Said::Value(v)) => Some(v),
        (Said::Nothing, Said::Nothing) => None,
    }
}

fn proto(raw: &str) -> Option<&'static str> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "http" => Some("http"),
        "https" => Some("https"),
        _ => None,
    }
}

/// A `Host` value (`name[:port]`, `[v6][:port]`), lowercased; `None` if it
/// is not one.
fn host(raw: &str) -> Option<String> {
    let raw = raw.trim();
    let (name, port) = match raw.strip_prefix('[') {
        Some(rest) => {
            let (inside, after) = rest.split_once(']')?;
            inside.parse::<std::net::Ipv6Addr>().ok()?;
            (&raw[..inside.len() + 2], after.strip_prefix(':'))
        }
        None => match raw.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (raw, None),
        },
    };
    let name_ok = name.starts_with('[')
        || (!name.is_empty()
            && name.len() <= 253
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_'));
    let port_ok = port.is_none_or(|p| {
        !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u16>().is_ok()
    });
    (name_ok && port_ok).then(|| raw.to_ascii_lowercase())
}

/// One RFC 7239 `forwarded-element` (`pair *( ";" pair )`, no list):
/// `None` if the value is not exactly that.
struct Element {
    proto: Option<&'static str>,
    host: Option<String>,
}

fn element(raw: &str) -> Option<Element> {
    let mut pairs = Vec::new();
    let mut rest = raw.trim();
    while !rest.is_empty() {
        let eq = rest.find('=')?;
        let name = &rest[..eq];
        if name.is_empty() || !name.bytes().all(is_tchar) {
            return None;
        }
        let (value, after) = match rest[eq + 1..].strip_prefix('"') {
            Some(quoted) => quoted_string(quoted)?,
            None => {
                let end = rest[eq + 1..].find(';').map_or(rest.len(), |i| eq + 1 + i);
                let token = &rest[eq + 1..end];
                if token.is_empty() || !token.bytes().all(is_tchar) {
                    return None;
                }
                (token.to_string(), &rest[end..])
            }
        };
        let name = name.to_ascii_lowercase();
        if pairs.iter().any(|(n, _)| *n == name) {
            return None;
        }
        pairs.push((name, value));
        rest = match after.strip_prefix(';') {
            Some(next) if !next.is_empty() => next,
            Some(_) => return None,
            None if after.is_empty() => "",
            None => return None,
        };
    }
    let get = |key: &str| pairs.iter().find(|(n, _)| n == key).map(|(_, v)| v.as_str());
    let proto = match get("proto") {
        Some(p) => Some(proto(p)?),
        None => None,
    };
    let host = match get("host") {
        Some(h) => Some(host(h)?),
        None => None,
    };
    (!pairs.is_empty()).then_some(Element { proto, host })
}

/// A quoted-string's content (after its opening quote) and what follows it.
fn quoted_string(raw: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = raw.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &raw[i + 1..])),
            '\\' => out.push(chars.next()?.1),
            c if c == '\t' || (' '..='~').contains(&c) => out.push(c),
            _ => return None,
        }
    }
    None
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn read(peer: &str, trusted: &str, headers: &[(&str, &str)]) -> Forwarded {
        let values = |name: &str| headers.iter().filter(|(n, _)| *n == name).map(|(_, v)| v.to_string()).collect();
        Forwarded::read(peer_ip(peer), &parse_trusted(trusted).unwrap(), values)
    }

    const NGINX: [(&str, &str); 3] =
        [("x-forwarded-proto", "https"), ("x-forwarded-host", "console.lan:8443"), ("x-forwarded-for", "192.0.2.7")];

    #[test]
    fn cidrs_parse_and_match() {
        let list = parse_trusted(" 10.0.0.0/8, 192.168.1.7 ,fd00::/8,, ::1").unwrap();
        assert_eq!(list.len(), 4);
        assert!(is_trusted(&list, ip("10.200.3.4")));
        assert!(is_trusted(&list, ip("192.168.1.7")) && !is_trusted(&list, ip("192.168.1.8")));
        assert!(is_trusted(&list, ip("fd12::1")) && !is_trusted(&list, ip("fe80::1")));
        assert!(is_trusted(&list, ip("::ffff:10.1.1.1")), "IPv4-mapped is IPv4");
        assert!(is_trusted(&list, ip("::1")));
        assert!(Cidr::parse("0.0.0.0/0").unwrap().contains(ip("8.8.8.8")));
        assert!(!Cidr::parse("0.0.0.0/0").unwrap().contains(ip("2001:db8::1")));
        for bad in ["10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/-1", "example.com", "10.0.0.0/8/8", "1.2.3"] {
            assert!(Cidr::parse(bad).is_none(), "{bad}");
        }
        assert_eq!(parse_trusted("10.0.0.1, nope").unwrap_err(), "nope");
        assert_eq!(parse_trusted("").unwrap(), vec![]);
        assert!(trusted_or_none("127.0.0.1, nope").is_empty());
    }

    #[test]
    fn peer_addresses_drop_their_port() {
        for (addr, want) in
            [("127.0.0.1:5555", "127.0.0.1"), ("[::1]:80", "::1"), ("::1", "::1"), ("10.1.2.3", "10.1.2.3")]
        {
            assert_eq!(peer_ip(addr), Some(ip(want)), "{addr}");
        }
        assert_eq!(peer_ip("[::ffff:127.0.0.1]:1"), Some(ip("127.0.0.1")));
        assert_eq!(peer_ip(""), None);
        assert_eq!(peer_ip("evil:1"), None);
    }

    #[test]
    fn a_trusted_proxy_gives_the_browsers_scheme_and_host() {
        let fwd = read("127.0.0.1:40000", "127.0.0.1", &NGINX);
        assert_eq!((fwd.proto, fwd.host.as_deref()), (Some("https"), Some("console.lan:8443")));
        assert_eq!(
            own_origin("http://127.0.0.1:3000/admin/v1/auth/login", &fwd).as_deref(),
            Some("https://console.lan:8443")
        );
        // Host passed through and only the scheme forwarded (HAProxy, nginx with `Host $http_host`).
        let fwd = read("10.0.0.2:1", "10.0.0.0/8", &[("x-forwarded-proto", "HTTPS")]);
        assert_eq!(own_origin("http://console.lan:8443/x", &fwd).as_deref(), Some("https://console.lan:8443"));
        // RFC 7239.
        let fwd = read(
            "10.0.0.2:1",
            "10.0.0.2",
            &[("forwarded", r#"for="[2001:db8::1]:4711";Proto=https;host="Console.LAN""#)],
        );
        assert_eq!(own_origin("http://127.0.0.1:3000/", &fwd).as_deref(), Some("https://console.lan"));
        // Both forms, agreeing.
        let both = [
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "console.lan"),
            ("forwarded", "proto=https;host=console.lan"),
        ];
        assert_eq!(
            own_origin("http://127.0.0.1:3000/", &read("10.0.0.2:1", "10.0.0.2", &both)).as_deref(),
            Some("https://console.lan")
        );
    }

    #[test]
    fn an_untrusted_peer_changes_nothing() {
        for (peer, trusted) in [("192.0.2.9:1", "127.0.0.1"), ("127.0.0.1:1", ""), ("", "0.0.0.0/0")] {
            let fwd = read(peer, trusted, &[("forwarded", "proto=https;host=evil.example"), NGINX[0], NGINX[1]]);
            assert_eq!(fwd, Forwarded::default(), "{peer} {trusted}");
            assert_eq!(fwd.hosts().count(), 0);
            assert_eq!(own_origin("http://127.0.0.1:3000/x", &fwd).as_deref(), Some("http://127.0.0.1:3000"));
        }
    }

    #[test]
    fn ambiguous_or_malformed_forwarding_is_ignored_whole() {
        let origin = |headers: &[(&str, &str)]| {
            own_origin("http://127.0.0.1:3000/x", &read("127.0.0.1:1", "127.0.0.1", headers))
        };
        let ours = Some("http://127.0.0.1:3000".to_string());
        for headers in [
            &[("x-forwarded-proto", "https, http")][..],
            &[("x-forwarded-proto", "https"), ("x-forwarded-proto", "https")],
            &[("x-forwarded-proto", "ftp")],
            &[("x-forwarded-host", "console.lan, evil.example")],
            &[("x-forwarded-host", "console.lan"), ("x-forwarded-host", "console.lan")],
            &[("x-forwarded-host", "console.lan/path")],
            &[("x-forwarded-host", "console.lan:99999")],
            &[("x-forwarded-host", "")],
            &[("forwarded", "proto=https;host=console.lan, proto=http")],
            &[("forwarded", "proto=https"), ("forwarded", "host=console.lan")],
            &[("forwarded", "proto=https;proto=http")],
            &[("forwarded", "proto=https;")],
            &[("forwarded", "proto=https;host=\"console.lan")],
            &[("forwarded", "proto =https")],
            &[("forwarded", "host=con sole.lan")],
            &[("forwarded", "proto=gopher;host=console.lan")],
            &[("forwarded", "garbage")],
            &[("x-forwarded-proto", "https"), ("forwarded", "proto=http")],
            &[("x-forwarded-host", "console.lan"), ("forwarded", "host=other.lan")],
        ] {
            assert_eq!(origin(headers), ours, "{headers:?}");
        }
        // One unreadable source makes the thing unknown, whatever the other says.
        for headers in [
            &[("x-forwarded-host", "console.lan"), ("forwarded", "host=")][..],
            &[("x-forwarded-host", "console.lan, x.lan"), ("forwarded", "host=console.lan")],
            &[("x-forwarded-proto", "https"), ("forwarded", "proto=https;proto=https")],
        ] {
            let fwd = read("127.0.0.1:1", "127.0.0.1", headers);
            assert_eq!((fwd.proto, fwd.host), (None, None), "{headers:?}");
        }
    }

    #[test]
    fn every_forwarded_name_is_offered_to_the_allow_list() {
        let fwd = read(
            "127.0.0.1:1",
            "127.0.0.1",
            &[("x-forwarded-host", "console.lan, evil.example"), ("forwarded", "host=other.example")],
        );
        assert_eq!(fwd.hosts().collect::<Vec<_>>(), ["console.lan", "evil.example", "other.example"]);
        assert_eq!(fwd.host, None);
    }

    #[test]
    fn origins_compare_in_one_form() {
        assert_eq!(origin("https://Console.LAN:443").as_deref(), Some("https://console.lan"));
        assert_eq!(origin("http://console.lan:80").as_deref(), Some("http://console.lan"));
        assert_eq!(origin("http://[::1]:3000").as_deref(), Some("http://[::1]:3000"));
        for bad in [
            "null",
            "",
            "console.lan",
            "https://console.lan/",
            "https://a@console.lan",
            "ftp://console.lan",
            "https://",
        ] {
            assert_eq!(origin(bad), None, "{bad}");
        }
        assert_eq!(authority("https://console.lan:8443"), "console.lan:8443");
    }
}
