//! Outgoing calls over `wasi:http/outgoing-handler`, with timeouts (which
//! spin-sdk's `send` does not expose) and one classification of failures.

use std::time::Duration;

use wasi::http::outgoing_handler;
use wasi::http::types as wasi_http;
use wasi::io::poll::Pollable;
use wasi::io::streams::InputStream;

use crate::body::{classify, read_to_end, write_stream};
use crate::{Method, TransportFailure};

/// The host enforces these (Spin and wasmtime honour `request-options`); the
/// guest also gives up waiting for the head after `connect + first_byte`,
/// in case a host does not.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub connect: Duration,
    pub first_byte: Duration,
    /// `None` for streams, whose readers keep their own idle clock.
    pub between_bytes: Option<Duration>,
}

impl Timeouts {
    /// One limit for every phase.
    pub fn all(limit: Duration) -> Timeouts {
        Timeouts { connect: limit, first_byte: limit, between_bytes: Some(limit) }
    }
}

/// One outgoing request.
pub struct Outgoing<'a> {
    pub method: Method,
    pub https: bool,
    pub authority: &'a str,
    pub path_and_query: &'a str,
    pub headers: Vec<(String, Vec<u8>)>,
    /// Sent with its `content-length`, never chunked: some upstreams, WAFs
    /// and proxies refuse chunked requests (411).
    pub body: Option<&'a [u8]>,
    pub timeouts: Timeouts,
}

/// An upstream's answer: its status and headers, and its body to read.
pub struct Upstream {
    pub status: u16,
    // Field order is drop order: the stream is a child of the body, which is
    // a child of the response.
    pub stream: InputStream,
    _body: wasi_http::IncomingBody,
    response: wasi_http::IncomingResponse,
}

impl Upstream {
    /// A response header's values.
    pub fn header(&self, name: &str) -> Vec<Vec<u8>> {
        self.response.headers().get(&name.to_string())
    }

    /// The whole body, bounded, with `quiet` as the between-bytes limit.
    pub fn read_to_end(&self, limit: usize, quiet: Option<Duration>) -> Result<Vec<u8>, TransportFailure> {
        read_to_end(&self.stream, limit, quiet)
    }
}

/// Sends `spec` and waits for the answer's head.
pub fn call(spec: &Outgoing<'_>) -> Result<Upstream, TransportFailure> {
    start(spec)?.wait()
}

/// A request sent whose answer has not been waited for: [`start`] returns at
/// once, so a guest can go on with its own work (a relayed stream) and look
/// at the answer when one of [`Pending::pollables`] is ready.
pub struct Pending {
    // Field order is drop order: the pollable is a child of the future.
    head: Pollable,
    backstop: Pollable,
    future: wasi_http::FutureIncomingResponse,
    finished: Result<(), wasi_http::ErrorCode>,
    sent: bool,
}

/// Sends `spec` (its body written and finished) without waiting for the answer.
pub fn start(spec: &Outgoing<'_>) -> Result<Pending, TransportFailure> {
    let mut headers = spec.headers.clone();
    if let Some(body) = spec.body {
        headers.push(("content-length".into(), body.len().to_string().into_bytes()));
    }
    // Only a header the host refuses could fail here; no request was sent.
    let unbuildable = TransportFailure::Unreachable;
    let request = wasi_http::OutgoingRequest::new(wasi_http::Fields::from_list(&headers).map_err(|_| unbuildable)?);
    let method = match spec.method {
        Method::Get => wasi_http::Method::Get,
        Method::Post => wasi_http::Method::Post,
    };
    let scheme = if spec.https { wasi_http::Scheme::Https } else { wasi_http::Scheme::Http };
    let built = request.set_method(&method).is_ok()
        && request.set_scheme(Some(&scheme)).is_ok()
        && request.set_authority(Some(spec.authority)).is_ok()
        && request.set_path_with_query(Some(spec.path_and_query)).is_ok();
    if !built {
        return Err(unbuildable);
    }
    let outgoing_body = request.body().map_err(|()| unbuildable)?;
    let ns = |d: Duration| d.as_nanos() as u64;
    let options = wasi_http::RequestOptions::new();
    let _ = options.set_connect_timeout(Some(ns(spec.timeouts.connect)));
    let _ = options.set_first_byte_timeout(Some(ns(spec.timeouts.first_byte)));
    if let Some(quiet) = spec.timeouts.between_bytes {
        let _ = options.set_between_bytes_timeout(Some(ns(quiet)));
    }
    let future = outgoing_handler::handle(request, Some(options)).map_err(|code| classify(&code))?;
    // An upstream may answer before it has read the body (under Spin the write
    // then fails): a failed write is not the outcome, the answer is, if one comes.
    let mut sent = true;
    if let Some(bytes) = spec.body {
        sent = match outgoing_body.write() {
            Ok(stream) => {
                // Reuse the response writer's backpressure loop on this request body.
                let ok = write_stream(&stream, bytes);
                drop(stream);
                ok
            }
            Err(()) => false,
        };
    }
    let finished = wasi_http::OutgoingBody::finish(outgoing_body, None);
    let head = future.subscribe();
    let backstop = monotonic_backstop(spec.timeouts);
    Ok(Pending { head, backstop, future, finished, sent })
}

impl Pending {
    /// Ready when the head has come or the guest's own deadline passed.
    pub fn pollables(&self) -> [&Pollable; 2] {
        [&self.head, &self.backstop]
    }

    /// The answer once it is there, `Timeout` once the deadline passed, else
    /// `None` (still waiting). Does not block.
    pub fn poll(&self) -> Option<Result<Upstream, TransportFailure>> {
        match self.future.get() {
            Some(answer) => Some(self.answer(Some(answer))),
            None if self.backstop.ready() => Some(Err(TransportFailure::Timeout)),
            None => None,
        }
    }

    /// Waits for the answer's head (or the deadline).
    pub fn wait(self) -> Result<Upstream, TransportFailure> {
        if !wasi::io::poll::poll(&self.pollables()).contains(&0) {
            return Err(TransportFailure::Timeout);
        }
        self.answer(self.future.get())
    }

    fn answer(
        &self,
        answer: Option<Result<Result<wasi_http::IncomingResponse, wasi_http::ErrorCode>, ()>>,
    ) -> Result<Upstream, TransportFailure> {
        if !matches!(answer, Some(Ok(Ok(_)))) {
            if let Err(code) = &self.finished {
                return Err(classify(code));
            }
            if !self.sent {
                return Err(TransportFailure::Unreachable);
            }
        }
        let response = match answer {
            Some(Ok(Ok(response))) => response,
            Some(Ok(Err(code))) => return Err(classify(&code)),
            _ => return Err(TransportFailure::Unreachable),
        };
        let status = response.status();
        let body = response.consume().map_err(|()| TransportFailure::Unreachable)?;
        let stream = body.stream().map_err(|()| TransportFailure::Unreachable)?;
        Ok(Upstream { status, stream, _body: body, response })
    }
}

fn monotonic_backstop(t: Timeouts) -> Pollable {
    wasi::clocks::monotonic_clock::subscribe_duration(t.connect.saturating_add(t.first_byte).as_nanos() as u64)
}
