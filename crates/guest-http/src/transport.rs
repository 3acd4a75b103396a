//! Why an outgoing call (or a body read) gave no usable answer. Each component
//! maps these to its own envelope codes (`upstream_*`, `provider_*`).

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
