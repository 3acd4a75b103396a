//! Spin entry point: turns the wasi:http request into a
//! [`http::Request`], provides Spin SQLite, the wall clock, wasi:random and
//! outbound HTTP (`guest-http`'s calls with timeouts) to [`api::handle`], and
//! writes its answer. No decisions here.

use std::time::Duration;

use guest_http::{
    call, pump, read_request_body, respond, send_error, send_json, spin_header, Method, Outgoing, Pump, Step, Timeouts,
};
use spin_sdk::http::{IncomingRequest, ResponseOutparam};
use spin_sdk::http_component;

use crate::context::{Config, Ctx, Random};
use crate::egress::{Egress, OutboundRequest, OutboundResponse, TransportFailure};
use crate::error;
use crate::http::{Body, Request, Response, MAX_REQUEST_BODY};
use crate::inference::{self, Utf8Carry};
use crate::search::MAX_PROVIDER_BODY;
use crate::{api, trace_pages};
use gateway_ledger::SpinDb;

/// Request headers the API looks at; nothing else is copied. The forwarded
/// ones count only from a peer in `trusted_proxies` (see `net`).
const HEADERS: &[&str] = &[
    "authorization",
    "cookie",
    "content-type",
    "origin",
    "spin-full-url",
    "spin-client-addr",
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-forwarded-host",
    "forwarded",
];

#[http_component]
fn handle(req: IncomingRequest, out: ResponseOutparam) {
    if !guest_http::host_allowed(&req) {
        return guest_http::send_host_not_allowed(out);
    }
    let (path, query) = guest_http::path_and_query(&req);
    if let Some(target) = inference::route(&req.method().to_string(), &path) {
        return match target {
            Ok(target) => proxy_inference(&req, out, &target),
            Err(e) => send_error(out, &e),
        };
    }
    let request = to_request(&req, path, query);
    let (response, db): (Response, _) =
        match (Config::from_vars(|name| spin_sdk::variables::get(name).ok()), SpinDb::open("default")) {
            (Err(e), _) => (e.into(), None),
            (Ok(_), Err(_)) => (error::storage_not_opened().into(), None),
            (Ok(config), Ok(db)) => {
                let ctx = Ctx {
                    db: &db,
                    config: &config,
                    now_ms: guest_http::unix_ms() as i64,
                    random: &WasiRandom,
                    egress: &WasiEgress,
                };
                (api::handle(&ctx, &request), Some(db))
            }
        };
    match (response.stream, db) {
        (Some(pages), Some(db)) => send_streamed(out, response.status, &response.headers, &response.body, pages, &db),
        _ => send_json(out, response.status, &response.body, &response.headers),
    }
}

/// A body that goes on after `first`: the head and `first` leave, then each
/// page as it is read, every write waiting for the host's permits (a slow
/// client holds back the reads, not memory). A page that fails after the
/// head is sent aborts the body (see [`trace_pages::Drained::Failed`]).
fn send_streamed(
    out: ResponseOutparam,
    status: u16,
    extra: &[(String, String)],
    first: &str,
    pages: trace_pages::StepPages,
    db: &SpinDb,
) {
    let mut list: Vec<(&str, &str)> = guest_http::headers::JSON.to_vec();
    list.extend(extra.iter().map(|(n, v)| (n.as_str(), v.as_str())));
    let Some(body) = respond(out, status, &list, first.as_bytes()) else { return };
    match trace_pages::drain(pages, db, trace_pages::WRITE_AT, |chunk| body.write(chunk)) {
        trace_pages::Drained::Complete => body.finish(),
        trace_pages::Drained::ClientGone => {}
        trace_pages::Drained::Failed(e) => {
            eprintln!("playground: a trace read failed after its head was sent, the body is aborted: {}", e.0);
            // Dropped unfinished, the body is aborted (wasi:http), never ended short.
            drop(body);
        }
    }
}

fn to_request(req: &IncomingRequest, path: String, query: String) -> Request {
    let headers = req.headers();
    let mut list = Vec::new();
    for name in HEADERS {
        // Spin appends its own `spin-*` value after any copy a client sent: the last is Spin's.
        let values: Vec<String> = match name.starts_with("spin-") {
            true => spin_header(req, name).into_iter().collect(),
            false => headers.get(name).into_iter().filter_map(|v| String::from_utf8(v).ok()).collect(),
        };
        list.extend(values.into_iter().map(|v| (name.to_string(), v)));
    }
    let method = req.method().to_string();
    // A broken stream is `Body::Unreadable` (a typed 400), never a short body.
    let body = match method.as_str() {
        "POST" => Body::from_read(read_request_body(req, MAX_REQUEST_BODY)),
        _ => Body::Bytes(Vec::new()),
    };
    Request { method, path, query, headers: list, body }
}

