//! Spin entry point and wasi:http plumbing. Every decision is made in the
//! pure modules; this file moves bytes.
//!
//! Streams are pumped with WASI pollables: wait for upstream bytes or the
//! keepalive timer, whichever is first; every upstream read's frames go out in
//! one write (coalesced under backlog). A client that leaves ends this
//! instance (the host drops it), which drops the upstream request.

use std::time::Duration;

use serde_json::{json, Value};
use spin_sdk::http::{Fields, IncomingRequest, OutgoingBody, OutgoingResponse, ResponseOutparam};
use spin_sdk::http_component;
use spin_sdk::variables;
use sse::{AdminEventFilter, Flow, StreamError, KEEPALIVE};
use wasi::http::outgoing_handler;
use wasi::http::types as wasi_http;
use wasi::io::streams::{InputStream, OutputStream, StreamError as IoError};

use crate::error::{empty_object, ApiError, TransportFailure};
use crate::redact::Redactor;
use crate::relay::{TurnFlow, TurnRelay};
use crate::routes::{self, Route};
use crate::upstream::UpstreamUrl;

/// Browser request bodies (a session or a turn) are small.
const MAX_REQUEST_BODY: usize = 64 * 1024;
/// Longest turn text accepted, in characters.
const MAX_TURN_TEXT: usize = 32 * 1024;
/// Upstream JSON answers larger than this are refused, not buffered.
const MAX_UPSTREAM_JSON: usize = 1 << 20;
const READ_CHUNK: u64 = 64 * 1024;

#[http_component]
async fn handle(req: IncomingRequest, out: ResponseOutparam) {
    let method = req.method().to_string();
    // The last value is Spin's: a client's own copy may precede it.
    let path_info =
        req.headers().get("spin-path-info").pop().and_then(|v| String::from_utf8(v).ok()).unwrap_or_default();
    let path_with_query = req.path_with_query().unwrap_or_default();
    let query = path_with_query.split_once('?').map(|(_, q)| q).unwrap_or("");
    let route = match routes::route(&method, &path_info, query) {
        Ok(route) => route,
        Err(e) => return send_error(out, &e),
    };
    let ctx = match Ctx::load() {
        Ok(ctx) => ctx,
        Err(e) => return send_error(out, &e),
    };
    if let Err((e, out)) = dispatch(&ctx, route, &req, out) {
        send_error(out, &e);
    }
}

fn send_error(out: ResponseOutparam, e: &ApiError) {
    send_json(out, e.status, &e.body());
}

/// Configuration, from Spin variables, read per request.
struct Ctx {
    upstream: UpstreamUrl,
    consumer_key: String,
    timeout: Duration,
    keepalive: Duration,
    redactor: Redactor,
}

fn var(name: &str) -> Result<String, ApiError> {
    variables::get(name).map_err(|_| ApiError::new(500, "server_misconfigured", "a server variable is missing"))
}

impl Ctx {
    fn load() -> Result<Ctx, ApiError> {
        let upstream = UpstreamUrl::parse(&var("upstream_url")?)
            .ok_or_else(|| ApiError::new(500, "server_misconfigured", "upstream_url is not an http(s) URL"))?;
        let consumer_key = var("consumer_key")?;
        let ms = |name: &str, default: u64| var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
        // Redaction needs both keys; the admin key is otherwise read only where it is sent.
        let admin_key = var("admin_key")?;
        let redactor = Redactor::new([consumer_key.as_str(), admin_key.as_str()]);
        Ok(Ctx {
            upstream,
            consumer_key,
            timeout: Duration::from_millis(ms("upstream_timeout_ms", 10_000)),
            keepalive: Duration::from_millis(ms("sse_keepalive_ms", 15_000)),
            redactor,
        })
    }
}

