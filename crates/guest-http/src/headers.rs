//! The project's standard response headers, one definition each.

/// Every JSON answer of the APIs: typed, never cached, never sniffed.
pub const JSON: [(&str, &str); 3] = [
    ("content-type", "application/json; charset=utf-8"),
    ("cache-control", "no-store"),
    ("x-content-type-options", "nosniff"),
];

/// Every event stream: never cached, never sniffed, and a hint to nginx-style
/// reverse proxies not to buffer it (a buffered stream arrives all at the end).
pub const SSE: [(&str, &str); 4] = [
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("x-accel-buffering", "no"),
    ("x-content-type-options", "nosniff"),
];
