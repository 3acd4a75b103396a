//! Reading what the client sent.

use spin_sdk::http::IncomingRequest;

use crate::body::read_to_end;
use crate::forwarded::{self, Cidr, Forwarded};
use crate::TransportFailure;

/// A header's first value, if it is UTF-8.
pub fn header(req: &IncomingRequest, name: &str) -> Option<String> {
    req.headers().get(name).into_iter().next().and_then(|v| String::from_utf8(v).ok())
}

/// The request's `Host` (the `:authority` when there is no header); `None`
/// when it is missing or sent twice, which [`crate::hosts::allowed`] refuses.
pub fn host(req: &IncomingRequest) -> Option<String> {
    let mut values = req.headers().get("host");
    match values.len() {
        0 => req.authority(),
        1 => String::from_utf8(values.pop()?).ok(),
        _ => None,
    }
}

/// Whether this request's `Host` may be served: [`crate::hosts::allowed`]
/// with the component's `allowed_hosts` variable (unset: the defaults only),
/// for `Host` and for every name a proxy in `trusted_proxies` forwarded.
pub fn host_allowed(req: &IncomingRequest) -> bool {
    let var = |name| spin_sdk::variables::get(name).unwrap_or_default();
    host_allowed_by(req, &var("allowed_hosts"), &forwarded::trusted_or_none(&var("trusted_proxies")))
}

/// [`host_allowed`] with the `allowed_hosts` and trusted proxies from
/// elsewhere (the portable console's environment).
pub fn host_allowed_by(req: &IncomingRequest, allowed_hosts: &str, trusted: &[Cidr]) -> bool {
    let allowed = |name: Option<&str>| crate::hosts::allowed(name, allowed_hosts);
    allowed(host(req).as_deref()) && forwarded(req, trusted).hosts().all(|h| allowed(Some(h)))
}

/// What a proxy in `trusted` said of this request; the peer is Spin's
/// `spin-client-addr` (no peer, as on runtimes without it: nothing is believed).
pub fn forwarded(req: &IncomingRequest, trusted: &[Cidr]) -> Forwarded {
    let peer = spin_header(req, "spin-client-addr").as_deref().and_then(forwarded::peer_ip);
    let headers = req.headers();
    Forwarded::read(peer, trusted, |name| {
        headers.get(name).into_iter().map(|v| String::from_utf8_lossy(&v).into_owned()).collect()
    })
}

/// A `spin-*` header as Spin set it. Spin keeps any copy a client sent and
/// appends its own value after it, so only the last value can be trusted.
pub fn spin_header(req: &IncomingRequest, name: &str) -> Option<String> {
    req.headers().get(name).pop().and_then(|v| String::from_utf8(v).ok())
}

/// The route's path (`spin-path-info`, relative to the component's route)
/// and the raw query string (without `?`).
pub fn path_and_query(req: &IncomingRequest) -> (String, String) {
    (spin_header(req, "spin-path-info").unwrap_or_default(), query(req))
}

/// The request's path without its query ("" if it has none).
pub fn path(req: &IncomingRequest) -> String {
    let pq = req.path_with_query().unwrap_or_default();
    pq.split_once('?').map_or(pq.as_str(), |(path, _)| path).to_string()
}

/// The raw query string (without `?`; "" if there is none).
pub fn query(req: &IncomingRequest) -> String {
    req.path_with_query().and_then(|pq| pq.split_once('?').map(|(_, q)| q.to_string())).unwrap_or_default()
}

/// The whole request body, at most `limit` bytes: `TooLarge` past it (the
/// rest is not read), `Unreachable` if the stream broke before its end.
pub fn read_request_body(req: &IncomingRequest, limit: usize) -> Result<Vec<u8>, TransportFailure> {
    let body = req.consume().map_err(|()| TransportFailure::Unreachable)?;
    let stream = body.stream().map_err(|()| TransportFailure::Unreachable)?;
    let bytes = read_to_end(&stream, limit, None);
    // The stream is a child of the body: it goes first.
    drop(stream);
    drop(body);
    bytes
}