/// Runs a route. An error comes back with the still-unanswered outparam so
/// the caller sends the envelope; once a stream has started, errors are
/// frames inside it instead.
fn dispatch(
    ctx: &Ctx,
    route: Route,
    req: &IncomingRequest,
    out: ResponseOutparam,
) -> Result<(), (ApiError, ResponseOutparam)> {
    macro_rules! try_out {
        ($e:expr, $out:expr) => {
            match $e {
                Ok(v) => v,
                Err(e) => return Err((e.into(), $out)),
            }
        };
    }
    match route {
        Route::Config => {
            let body = try_out!(config(ctx), out);
            send_json(out, 200, &body);
        }
        Route::CreateSession => {
            let body = try_out!(read_json_body(req), out);
            let agent_id = try_out!(
                body.get("agent_id").and_then(Value::as_str).ok_or_else(|| ApiError::new(
                    400,
                    "missing_agent_id",
                    "agent_id (a string) is required"
                )),
                out
            );
            let agent_id = try_out!(routes::agent_id(agent_id), out);
            let end_user_id = try_out!(var("end_user_id"), out);
            let payload = json!({ "agent_id": agent_id, "end_user_id": end_user_id }).to_string();
            let response =
                try_out!(call(ctx, Call::post(&ctx.upstream.path("/v1/sessions"), Bearer::Consumer, payload)), out);
            let (status, body) = try_out!(json_answer(ctx, response, "session_create_failed"), out);
            send_json(out, status, &body);
        }
        Route::Turn { session_id } => {
            let body = try_out!(read_json_body(req), out);
            let text = try_out!(
                body.get("text").and_then(Value::as_str).ok_or_else(|| ApiError::new(
                    400,
                    "missing_text",
                    "text (a string) is required"
                )),
                out
            );
            if text.trim().is_empty() || text.chars().count() > MAX_TURN_TEXT {
                return Err((ApiError::new(400, "invalid_text", "text must be 1-32768 characters"), out));
            }
            let payload = json!({ "text": text }).to_string();
            let path = ctx.upstream.path(&format!("/v1/sessions/{session_id}/turns"));
            let mut call_spec = Call::post(&path, Bearer::Consumer, payload);
            call_spec.accept = "text/event-stream";
            call_spec.streaming = true;
            let response = try_out!(call(ctx, call_spec), out);
            if response.status != 200 {
                return Err((ApiError::upstream_status("turn_unavailable", response.status), out));
            }
            relay_turn(ctx, response, out);
        }
        Route::Cancel { session_id, turn_id } => {
            let path = ctx.upstream.path(&format!("/v1/sessions/{session_id}/turns/{turn_id}/cancel"));
            let response = try_out!(call(ctx, Call::post(&path, Bearer::Consumer, empty_object())), out);
            if !(200..300).contains(&response.status) {
                return Err((ApiError::upstream_status("cancel_unavailable", response.status), out));
            }
            send_json(out, 202, &empty_object());
        }
        Route::Tools { session_id } => {
            let path = ctx.upstream.path(&format!("/v1/sessions/{session_id}/tools"));
            let response = try_out!(call(ctx, Call::get(&path, Bearer::Consumer)), out);
            let (status, body) = try_out!(json_answer(ctx, response, "session_tools_unavailable"), out);
            send_json(out, status, &body);
        }
        Route::Bifrost { session_id } => {
            // INV-FAIL-VISIBLE: no key, no upstream call.
            let admin_key = try_out!(admin_key(), out);
            let path = ctx.upstream.path(&format!("/v1/sessions/{session_id}/bifrost"));
            let response = try_out!(call(ctx, Call::get(&path, Bearer::Admin(&admin_key))), out);
            let (status, body) = try_out!(json_answer(ctx, response, "bifrost_state_unavailable"), out);
            send_json(out, status, &body);
        }
        Route::AdminEvents { session_id } => {
            let admin_key = try_out!(admin_key(), out);
            let last_event_id = match header(req, "last-event-id") {
                Some(raw) => Some(try_out!(routes::last_event_id(&raw), out)),
                None => None,
            };
            admin_events(ctx, &admin_key, session_id, last_event_id, out);
        }
        Route::Affect { agent_id } => {
            let affect = try_out!(
                var("affect_read_url").and_then(|u| UpstreamUrl::parse(&u).ok_or_else(|| ApiError::new(
                    500,
                    "server_misconfigured",
                    "affect_read_url is not an http(s) URL"
                ))),
                out
            );
            let path = affect.with_query("agent_id", &routes::encode_query_value(&agent_id));
            let mut spec = Call::get(&path, Bearer::None);
            spec.target = Some(&affect);
            let response = try_out!(call(ctx, spec), out);
            if response.status == 404 {
                return Err((
                    ApiError::new(404, "affect_not_found", "no affect snapshot for this agent yet").with("status", 404),
                    out,
                ));
            }
            let (status, body) = try_out!(json_answer(ctx, response, "affect_unavailable"), out);
            send_json(out, status, &body);
        }
    }
    Ok(())
}

