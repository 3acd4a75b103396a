//! Writing a response: its head, then its body under the host's backpressure.

use spin_sdk::http::{Fields, OutgoingBody, OutgoingResponse, ResponseOutparam};
use wasi::io::streams::OutputStream;

use crate::body::{write_stream, READ_CHUNK};
use crate::headers;

/// A response body being written. Writes return `false` once the client is
/// gone (the host notices on the next write, as Spin does).
pub struct Body {
    // Field order is drop order: the stream is a child of the body.
    stream: OutputStream,
    body: OutgoingBody,
}

impl Body {
    /// Writes all of `bytes`, waiting for the host's permits; no flush per
    /// piece, so big writes become few TCP segments.
    pub fn write(&self, bytes: &[u8]) -> bool {
        write_stream(&self.stream, bytes)
    }

    /// Copies `reader` to the end, [`READ_CHUNK`] bytes per write (big writes
    /// become few TCP segments: Spin keeps Nagle on); `false` if the client
    /// left. A read error ends the copy early: a body that then falls short
    /// of its `content-length` makes the host abort the response.
    pub fn copy_from(&self, mut reader: impl std::io::Read) -> bool {
        let mut buffer = vec![0u8; READ_CHUNK as usize];
        while let Ok(n @ 1..) = reader.read(&mut buffer) {
            if !self.write(&buffer[..n]) {
                return false;
            }
        }
        true
    }

    /// Writes `bytes` and asks the host to send them now (one stream event).
    pub fn push(&self, bytes: &[u8]) -> bool {
        self.write(bytes) && self.stream.flush().is_ok()
    }

    /// Flushes and ends the body (a short body against a `content-length`
    /// makes the host abort the response rather than send a bad one).
    pub fn finish(self) {
        let _ = self.stream.blocking_flush();
        let Body { stream, body } = self;
        drop(stream);
        let _ = OutgoingBody::finish(body, None);
    }
}

/// Sends the head of a response whose body starts with `first`, and returns
/// the body to go on writing. Up to the host's first permit of `first` is
/// queued before the head is handed over, so a small answer leaves in one TCP
/// write with its head: Spin keeps Nagle on, and a body that follows its head
/// in a second small write waits for the client's delayed ACK (~40 ms).
/// `None` if the head could not be built (the host then answers 500).
pub fn respond<N: AsRef<str>, V: AsRef<[u8]>>(
    out: ResponseOutparam,
    status: u16,
    header_list: &[(N, V)],
    first: &[u8],
) -> Option<Body> {
    let entries: Vec<(String, Vec<u8>)> =
        header_list.iter().map(|(n, v)| (n.as_ref().to_owned(), v.as_ref().to_vec())).collect();
    let response = OutgoingResponse::new(Fields::from_list(&entries).ok()?);
    response.set_status_code(status).ok()?;
    let body = response.body().ok()?;
    let stream = body.write().ok()?;
    let mut rest = first;
    if let Ok(permit) = stream.check_write() {
        let n = (permit as usize).min(rest.len());
        if n > 0 && stream.write(&rest[..n]).is_ok() {
            rest = &rest[n..];
        }
    }
    out.set(response);
    let body = Body { stream, body };
    body.write(rest).then_some(body)
}

/// A whole response in one call, with its `content-length` (unless the list
/// has one). Without it the host sends the body chunked, and the last chunk
/// leaves in a write of its own whenever the host reads the body before the
/// guest has ended it: with Nagle on (Spin), that write waits for the
/// client's delayed ACK, 40 ms. With the length the body is complete at its
/// last byte, so head and body leave in one write.
pub fn send<N: AsRef<str>, V: AsRef<[u8]>>(out: ResponseOutparam, status: u16, header_list: &[(N, V)], bytes: &[u8]) {
    let length = crate::headers::content_length(status, header_list, bytes.len());
    let mut list: Vec<(&str, &[u8])> = header_list.iter().map(|(n, v)| (n.as_ref(), v.as_ref())).collect();
    list.extend(length.as_deref().map(|v| ("content-length", v.as_bytes())));
    if let Some(body) = respond(out, status, &list, bytes) {
        body.finish();
    }
}

/// A JSON answer with the standard headers plus `extra`.
pub fn send_json(out: ResponseOutparam, status: u16, json: &str, extra: &[(String, String)]) {
    let mut list: Vec<(&str, &str)> = headers::JSON.to_vec();
    list.extend(extra.iter().map(|(n, v)| (n.as_str(), v.as_str())));
    send(out, status, &list, json.as_bytes());
}

/// 421 `host_not_allowed` ([`crate::hosts`]), for every component alike.
pub fn send_host_not_allowed(out: ResponseOutparam) {
    send_json(out, crate::hosts::STATUS, crate::hosts::BODY, &[]);
}

/// The envelope at its status, with its headers.
#[cfg(feature = "envelope")]
pub fn send_error(out: ResponseOutparam, e: &crate::ApiError) {
    send_json(out, e.status, &e.body(), &e.headers);
}
