//! Spin entry point: turns the wasi:http request into an [`api::Request`],
//! provides Spin SQLite, the wall clock, wasi:random and outbound HTTP (with
//! timeouts) to [`api::handle`], and writes its answer. No decisions here.

use std::time::Duration;

use spin_sdk::http::{Fields, IncomingRequest, OutgoingBody, OutgoingResponse, ResponseOutparam};
use spin_sdk::http_component;
use spin_sdk::sqlite3;
use wasi::http::outgoing_handler;
use wasi::http::types as wasi_http;
use wasi::io::streams::{InputStream, OutputStream, StreamError as IoError};

use crate::api::{self, Body, Config, Ctx, Random, Request, Response, MAX_REQUEST_BODY};
use crate::db::{Db, DbError, Row, Val};
use crate::error::ApiError;
use crate::search::{Egress, OutboundRequest, OutboundResponse, TransportFailure, MAX_PROVIDER_BODY};

const READ_CHUNK: u64 = 64 * 1024;

/// Request headers the API looks at; nothing else is copied.
const HEADERS: &[&str] = &["authorization", "cookie", "content-type", "origin", "spin-full-url", "spin-client-addr"];

#[http_component]
async fn handle(req: IncomingRequest, out: ResponseOutparam) {
    let path_info = path_info(&req);
    if let Some(target) = crate::inference::route(&req.method().to_string(), &path_info) {
        return match target {
            Ok(target) => proxy_inference(&req, out, &target),
            Err(e) => send(out, e.into()),
        };
    }
    let request = to_request(&req);
    let response =
        match (Config::from_vars(|name| spin_sdk::variables::get(name).ok()), sqlite3::Connection::open("default")) {
            (Err(e), _) => e.into(),
            (Ok(_), Err(_)) => {
                ApiError::new(500, "storage_error", "the Playground database could not be opened").into()
            }
            (Ok(config), Ok(conn)) => {
                let db = SpinDb(conn);
                let ctx = Ctx { db: &db, config: &config, now_ms: now_ms(), random: &WasiRandom, egress: &WasiEgress };
                api::handle(&ctx, &request)
            }
        };
    send(out, response);
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

fn to_request(req: &IncomingRequest) -> Request {
    let headers = req.headers();
    let mut list = Vec::new();
    for name in HEADERS {
        let mut values = headers.get(name);
        // Spin appends its own `spin-*` value after any copy a client sent: the last is Spin's.
        if name.starts_with("spin-") {
            values = values.pop().into_iter().collect();
        }
        for value in values {
            if let Ok(v) = String::from_utf8(value) {
                list.push((name.to_string(), v));
            }
        }
    }
    let path_info = path_info(req);
    let path_with_query = req.path_with_query().unwrap_or_default();
    let query = path_with_query.split_once('?').map(|(_, q)| q.to_string()).unwrap_or_default();
    let method = req.method().to_string();
    let body = if method == "POST" { read_limited(req, MAX_REQUEST_BODY) } else { Body::Bytes(Vec::new()) };
    Request { method, path: path_info, query, headers: list, body }
}

fn path_info(req: &IncomingRequest) -> String {
    // The last value is Spin's (a client's copy may precede it).
    req.headers().get("spin-path-info").pop().and_then(|v| String::from_utf8(v).ok()).unwrap_or_default()
}

fn send(out: ResponseOutparam, response: Response) {
    let mut list = vec![
        ("content-type".to_string(), b"application/json; charset=utf-8".to_vec()),
        ("cache-control".to_string(), b"no-store".to_vec()),
        ("x-content-type-options".to_string(), b"nosniff".to_vec()),
    ];
    list.extend(response.headers.iter().map(|(n, v)| (n.clone(), v.as_bytes().to_vec())));
    let Ok(headers) = Fields::from_list(&list) else { return };
    let outgoing = OutgoingResponse::new(headers);
    let _ = outgoing.set_status_code(response.status);
    let Ok(body) = outgoing.body() else { return };
    out.set(outgoing);
    if let Ok(stream) = body.write() {
        write_all(&stream, response.body.as_bytes());
        let _ = stream.blocking_flush();
    }
    let _ = OutgoingBody::finish(body, None);
}

fn write_all(stream: &OutputStream, mut bytes: &[u8]) -> bool {
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
    stream.flush().is_ok()
}

// ---- storage ------------------------------------------------------------------------------

struct SpinDb(sqlite3::Connection);

impl Db for SpinDb {
    fn query(&self, sql: &str, params: &[Val]) -> Result<Vec<Row>, DbError> {
        let params: Vec<sqlite3::Value> = params
            .iter()
            .map(|v| match v {
                Val::Int(i) => sqlite3::Value::Integer(*i),
                Val::Real(r) => sqlite3::Value::Real(*r),
                Val::Text(t) => sqlite3::Value::Text(t.clone()),
                Val::Blob(b) => sqlite3::Value::Blob(b.clone()),
                Val::Null => sqlite3::Value::Null,
            })
            .collect();
        let result = self.0.execute(sql, &params).map_err(|e| DbError(format!("{e:?}")))?;
        Ok(result
            .rows
            .into_iter()
            .map(|row| {
                Row(row
                    .values
                    .into_iter()
                    .map(|v| match v {
                        sqlite3::Value::Integer(i) => Val::Int(i),
                        sqlite3::Value::Real(r) => Val::Real(r),
                        sqlite3::Value::Text(t) => Val::Text(t),
                        sqlite3::Value::Blob(b) => Val::Blob(b),
                        sqlite3::Value::Null => Val::Null,
                    })
                    .collect())
            })
            .collect())
    }
}

struct WasiRandom;

impl Random for WasiRandom {
    fn fill(&self, buf: &mut [u8]) {
        let bytes = wasi::random::random::get_random_bytes(buf.len() as u64);
        buf.copy_from_slice(&bytes[..buf.len()]);
    }
}

// ---- outbound HTTP ------------------------------------------------------------------------------

struct WasiEgress;

fn classify(code: &wasi_http::ErrorCode) -> TransportFailure {
    use wasi_http::ErrorCode as E;
    match code {
        E::ConnectionTimeout | E::ConnectionReadTimeout | E::HttpResponseTimeout | E::DnsTimeout => {
            TransportFailure::Timeout
        }
        E::HttpRequestDenied => TransportFailure::NotAllowed,
        _ => TransportFailure::Unreachable,
    }
}

impl Egress for WasiEgress {
    fn send(&self, spec: &OutboundRequest) -> Result<OutboundResponse, TransportFailure> {
        let headers: Vec<(String, Vec<u8>)> =
            spec.headers.iter().map(|(n, v)| (n.clone(), v.as_bytes().to_vec())).collect();
        let fields = wasi_http::Fields::from_list(&headers).map_err(|_| TransportFailure::Unreachable)?;
        let request = wasi_http::OutgoingRequest::new(fields);
        let method = if spec.method == "POST" { wasi_http::Method::Post } else { wasi_http::Method::Get };
        let scheme = if spec.https { wasi_http::Scheme::Https } else { wasi_http::Scheme::Http };
        let built = request.set_method(&method).is_ok()
            && request.set_scheme(Some(&scheme)).is_ok()
            && request.set_authority(Some(&spec.authority)).is_ok()
            && request.set_path_with_query(Some(&spec.path_and_query)).is_ok();
        if !built {
            return Err(TransportFailure::Unreachable);
        }
        let outgoing_body = request.body().map_err(|_| TransportFailure::Unreachable)?;
        let timeout = Duration::from_millis(spec.timeout_ms);
        let ns = timeout.as_nanos() as u64;
        let options = wasi_http::RequestOptions::new();
        let _ = options.set_connect_timeout(Some(ns));
        let _ = options.set_first_byte_timeout(Some(ns));
        let _ = options.set_between_bytes_timeout(Some(ns));
        let future = outgoing_handler::handle(request, Some(options)).map_err(|code| classify(&code))?;
        if let Some(body) = &spec.body {
            let stream = outgoing_body.write().map_err(|_| TransportFailure::Unreachable)?;
            if !write_all(&stream, body.as_bytes()) {
                return Err(TransportFailure::Unreachable);
            }
            drop(stream);
        }
        wasi_http::OutgoingBody::finish(outgoing_body, None).map_err(|code| classify(&code))?;

        // The whole exchange also has a guest-side deadline (first byte).
        let pollable = future.subscribe();
        let timer = wasi::clocks::monotonic_clock::subscribe_duration(ns.saturating_add(ns / 2));
        if !wasi::io::poll::poll(&[&pollable, &timer]).contains(&0) {
            return Err(TransportFailure::Timeout);
        }
        let response = match future.get() {
            Some(Ok(Ok(response))) => response,
            Some(Ok(Err(code))) => return Err(classify(&code)),
            _ => return Err(TransportFailure::Unreachable),
        };
        let status = response.status();
        let retry_after = response
            .headers()
            .get(&"retry-after".to_string())
            .into_iter()
            .next()
            .and_then(|v| String::from_utf8(v).ok());
        let body = response.consume().map_err(|_| TransportFailure::Unreachable)?;
        let stream = body.stream().map_err(|_| TransportFailure::Unreachable)?;
        let bytes = read_to_end(&stream, MAX_PROVIDER_BODY, timeout);
        drop(stream);
        drop(body);
        Ok(OutboundResponse { status, retry_after, body: bytes? })
    }
}

/// Reads a provider body (bounded), with the guest keeping the
/// between-bytes clock so a stall is the timeout it is.
fn read_to_end(stream: &InputStream, limit: usize, quiet: Duration) -> Result<Vec<u8>, TransportFailure> {
    let mut bytes = Vec::new();
    loop {
        let readable = stream.subscribe();
        let timer = wasi::clocks::monotonic_clock::subscribe_duration(quiet.as_nanos() as u64);
        if !wasi::io::poll::poll(&[&readable, &timer]).contains(&0) {
            return Err(TransportFailure::Timeout);
        }
        match stream.read(READ_CHUNK) {
            Ok(chunk) => {
                bytes.extend_from_slice(&chunk);
                if bytes.len() > limit {
                    return Err(TransportFailure::TooLarge);
                }
            }
            Err(IoError::Closed) => return Ok(bytes),
            Err(IoError::LastOperationFailed(e)) => {
                return Err(
                    wasi_http::http_error_code(&e).map_or(TransportFailure::Unreachable, |code| classify(&code))
                );
            }
        }
    }
}

// ---- the inference pass-through (see crate::inference) -----------------------------------------

/// First-byte and between-bytes limit of the inference stream (a slow demo
/// turn sends a delta every half second).
const INFERENCE_TIMEOUT: Duration = Duration::from_secs(60);

fn proxy_inference(req: &IncomingRequest, out: ResponseOutparam, target: &crate::inference::Target) {
    use crate::inference as inf;
    let base = match inf::base_url(spin_sdk::variables::get("inference_base_url").ok()) {
        Ok(b) => b,
        Err(e) => return send(out, e.into()),
    };
    let forwarded: Vec<(String, Vec<u8>)> = {
        let headers = req.headers();
        let mut list = Vec::new();
        for name in inf::FORWARDED_REQUEST_HEADERS {
            for value in headers.get(name) {
                list.push((name.to_string(), value));
            }
        }
        list
    };
    let body = match read_limited(req, inf::MAX_CHAT_BODY) {
        Body::TooLarge => return send(out, ApiError::body_too_large().into()),
        Body::Bytes(b) => b,
    };
    let upstream = match inference_request(&base, &inf::upstream_path(&base, target), &forwarded, &body) {
        Ok(r) => r,
        Err(failure) => return send(out, inf::unreachable(failure == TransportFailure::Timeout).into()),
    };
    let mut list = vec![
        ("cache-control".to_string(), b"no-store".to_vec()),
        ("x-content-type-options".to_string(), b"nosniff".to_vec()),
    ];
    let upstream_headers = upstream.headers();
    for name in inf::FORWARDED_RESPONSE_HEADERS {
        for value in upstream_headers.get(&name.to_string()) {
            list.push((name.to_string(), value));
        }
    }
    drop(upstream_headers);
    let Ok(headers) = Fields::from_list(&list) else { return };
    let outgoing = OutgoingResponse::new(headers);
    let _ = outgoing.set_status_code(upstream.status());
    let Ok(out_body) = outgoing.body() else { return };
    out.set(outgoing);
    let Ok(out_stream) = out_body.write() else { return };
    if let Ok(in_body) = upstream.consume() {
        if let Ok(in_stream) = in_body.stream() {
            pump(&in_stream, &out_stream);
            drop(in_stream);
        }
        drop(in_body);
    }
    let _ = out_stream.blocking_flush();
    drop(out_stream);
    let _ = OutgoingBody::finish(out_body, None);
}

/// Copies the upstream body chunk by chunk, flushing each, until it ends,
/// stalls past [`INFERENCE_TIMEOUT`] or the browser goes away.
fn pump(input: &InputStream, output: &OutputStream) {
    loop {
        let readable = input.subscribe();
        let timer = wasi::clocks::monotonic_clock::subscribe_duration(INFERENCE_TIMEOUT.as_nanos() as u64);
        if !wasi::io::poll::poll(&[&readable, &timer]).contains(&0) {
            return;
        }
        match input.read(READ_CHUNK) {
            Ok(chunk) if chunk.is_empty() => continue,
            Ok(chunk) => {
                if !write_all(output, &chunk) {
                    return;
                }
            }
            Err(_) => return,
        }
    }
}

fn read_limited(req: &IncomingRequest, limit: usize) -> Body {
    let Ok(body) = req.consume() else { return Body::Bytes(Vec::new()) };
    let Ok(stream) = body.stream() else { return Body::Bytes(Vec::new()) };
    let mut bytes = Vec::new();
    loop {
        match stream.blocking_read(READ_CHUNK) {
            Ok(chunk) => {
                bytes.extend_from_slice(&chunk);
                if bytes.len() > limit {
                    return Body::TooLarge;
                }
            }
            Err(_) => return Body::Bytes(bytes),
        }
    }
}

fn inference_request(
    base: &crate::util::BaseUrl,
    path: &str,
    headers: &[(String, Vec<u8>)],
    body: &[u8],
) -> Result<wasi_http::IncomingResponse, TransportFailure> {
    let fields = wasi_http::Fields::from_list(headers).map_err(|_| TransportFailure::Unreachable)?;
    let request = wasi_http::OutgoingRequest::new(fields);
    let scheme = if base.https { wasi_http::Scheme::Https } else { wasi_http::Scheme::Http };
    let built = request.set_method(&wasi_http::Method::Post).is_ok()
        && request.set_scheme(Some(&scheme)).is_ok()
        && request.set_authority(Some(&base.authority)).is_ok()
        && request.set_path_with_query(Some(path)).is_ok();
    if !built {
        return Err(TransportFailure::Unreachable);
    }
    let outgoing_body = request.body().map_err(|_| TransportFailure::Unreachable)?;
    let ns = INFERENCE_TIMEOUT.as_nanos() as u64;
    let options = wasi_http::RequestOptions::new();
    let _ = options.set_connect_timeout(Some(ns));
    let _ = options.set_first_byte_timeout(Some(ns));
    let _ = options.set_between_bytes_timeout(Some(ns));
    let future = outgoing_handler::handle(request, Some(options)).map_err(|code| classify(&code))?;
    {
        let stream = outgoing_body.write().map_err(|_| TransportFailure::Unreachable)?;
        if !write_all(&stream, body) {
            return Err(TransportFailure::Unreachable);
        }
    }
    wasi_http::OutgoingBody::finish(outgoing_body, None).map_err(|code| classify(&code))?;
    let pollable = future.subscribe();
    let timer = wasi::clocks::monotonic_clock::subscribe_duration(ns);
    if !wasi::io::poll::poll(&[&pollable, &timer]).contains(&0) {
        return Err(TransportFailure::Timeout);
    }
    match future.get() {
        Some(Ok(Ok(response))) => Ok(response),
        Some(Ok(Err(code))) => Err(classify(&code)),
        _ => Err(TransportFailure::Unreachable),
    }
}