fn admin_key() -> Result<String, ApiError> {
    let key = var("admin_key")?;
    if key.is_empty() {
        return Err(ApiError::admin_key_not_configured());
    }
    Ok(key)
}

/// `GET /api/config`: what the console needs to start, never a key.
fn config(ctx: &Ctx) -> Result<String, ApiError> {
    let admin_configured = !var("admin_key")?.is_empty();
    let mut body = json!({
        "bifrost_visible_host": var("bifrost_visible_host")?,
        "end_user_id": var("end_user_id")?,
        "admin_configured": admin_configured,
        "agents": [],
    });
    // Nothing lost: if the agent list fails, the console says why.
    let agents = call(ctx, Call::get(&ctx.upstream.path("/v1/agents"), Bearer::Consumer))
        .and_then(|response| json_answer(ctx, response, "agents_unavailable"));
    match agents {
        Ok((200, text)) => {
            let list = serde_json::from_str::<Value>(&text).ok().and_then(|v| v.get("agents").cloned());
            match list {
                Some(Value::Array(list)) => body["agents"] = Value::Array(list),
                _ => body["agents_error"] = json!({ "error_code": "upstream_malformed" }),
            }
        }
        Ok((status, _)) => body["agents_error"] = json!({ "error_code": "agents_unavailable", "status": status }),
        Err(e) => body["agents_error"] = json!({ "error_code": e.code, "status": e.fields.get("status") }),
    }
    Ok(body.to_string())
}

// ---- upstream calls -------------------------------------------------------

enum Bearer<'a> {
    None,
    Consumer,
    Admin(&'a str),
}

struct Call<'a> {
    method: wasi_http::Method,
    path: &'a str,
    bearer: Bearer<'a>,
    body: Option<String>,
    accept: &'static str,
    last_event_id: Option<String>,
    /// Streams have no between-bytes timeout: they may be quiet for long.
    streaming: bool,
    /// Another upstream than `upstream_url` (the affect read).
    target: Option<&'a UpstreamUrl>,
}

impl<'a> Call<'a> {
    fn get(path: &'a str, bearer: Bearer<'a>) -> Self {
        Call {
            method: wasi_http::Method::Get,
            path,
            bearer,
            body: None,
            accept: "application/json",
            last_event_id: None,
            streaming: false,
            target: None,
        }
    }

    fn post(path: &'a str, bearer: Bearer<'a>, body: String) -> Self {
        Call { method: wasi_http::Method::Post, body: Some(body), ..Call::get(path, bearer) }
    }
}

/// An upstream response whose body is still to be read. Field order is drop
/// order: the stream before its body, the body before its response.
struct Upstream {
    status: u16,
    stream: InputStream,
    _body: wasi_http::IncomingBody,
    _response: wasi_http::IncomingResponse,
}

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

