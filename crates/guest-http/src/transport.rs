//! The plain vocabulary of an outgoing call, which the components' pure
//! cores plan with natively: its [`Method`], and why it (or a body read) gave
//! no usable answer ([`TransportFailure`]; each component maps these to its
//! own envelope codes, `upstream_*`, `provider_*`).

/// The methods the components send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportFailure {
    /// Refused, reset, DNS failure, or a body stream that broke before its end.
    Unreachable,
    /// Connect, first-byte or between-bytes timeout.
    Timeout,
    /// The host's `allowed_outbound_hosts` refused the origin.
    NotAllowed,
    /// The body was larger than the caller's bound (the rest was not read).
    TooLarge,
}

/// The wall clock in Unix milliseconds (0 before 1970), the one reading of
/// it every component takes.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