// ---- storage, randomness ----------------------------------------------------------------

struct WasiRandom;

impl Random for WasiRandom {
    fn fill(&self, buf: &mut [u8]) {
        let bytes = wasi::random::random::get_random_bytes(buf.len() as u64);
        buf.copy_from_slice(&bytes[..buf.len()]);
    }
}

// ---- outbound HTTP ------------------------------------------------------------------------------

struct WasiEgress;

impl Egress for WasiEgress {
    fn send(&self, spec: &OutboundRequest) -> Result<OutboundResponse, TransportFailure> {
        let timeout = Duration::from_millis(spec.timeout_ms);
        let upstream = call(&Outgoing {
            method: spec.method,
            https: spec.https,
            authority: &spec.authority,
            path_and_query: &spec.path_and_query,
            headers: spec.headers.iter().map(|(n, v)| (n.clone(), v.clone().into_bytes())).collect(),
            body: spec.body.as_deref().map(str::as_bytes),
            timeouts: Timeouts::all(timeout),
        })?;
        let retry_after = upstream.header("retry-after").into_iter().next().and_then(|v| String::from_utf8(v).ok());
        // The guest keeps the between-bytes clock too, so a stall is the timeout it is.
        let body = upstream.read_to_end(MAX_PROVIDER_BODY, Some(timeout))?;
        Ok(OutboundResponse { status: upstream.status, retry_after, body })
    }
}

// ---- the inference pass-through (see crate::inference) -----------------------------------------

/// Connect and first-byte limit of the inference call, and the stream's idle
/// limit (a slow demo turn sends a delta every half second).
const INFERENCE_TIMEOUT: Duration = Duration::from_secs(60);

fn proxy_inference(req: &IncomingRequest, out: ResponseOutparam, target: &inference::Target) {
    let base = match inference::base_url(spin_sdk::variables::get("inference_base_url").ok()) {
        Ok(b) => b,
        Err(e) => return send_error(out, &e),
    };
    let headers = req.headers();
    let forwarded: Vec<(String, Vec<u8>)> = inference::FORWARDED_REQUEST_HEADERS
        .iter()
        .flat_map(|name| headers.get(name).into_iter().map(|value| (name.to_string(), value)))
        .collect();
    drop(headers);
    let body = Body::from_read(read_request_body(req, inference::MAX_CHAT_BODY));
    let bytes = match body.bytes() {
        Ok(bytes) => bytes,
        Err(e) => return send_error(out, &e),
    };
    let upstream = match call(&Outgoing {
        method: Method::Post,
        https: base.https,
        authority: &base.authority,
        path_and_query: &inference::upstream_path(&base, target),
        headers: forwarded,
        body: Some(bytes),
        // The stream's silence is the pump's idle limit.
        timeouts: Timeouts { connect: INFERENCE_TIMEOUT, first_byte: INFERENCE_TIMEOUT, between_bytes: None },
    }) {
        Ok(upstream) => upstream,
        Err(failure) => return send_error(out, &inference::unreachable(failure == TransportFailure::Timeout)),
    };
    // Never HTML (or anything else a browser might render) on the console's origin.
    if let Err(e) = inference::check_content_type(&upstream.header("content-type"), upstream.status) {
        return send_error(out, &e);
    }
    let mut list = vec![("cache-control".to_string(), b"no-store".to_vec())];
    list.push(("x-content-type-options".to_string(), b"nosniff".to_vec()));
    for name in inference::FORWARDED_RESPONSE_HEADERS {
        list.extend(upstream.header(name).into_iter().map(|value| (name.to_string(), value)));
    }
    let Some(downstream) = respond(out, upstream.status, &list, &[]) else { return };
    let mut text = Utf8Carry::default();
    let rules = Pump { keepalive: None, idle_limit: Some(INFERENCE_TIMEOUT) };
    let relay = |chunk: &[u8], out: &mut String| {
        text.push(chunk, out);
        Step::Continue
    };
    pump(&upstream.stream, &downstream, rules, relay, |_| {});
    let rest = text.finish();
    if rest.is_empty() || downstream.write(rest.as_bytes()) {
        downstream.finish();
    }
}