fn call(ctx: &Ctx, spec: Call<'_>) -> Result<Upstream, ApiError> {
    let target = spec.target.unwrap_or(&ctx.upstream);
    let mut headers: Vec<(String, Vec<u8>)> = vec![("accept".into(), spec.accept.as_bytes().to_vec())];
    match spec.bearer {
        Bearer::None => {}
        Bearer::Consumer => headers.push(("authorization".into(), format!("Bearer {}", ctx.consumer_key).into_bytes())),
        Bearer::Admin(key) => headers.push(("authorization".into(), format!("Bearer {key}").into_bytes())),
    }
    if let Some(body) = &spec.body {
        headers.push(("content-type".into(), b"application/json".to_vec()));
        // A known length, not chunked: some upstreams and proxies refuse chunked requests.
        headers.push(("content-length".into(), body.len().to_string().into_bytes()));
    }
    if let Some(id) = &spec.last_event_id {
        headers.push(("last-event-id".into(), id.as_bytes().to_vec()));
    }
    let internal = || ApiError::new(500, "internal_error", "could not build the upstream request");
    let fields = wasi_http::Fields::from_list(&headers).map_err(|_| internal())?;
    let request = wasi_http::OutgoingRequest::new(fields);
    request.set_method(&spec.method).map_err(|_| internal())?;
    let scheme = if target.https { wasi_http::Scheme::Https } else { wasi_http::Scheme::Http };
    request.set_scheme(Some(&scheme)).map_err(|_| internal())?;
    request.set_authority(Some(&target.authority)).map_err(|_| internal())?;
    request.set_path_with_query(Some(spec.path)).map_err(|_| internal())?;
    let outgoing_body = request.body().map_err(|_| internal())?;

    let options = wasi_http::RequestOptions::new();
    let ns = ctx.timeout.as_nanos() as u64;
    let _ = options.set_connect_timeout(Some(ns));
    let _ = options.set_first_byte_timeout(Some(ns));
    if !spec.streaming {
        // A backstop only: read_to_end keeps the real between-bytes clock so
        // that a stall is reported as the timeout it is.
        let _ = options.set_between_bytes_timeout(Some(ns.saturating_mul(2)));
    }
    let future = outgoing_handler::handle(request, Some(options)).map_err(|code| ApiError::from(classify(&code)))?;
    // An upstream may answer before it has read the body (the simulator's cancel
    // does; under Spin the write then fails): a failed write is not the outcome,
    // the answer is, if one comes.
    let mut sent = true;
    if let Some(body) = spec.body {
        match outgoing_body.write() {
            Ok(stream) => sent = write_all(&stream, body.as_bytes()),
            Err(()) => sent = false,
        }
    }
    let finished = wasi_http::OutgoingBody::finish(outgoing_body, None);

    future.subscribe().block();
    let answer = future.get();
    if !matches!(answer, Some(Ok(Ok(_)))) {
        if let Err(code) = finished {
            return Err(classify(&code).into());
        }
        if !sent {
            return Err(TransportFailure::Unreachable.into());
        }
    }
    let response = match answer {
        Some(Ok(Ok(response))) => response,
        Some(Ok(Err(code))) => return Err(classify(&code).into()),
        _ => return Err(TransportFailure::Unreachable.into()),
    };
    let status = response.status();
    let body = response.consume().map_err(|_| internal())?;
    let stream = body.stream().map_err(|_| internal())?;
    Ok(Upstream { status, stream, _body: body, _response: response })
}

/// Reads a JSON answer (bounded), redacts it, and maps non-2xx to the
/// route's status-preserving envelope.
fn json_answer(ctx: &Ctx, upstream: Upstream, error_code: &'static str) -> Result<(u16, String), ApiError> {
    if !(200..300).contains(&upstream.status) {
        return Err(ApiError::upstream_status(error_code, upstream.status));
    }
    let bytes = read_to_end(&upstream.stream, MAX_UPSTREAM_JSON, Some(ctx.timeout))?;
    let text = String::from_utf8(bytes).map_err(|_| ApiError::from(TransportFailure::Malformed))?;
    if serde_json::from_str::<serde::de::IgnoredAny>(&text).is_err() {
        return Err(TransportFailure::Malformed.into());
    }
    Ok((upstream.status, ctx.redactor.redact(&text).into_owned()))
}

/// Reads a body to its end, at most `limit` bytes. With `between_bytes`, a
/// body that goes quiet that long is a timeout (504): the guest keeps the
/// clock itself, since not every host reports its own between-bytes timeout
/// as one (wasmtime 48's `http-error-code` does not classify body errors).
fn read_to_end(stream: &InputStream, limit: usize, between_bytes: Option<Duration>) -> Result<Vec<u8>, ApiError> {
    let mut bytes = Vec::new();
    loop {
        let read = match between_bytes {
            None => stream.blocking_read(READ_CHUNK),
            Some(quiet) => {
                let readable = stream.subscribe();
                let timer = wasi::clocks::monotonic_clock::subscribe_duration(quiet.as_nanos() as u64);
                if !wasi::io::poll::poll(&[&readable, &timer]).contains(&0) {
                    return Err(TransportFailure::Timeout.into());
                }
                stream.read(READ_CHUNK)
            }
        };
        match read {
            Ok(chunk) => {
                bytes.extend_from_slice(&chunk);
                if bytes.len() > limit {
                    return Err(TransportFailure::TooLarge.into());
                }
            }
            Err(IoError::Closed) => return Ok(bytes),
            // A host's own between-bytes timeout is a timeout too; anything else is unreachable.
            Err(IoError::LastOperationFailed(e)) => {
                let failure =
                    wasi_http::http_error_code(&e).map_or(TransportFailure::Unreachable, |code| classify(&code));
                return Err(failure.into());
            }
        }
    }
}

