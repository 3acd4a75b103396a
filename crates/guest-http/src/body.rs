//! Bounded reads of a body stream, with one rule everywhere: the body is
//! whole when the stream says it ended, and an error otherwise.

use std::time::Duration;

use wasi::http::types as wasi_http;
use wasi::io::streams::{InputStream, StreamError};

use crate::outgoing::classify;
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
