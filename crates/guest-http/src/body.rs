//! Body streams, both ways: bounded reads with one rule everywhere (the body
//! is whole when the stream says it ended, and an error otherwise), and
//! writes under the host's permits. The other modules build on this one.

use std::time::Duration;

use wasi::http::types as wasi_http;
use wasi::io::streams::{InputStream, OutputStream, StreamError};

use crate::TransportFailure;

/// Bytes asked for per read.
pub const READ_CHUNK: u64 = 64 * 1024;

/// Reads `stream` to its end, at most `limit` bytes (`TooLarge` past it).
/// With `quiet`, a body that sends nothing for that long is a `Timeout`: the
/// guest keeps this clock itself, since a host may not report its own
/// between-bytes timeout as one (wasmtime 48's `http-error-code` does not
/// classify body errors).
pub fn read_to_end(stream: &InputStream, limit: usize, quiet: Option<Duration>) -> Result<Vec<u8>, TransportFailure> {
    let mut bytes = Vec::new();
    loop {
        let read = match quiet {
            None => stream.blocking_read(READ_CHUNK),
            Some(quiet) => {
                let readable = stream.subscribe();
                let timer = wasi::clocks::monotonic_clock::subscribe_duration(quiet.as_nanos() as u64);
                if !wasi::io::poll::poll(&[&readable, &timer]).contains(&0) {
                    return Err(TransportFailure::Timeout);
                }
                stream.read(READ_CHUNK)
            }
        };
        match read {
            Ok(chunk) => {
                if bytes.len() + chunk.len() > limit {
                    return Err(TransportFailure::TooLarge);
                }
                bytes.extend_from_slice(&chunk);
            }
            Err(StreamError::Closed) => return Ok(bytes),
            // A host's own between-bytes timeout is a timeout; any other break is not an end.
            Err(StreamError::LastOperationFailed(e)) => {
                return Err(wasi_http::http_error_code(&e).map_or(TransportFailure::Unreachable, |code| classify(&code)))
            }
        }
    }
}

/// Maps a wasi:http error to the failure a client is told about.
pub fn classify(code: &wasi_http::ErrorCode) -> TransportFailure {
    use wasi_http::ErrorCode as E;
    match code {
        E::ConnectionTimeout | E::ConnectionReadTimeout | E::HttpResponseTimeout | E::DnsTimeout => {
            TransportFailure::Timeout
        }
        E::HttpRequestDenied => TransportFailure::NotAllowed,
        _ => TransportFailure::Unreachable,
    }
}

/// Writes all of `bytes` to a body stream as the host's permits allow;
/// `false` once the stream is broken.
pub(crate) fn write_stream(stream: &OutputStream, mut bytes: &[u8]) -> bool {
    while !bytes.is_empty() {
        let permit = match stream.check_write() {
            Ok(0) => {
                stream.subscribe().block();
                continue;
            }
            Ok(n) => n as usize,
            Err(_) => return false,
        };
        let n = permit.min(bytes.len());
        if stream.write(&bytes[..n]).is_err() {
            return false;
        }
        bytes = &bytes[n..];
    }
    true
}