// ---- streams ---------------------------------------------------------------

/// Starts a 200 `text/event-stream` response; its head leaves at once.
fn start_sse(out: ResponseOutparam) -> Option<(OutgoingBody, OutputStream)> {
    let headers = Fields::from_list(&[
        ("content-type".to_string(), b"text/event-stream".to_vec()),
        ("cache-control".to_string(), b"no-cache".to_vec()),
        // Tell nginx-style proxies not to buffer the stream.
        ("x-accel-buffering".to_string(), b"no".to_vec()),
        ("x-content-type-options".to_string(), b"nosniff".to_vec()),
    ])
    .ok()?;
    let response = OutgoingResponse::new(headers);
    response.set_status_code(200).ok()?;
    let body = response.body().ok()?;
    out.set(response);
    let stream = body.write().ok()?;
    Some((body, stream))
}

/// What one pump step produced.
enum Step {
    Continue,
    Stop,
}

/// Moves an upstream stream to the client through `on_chunk`, with a
/// keepalive comment after `keepalive` of downstream silence. `on_end` runs
/// when the upstream ends or breaks. Returns when either side is done.
fn pump(
    upstream: &InputStream,
    downstream: &OutputStream,
    keepalive: Duration,
    mut on_chunk: impl FnMut(&[u8], &mut String) -> Step,
    on_end: impl FnOnce(&mut String),
) {
    use wasi::clocks::monotonic_clock;
    let mut out = String::new();
    let keepalive_ns = keepalive.as_nanos() as u64;
    let mut on_end = Some(on_end);
    // The silence that counts is downstream: upstream bytes the filter drops
    // (heartbeats, other sessions) must not hold the keepalive back.
    let mut keepalive_at = monotonic_clock::now().saturating_add(keepalive_ns);
    loop {
        let readable = upstream.subscribe();
        let timer = monotonic_clock::subscribe_instant(keepalive_at);
        let ready = wasi::io::poll::poll(&[&readable, &timer]);
        let mut stop = false;
        if ready.contains(&0) {
            match upstream.read(READ_CHUNK) {
                Ok(chunk) if chunk.is_empty() => {}
                Ok(chunk) => stop = matches!(on_chunk(&chunk, &mut out), Step::Stop),
                Err(_) => {
                    if let Some(end) = on_end.take() {
                        end(&mut out);
                    }
                    stop = true;
                }
            }
        }
        // The poll says whether the deadline passed: no clock read on the hot path.
        if !stop && out.is_empty() && ready.contains(&1) {
            // Comments are not events: the browser's EventSource ignores them.
            out.push_str(KEEPALIVE);
        }
        if !out.is_empty() {
            if !write_all(downstream, out.as_bytes()) {
                return; // the client is gone
            }
            out.clear();
            keepalive_at = monotonic_clock::now().saturating_add(keepalive_ns);
        }
        if stop {
            return;
        }
    }
}

fn finish_sse(body: OutgoingBody, stream: OutputStream) {
    let _ = stream.blocking_flush();
    drop(stream);
    let _ = OutgoingBody::finish(body, None);
}

fn relay_turn(ctx: &Ctx, upstream: Upstream, out: ResponseOutparam) {
    let Some((body, downstream)) = start_sse(out) else { return };
    let mut relay = TurnRelay::new(ctx.redactor.clone());
    let relay_cell = std::cell::RefCell::new(&mut relay);
    pump(
        &upstream.stream,
        &downstream,
        ctx.keepalive,
        |chunk, out| match relay_cell.borrow_mut().feed(chunk, out) {
            TurnFlow::Continue => Step::Continue,
            TurnFlow::Ended => Step::Stop,
        },
        |out| relay_cell.borrow_mut().finish(out),
    );
    finish_sse(body, downstream);
}

fn admin_events(
    ctx: &Ctx,
    admin_key: &str,
    session_id: Option<String>,
    last_event_id: Option<String>,
    out: ResponseOutparam,
) {
    let mut filter = AdminEventFilter::new(session_id);
    let path = ctx.upstream.path("/v1/admin/events");
    let mut spec = Call::get(&path, Bearer::Admin(admin_key));
    spec.accept = "text/event-stream";
    spec.streaming = true;
    spec.last_event_id = last_event_id;
    let upstream = call(ctx, spec);
    let Some((body, downstream)) = start_sse(out) else { return };
    let mut frames = String::new();
    let upstream = match upstream {
        Ok(up) if up.status == 200 => up,
        Ok(up) => {
            let _ = filter.fail(StreamError::UpstreamStatus { status: up.status }, &mut frames);
            write_all(&downstream, frames.as_bytes());
            return finish_sse(body, downstream);
        }
        Err(_) => {
            let _ = filter.fail(StreamError::ConnectFailed, &mut frames);
            write_all(&downstream, frames.as_bytes());
            return finish_sse(body, downstream);
        }
    };
    let filter_cell = std::cell::RefCell::new(&mut filter);
    let mut frames = String::new();
    pump(
        &upstream.stream,
        &downstream,
        ctx.keepalive,
        |chunk, out| {
            frames.clear();
            let flow = filter_cell.borrow_mut().feed(chunk, &mut frames);
            // Whole frames only, so a key cannot straddle two chunks (INV-ADMIN-KEY).
            out.push_str(&ctx.redactor.redact(&frames));
            match flow {
                Flow::Continue => Step::Continue,
                Flow::Stop(_) => Step::Stop,
            }
        },
        |out| {
            let _ = filter_cell.borrow_mut().finish(out);
        },
    );
    finish_sse(body, downstream);
}

// ---- small I/O helpers ------------------------------------------------------

/// Writes everything, waiting for the host's permits. `false` if the
/// stream broke (the client went away).
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

fn send_json(out: ResponseOutparam, status: u16, body: &str) {
    let mut list = vec![
        ("content-type".to_string(), b"application/json; charset=utf-8".to_vec()),
        ("cache-control".to_string(), b"no-store".to_vec()),
        ("x-content-type-options".to_string(), b"nosniff".to_vec()),
    ];
    if status == 405 {
        // Allow is part of the typed 405 (also in the body). It goes in the
        // list: a response's own headers are immutable once it exists.
        if let Ok(v) = serde_json::from_str::<Value>(body) {
            if let Some(allow) = v.get("allow").and_then(Value::as_str) {
                list.push(("allow".to_string(), allow.as_bytes().to_vec()));
            }
        }
    }
    let Ok(headers) = Fields::from_list(&list) else { return };
    let response = OutgoingResponse::new(headers);
    let _ = response.set_status_code(status);
    let Ok(body_handle) = response.body() else { return };
    out.set(response);
    if let Ok(stream) = body_handle.write() {
        write_all(&stream, body.as_bytes());
        let _ = stream.blocking_flush();
    }
    let _ = OutgoingBody::finish(body_handle, None);
}

fn header(req: &IncomingRequest, name: &str) -> Option<String> {
    req.headers().get(name).into_iter().next().and_then(|v| String::from_utf8(v).ok())
}

/// Reads and parses a browser JSON body: JSON content type only (a
/// cross-site form cannot send one without a preflight), bounded size.
fn read_json_body(req: &IncomingRequest) -> Result<Value, ApiError> {
    let content_type = header(req, "content-type").unwrap_or_default();
    if !content_type.to_ascii_lowercase().starts_with("application/json") {
        return Err(ApiError::new(415, "unsupported_media_type", "send the body as application/json"));
    }
    let body = req.consume().map_err(|_| ApiError::new(400, "invalid_json", "the request body was not readable"))?;
    let stream = body.stream().map_err(|_| ApiError::new(400, "invalid_json", "the request body was not readable"))?;
    let bytes = match read_to_end(&stream, MAX_REQUEST_BODY, None) {
        Ok(bytes) => bytes,
        Err(e) if e.code == "upstream_body_too_large" => {
            return Err(ApiError::new(413, "body_too_large", "the request body is larger than 64 KiB"))
        }
        Err(_) => return Err(ApiError::new(400, "invalid_json", "the request body was not readable")),
    };
    drop(stream);
    drop(body);
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(v @ Value::Object(_)) => Ok(v),
        _ => Err(ApiError::new(400, "invalid_json", "the body must be a JSON object")),
    }
}
