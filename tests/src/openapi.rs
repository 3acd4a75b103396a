//! Conformance of every `/api` and `/admin/v1` answer the component tests
//! receive with `static/openapi.yaml`, so the document cannot drift from the
//! code.
//!
//! [`crate::client`] sends those requests through [`proxy_url`], an
//! in-process forwarding proxy that passes each exchange through unchanged
//! (bodies stream both ways, a client that leaves closes the upstream
//! connection) and checks the answer: the route and method are documented (or
//! the answer is the documented `x-unlisted` 404 / 405), the status is listed
//! for the operation, the content type is one it lists, the body matches its
//! schema, and every required documented header is present and matches its
//! schema. An event stream is checked event by event against its OpenAPI 3.2
//! `itemSchema`: each event, as the object of its SSE fields (`event`,
//! `data`, `id`, `retry`), must match it, and a `data` documented as
//! `contentMediaType: application/json` must be JSON that matches its
//! `contentSchema` (which JSON Schema itself only annotates; here, as in
//! Schemathesis, it is asserted).
//!
//! A violation is printed to stderr and answered as `599` with the reasons
//! (an event stream is cut instead), so the test that made the request fails;
//! the test binary also exits non-zero at the end when any violation was seen.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::{Body, Frame, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;

/// The path prefixes whose answers are checked.
pub const CHECKED_PREFIXES: [&str; 2] = ["/api/", "/admin/v1/"];

static VIOLATIONS: AtomicUsize = AtomicUsize::new(0);

// ---- the document --------------------------------------------------------------------

/// `static/openapi.yaml`, parsed once, with its operations and a validator cache.
pub struct Document {
    pub root: Value,
    templates: Vec<(String, Vec<String>)>,
    validators: Mutex<HashMap<String, Arc<jsonschema::Validator>>>,
}

/// The media type whose `contentSchema` is asserted.
const JSON_CONTENT: &str = "application/json";

/// A schema at `target`, with `components` beside it so `#/components/...`
/// refs resolve, compiled as JSON Schema 2020-12 with `contentMediaType:
/// application/json` asserted ([`JsonContent`]).
fn compile(components: &Arc<Value>, target: &Value) -> Result<jsonschema::Validator, String> {
    let wrapped = serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "components": **components,
        "$defs": { "target": target },
        "$ref": "#/$defs/target",
    });
    let for_content = components.clone();
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .with_keyword("contentMediaType", move |parent: &serde_json::Map<String, Value>, value: &Value, _| {
            JsonContent::new(&for_content, parent, value)
                .map(|k| Box::new(k) as Box<dyn for<'i> jsonschema::Keyword<'i>>)
                .map_err(jsonschema::ValidationError::custom)
        })
        .build(&wrapped)
        .map_err(|e| e.to_string())
}

/// `contentMediaType: application/json` (with its sibling `contentSchema`)
/// as an assertion: a string instance must be JSON that matches the
/// content schema. Other media types, and non-string instances, pass.
struct JsonContent {
    /// `None`: not JSON content.
    json: Option<Option<Arc<jsonschema::Validator>>>,
}

impl JsonContent {
    fn new(components: &Arc<Value>, parent: &serde_json::Map<String, Value>, value: &Value) -> Result<Self, String> {
        if value.as_str().map(essence).as_deref() != Some(JSON_CONTENT) {
            return Ok(JsonContent { json: None });
        }
        let schema = match parent.get("contentSchema") {
            None => None,
            Some(schema) => Some(Arc::new(compile(components, schema).map_err(|e| format!("contentSchema: {e}"))?)),
        };
        Ok(JsonContent { json: Some(schema) })
    }

    fn errors(&self, instance: &Value) -> Vec<String> {
        let (Some(schema), Some(text)) = (&self.json, instance.as_str()) else { return Vec::new() };
        let parsed: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => return vec![format!("{JSON_CONTENT} content that is not JSON ({e})")],
        };
        match schema {
            None => Vec::new(),
            Some(v) => v
                .iter_errors(&parsed)
                .take(5)
                .map(|e| format!("its JSON does not match contentSchema: {e} at {}", e.instance_path()))
                .collect(),
        }
    }
}

impl<'i> jsonschema::Keyword<'i> for JsonContent {
    fn validate(&self, instance: &'i Value) -> Result<(), jsonschema::ValidationError<'i>> {
        match self.errors(instance).as_slice() {
            [] => Ok(()),
            errors => Err(jsonschema::ValidationError::custom(errors.join("; "))),
        }
    }

    fn is_valid(&self, instance: &'i Value) -> bool {
        self.errors(instance).is_empty()
    }
}

pub fn document() -> &'static Document {
    static DOC: OnceLock<Document> = OnceLock::new();
    DOC.get_or_init(|| {
        let path = crate::repo_root().join("static/openapi.yaml");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let root: Value = serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        Document::new(root)
    })
}

/// What one answer is checked against, found from its request.
pub struct Expectation {
    /// `METHOD /template`, for messages.
    pub label: String,
    /// The response object (refs resolved), or `None` when the answer must be
    /// the documented `x-unlisted` one (`unlisted` says which).
    pub response: Option<Value>,
    pub unlisted: Option<Unlisted>,
    /// The JSON pointer of the response object, for schema refs.
    pointer: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unlisted {
    /// No operation's path matches: 404 `not_found`.
    UnknownRoute,
    /// The path is documented for these methods only: 405 with `Allow`.
    OtherMethod(Vec<String>),
}

fn escape_pointer(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

impl Document {
    pub fn new(root: Value) -> Document {
        let templates = root["paths"]
            .as_object()
            .map(|paths| {
                paths
                    .iter()
                    .map(|(template, item)| {
                        let methods = ["get", "post", "put", "delete", "patch", "head", "options"]
                            .iter()
                            .filter(|m| item.get(**m).is_some())
                            .map(|m| m.to_ascii_uppercase())
                            .collect();
                        (template.clone(), methods)
                    })
                    .collect()
            })
            .unwrap_or_default();
        Document { root, templates, validators: Mutex::new(HashMap::new()) }
    }

    /// Follows local `$ref`s until a non-ref object.
    pub fn resolve<'a>(&'a self, mut value: &'a Value) -> (&'a Value, Option<String>) {
        let mut pointer = None;
        for _ in 0..16 {
            match value.get("$ref").and_then(Value::as_str) {
                Some(r) if r.starts_with("#/") => {
                    let p = r[1..].to_string();
                    value = self.root.pointer(&p).unwrap_or(&Value::Null);
                    pointer = Some(p);
                }
                _ => break,
            }
        }
        (value, pointer)
    }

    /// The documented template a path matches, preferring literal segments.
    /// A parameter matches any one segment, an empty one included (the
    /// components answer those with their own validation errors).
    pub fn match_path(&self, path: &str) -> Option<(&str, &[String], bool)> {
        let segments: Vec<&str> = path.split('/').collect();
        let mut best: Option<(usize, &str, &[String], bool)> = None;
        for (template, methods) in &self.templates {
            let parts: Vec<&str> = template.split('/').collect();
            if parts.len() != segments.len() {
                continue;
            }
            let mut literal = 0;
            let mut empty_param = false;
            let matched = parts.iter().zip(&segments).all(|(part, seg)| {
                if part.starts_with('{') && part.ends_with('}') {
                    empty_param |= seg.is_empty();
                    true
                } else {
                    literal += 1;
                    part == seg
                }
            });
            if matched && best.as_ref().is_none_or(|(n, ..)| literal > *n) {
                best = Some((literal, template.as_str(), methods.as_slice(), empty_param));
            }
        }
        best.map(|(_, t, m, e)| (t, m, e))
    }

    /// What an answer of `status` to `method path` must be.
    pub fn expect(&self, method: &str, path: &str, status: u16) -> Result<Expectation, String> {
        let Some((template, methods, empty_param)) = self.match_path(path) else {
            return Ok(Expectation {
                label: format!("{method} {path} (no documented route)"),
                response: None,
                unlisted: Some(Unlisted::UnknownRoute),
                pointer: String::new(),
            });
        };
        let label = format!("{method} {template}");
        if !methods.iter().any(|m| m == method) {
            return Ok(Expectation {
                label,
                response: None,
                unlisted: Some(Unlisted::OtherMethod(methods.to_vec())),
                pointer: String::new(),
            });
        }
        if empty_param && status == 404 {
            // An empty segment where an id goes: the router's "no such route".
            return Ok(Expectation {
                label,
                response: None,
                unlisted: Some(Unlisted::UnknownRoute),
                pointer: String::new(),
            });
        }
        let op_pointer = format!("/paths/{}/{}", escape_pointer(template), method.to_ascii_lowercase());
        let responses = &self.root.pointer(&op_pointer).expect("listed operation")["responses"];
        let exact = status.to_string();
        let range = format!("{}XX", status / 100);
        let key = [exact.as_str(), range.as_str(), "default"]
            .into_iter()
            .find(|k| responses.get(*k).is_some())
            .ok_or_else(|| format!("{label}: status {status} is not listed for this operation"))?;
        let (response, pointer) = self.resolve(&responses[key]);
        let pointer = pointer.unwrap_or_else(|| format!("{op_pointer}/responses/{}", escape_pointer(key)));
        Ok(Expectation {
            label: format!("{label} -> {key}"),
            response: Some(response.clone()),
            unlisted: None,
            pointer,
        })
    }

    /// A validator for the schema at `pointer` (refs into `components` resolve).
    pub fn validator(&self, pointer: &str) -> Result<Arc<jsonschema::Validator>, String> {
        if let Some(v) = self.validators.lock().unwrap().get(pointer) {
            return Ok(v.clone());
        }
        let schema = self.root.pointer(pointer).ok_or_else(|| format!("no schema at {pointer}"))?;
        let components = Arc::new(self.root["components"].clone());
        let validator =
            compile(&components, schema).map_err(|e| format!("the schema at {pointer} does not compile: {e}"))?;
        let validator = Arc::new(validator);
        self.validators.lock().unwrap().insert(pointer.to_string(), validator.clone());
        Ok(validator)
    }

    fn validate(&self, pointer: &str, instance: &Value, what: &str) -> Vec<String> {
        match self.validator(pointer) {
            Err(e) => vec![e],
            Ok(v) => v
                .iter_errors(instance)
                .take(5)
                .map(|e| format!("{what} does not match {pointer}: {e} at {}", e.instance_path()))
                .collect(),
        }
    }
}

fn essence(content_type: &str) -> String {
    content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase()
}

fn header<'a>(headers: &'a http::HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Checks a response's head (status, content type, headers).
pub fn check_head(doc: &Document, exp: &Expectation, status: u16, headers: &http::HeaderMap) -> Vec<String> {
    let mut out = Vec::new();
    let label = &exp.label;
    let content_type = header(headers, "content-type").map(essence).unwrap_or_default();
    // Every answer of both components (documented in info.description).
    if header(headers, "x-content-type-options") != Some("nosniff") {
        out.push(format!("{label}: X-Content-Type-Options: nosniff is missing"));
    }
    if header(headers, "cache-control").is_none() {
        out.push(format!("{label}: Cache-Control is missing"));
    }
    match &exp.unlisted {
        Some(Unlisted::UnknownRoute) if status != 404 => out.push(format!(
            "{label}: answered {status}, but the document lists no such route (add it to static/openapi.yaml)"
        )),
        Some(Unlisted::OtherMethod(methods)) => {
            if status != 405 {
                out.push(format!(
                    "{label}: answered {status}; the document lists only {methods:?} here (x-unlisted: 405)"
                ));
            } else if !header(headers, "allow").is_some_and(|a| methods.iter().any(|m| m == a)) {
                out.push(format!("{label}: a 405 needs Allow: one of {methods:?}, got {:?}", header(headers, "allow")));
            }
        }
        _ => {}
    }
    if exp.unlisted.is_some() {
        if content_type != "application/json" {
            out.push(format!("{label}: unlisted answers are application/json, got {content_type:?}"));
        }
        return out;
    }
    let response = exp.response.as_ref().expect("listed");
    if let Some(content) = response.get("content").and_then(Value::as_object) {
        if !content.contains_key(&content_type) {
            out.push(format!(
                "{label}: content type {content_type:?} is not one of {:?}",
                content.keys().collect::<Vec<_>>()
            ));
        }
    }
    if let Some(documented) = response.get("headers").and_then(Value::as_object) {
        for (name, spec) in documented {
            let (spec, spec_pointer) = doc.resolve(spec);
            let value = header(headers, &name.to_ascii_lowercase());
            match value {
                None if spec.get("required").and_then(Value::as_bool) == Some(true) => {
                    out.push(format!("{label}: the documented header {name} is missing"))
                }
                None => {}
                Some(value) => {
                    let pointer = match spec_pointer {
                        Some(p) => format!("{p}/schema"),
                        None => format!("{}/headers/{}/schema", exp.pointer, escape_pointer(name)),
                    };
                    let mut v = doc.validate(&pointer, &Value::String(value.to_string()), name);
                    out.append(&mut v);
                }
            }
        }
    }
    out
}

/// Checks a whole (non-stream) body.
pub fn check_body(doc: &Document, exp: &Expectation, headers: &http::HeaderMap, body: &[u8]) -> Vec<String> {
    let label = &exp.label;
    let content_type = header(headers, "content-type").map(essence).unwrap_or_default();
    if content_type != "application/json" {
        return Vec::new();
    }
    let value: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return vec![format!("{label}: the body is not JSON: {e}")],
    };
    match &exp.unlisted {
        Some(unlisted) => {
            let code = match unlisted {
                Unlisted::UnknownRoute => "not_found",
                Unlisted::OtherMethod(_) => "method_not_allowed",
            };
            let mut out = doc.validate("/components/schemas/Error", &value, label);
            if value["error_code"] != code {
                out.push(format!("{label}: expected error_code {code}, got {}", value["error_code"]));
            }
            out
        }
        None => {
            let pointer = format!("{}/content/{}/schema", exp.pointer, escape_pointer(&content_type));
            if doc.root.pointer(&pointer).is_none() {
                return Vec::new();
            }
            doc.validate(&pointer, &value, &format!("{label}: the body"))
        }
    }
}

/// Checks one event of a documented event stream against the stream's
/// `itemSchema`: the event as the object of its SSE fields, `data` always a
/// string (an absent `event` reads as `message`, `id` is the last event ID).
pub fn check_event(doc: &Document, exp: &Expectation, event: &sse::Event) -> Vec<String> {
    let label = &exp.label;
    let pointer = format!("{}/content/{}/itemSchema", exp.pointer, escape_pointer("text/event-stream"));
    if doc.root.pointer(&pointer).is_none() {
        return vec![format!("{label}: an event stream without an itemSchema")];
    }
    doc.validate(&pointer, &sse_item(event), &format!("{label}: event {:?}", event.event))
}

/// An SSE event as OpenAPI 3.2 models it: `{event, data, id?, retry?}`.
pub fn sse_item(event: &sse::Event) -> Value {
    let mut item = serde_json::json!({ "event": event.event, "data": event.data });
    if let Some(id) = &event.id {
        item["id"] = id.clone().into();
    }
    if let Some(retry) = event.retry {
        item["retry"] = retry.into();
    }
    item
}

fn report(label: &str, violations: &[String]) {
    VIOLATIONS.fetch_add(violations.len(), Ordering::SeqCst);
    // Straight to the process's stderr: the proxy's thread has no test's capture.
    let mut err = std::io::stderr();
    let _ = writeln!(err, "OPENAPI CONFORMANCE VIOLATION ({label}):");
    for v in violations {
        let _ = writeln!(err, "  - {v}");
    }
}

extern "C" fn fail_the_binary_on_violations() {
    let n = VIOLATIONS.load(Ordering::SeqCst);
    if n > 0 {
        let _ = writeln!(
            std::io::stderr(),
            "{n} OpenAPI conformance violation(s): see OPENAPI CONFORMANCE VIOLATION above"
        );
        // SAFETY: _exit only ends the process; nothing else runs after it.
        unsafe { libc::_exit(101) };
    }
}

// ---- the proxy ---------------------------------------------------------------------------

type ProxyBody = BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// The address of the process-wide checking proxy (started on first use).
pub fn proxy_url() -> String {
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    let addr = ADDR.get_or_init(|| {
        // SAFETY: registers a plain extern "C" function with no captured state.
        unsafe { libc::atexit(fail_the_binary_on_violations) };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("openapi-conformance-proxy".into())
            .spawn(move || {
                let runtime =
                    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                    tx.send(listener.local_addr().unwrap()).unwrap();
                    loop {
                        let Ok((stream, _)) = listener.accept().await else { continue };
                        tokio::spawn(async move {
                            let service = hyper::service::service_fn(forward);
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        });
                    }
                });
            })
            .unwrap();
        rx.recv().unwrap()
    });
    format!("http://{addr}")
}

/// The ports of the apps under test: the client sends every request for them
/// through the proxy (a client's proxy choice sees no path), and the proxy
/// checks the answers of the paths below [`CHECKED_PREFIXES`].
static APPS: Mutex<Vec<u16>> = Mutex::new(Vec::new());

pub fn register_app(addr: SocketAddr) {
    APPS.lock().unwrap().push(addr.port());
}

pub fn unregister_app(addr: SocketAddr) {
    APPS.lock().unwrap().retain(|p| *p != addr.port());
}

/// Whether a request URL goes through the proxy.
pub fn proxied(url: &reqwest::Url) -> bool {
    url.scheme() == "http"
        && url.host_str() == Some("127.0.0.1")
        && url.port().is_some_and(|port| APPS.lock().unwrap().contains(&port))
}

/// Whether the answer to a request path is checked.
pub fn checked(path: &str) -> bool {
    CHECKED_PREFIXES.iter().any(|p| path.starts_with(p))
}

const HOP_BY_HOP: [&str; 7] =
    ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"];

fn plain(status: u16, text: String) -> Response<ProxyBody> {
    let mut response = Response::new(Full::new(Bytes::from(text)).map_err(|e| match e {}).boxed());
    *response.status_mut() = http::StatusCode::from_u16(status).unwrap();
    response.headers_mut().insert("content-type", http::HeaderValue::from_static("application/json"));
    response
}

/// Aborts the upstream connection's task when dropped (the client left).
struct ConnGuard(tokio::task::JoinHandle<()>);

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn forward(req: Request<Incoming>) -> Result<Response<ProxyBody>, Infallible> {
    let (mut parts, body) = req.into_parts();
    let Some(authority) = parts.uri.authority().cloned() else {
        return Ok(plain(400, "{\"proxy\":\"absolute-form requests only\"}".into()));
    };
    let path = parts.uri.path().to_string();
    let method = parts.method.to_string();
    let stream = match tokio::net::TcpStream::connect(authority.as_str()).await {
        Ok(s) => s,
        Err(e) => return Ok(plain(502, format!("{{\"proxy\":\"connect: {e}\"}}"))),
    };
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) = match hyper::client::conn::http1::handshake(TokioIo::new(stream)).await {
        Ok(x) => x,
        Err(e) => return Ok(plain(502, format!("{{\"proxy\":\"handshake: {e}\"}}"))),
    };
    let guard = ConnGuard(tokio::spawn(async move {
        let _ = conn.await;
    }));
    parts.uri = parts.uri.path_and_query().map(|pq| pq.as_str()).unwrap_or("/").parse().unwrap();
    for name in HOP_BY_HOP {
        parts.headers.remove(name);
    }
    if !parts.headers.contains_key("host") {
        parts.headers.insert("host", authority.as_str().parse().unwrap());
    }
    let response = match sender.send_request(Request::from_parts(parts, body)).await {
        Ok(r) => r,
        Err(e) => return Ok(plain(502, format!("{{\"proxy\":\"upstream: {e}\"}}"))),
    };
    let (mut parts, body) = response.into_parts();
    if !checked(&path) {
        for name in HOP_BY_HOP {
            parts.headers.remove(name);
        }
        let through = StreamCheck { exp: None, parser: sse::Parser::new(), inner: body, _guard: guard, done: false };
        return Ok(Response::from_parts(parts, through.boxed()));
    }
    let had_length = parts.headers.contains_key("content-length");
    for name in HOP_BY_HOP {
        parts.headers.remove(name);
    }
    let status = parts.status.as_u16();
    let doc = document();
    let exp = match doc.expect(&method, &path, status) {
        Ok(exp) => exp,
        Err(v) => {
            report(&format!("{method} {path}"), std::slice::from_ref(&v));
            return Ok(plain(599, serde_json::json!({ "openapi_violations": [v] }).to_string()));
        }
    };
    let mut violations = check_head(doc, &exp, status, &parts.headers);
    let is_stream = header(&parts.headers, "content-type").map(essence).as_deref() == Some("text/event-stream");
    if is_stream && !violations.is_empty() {
        report(&exp.label, &violations);
        return Ok(plain(599, serde_json::json!({ "openapi_violations": violations }).to_string()));
    }
    if is_stream {
        let checker =
            StreamCheck { exp: Some(exp), parser: sse::Parser::new(), inner: body, _guard: guard, done: false };
        return Ok(Response::from_parts(parts, checker.boxed()));
    }
    let bytes = match body.collect().await {
        Ok(c) => c.to_bytes(),
        Err(e) => return Ok(plain(502, format!("{{\"proxy\":\"upstream body: {e}\"}}"))),
    };
    drop(guard);
    violations.extend(check_body(doc, &exp, &parts.headers, &bytes));
    if !violations.is_empty() {
        report(&exp.label, &violations);
        return Ok(plain(599, serde_json::json!({ "openapi_violations": violations }).to_string()));
    }
    let body: ProxyBody = if had_length {
        Full::new(bytes).map_err(|e| match e {}).boxed()
    } else {
        // Chunked as it came: a body of unknown length.
        let frames = futures::stream::iter([Ok::<_, Box<dyn std::error::Error + Send + Sync>>(Frame::data(bytes))]);
        BodyExt::boxed(StreamBody::new(frames))
    };
    Ok(Response::from_parts(parts, body))
}

/// A body passed through chunk by chunk; with an expectation, an event
/// stream whose every event is checked.
struct StreamCheck {
    exp: Option<Expectation>,
    parser: sse::Parser,
    inner: Incoming,
    _guard: ConnGuard,
    done: bool,
}

impl Body for StreamCheck {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.done {
            return Poll::Ready(None);
        }
        let frame = match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(Box::new(e)))),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        };
        let this = &mut *self;
        let Some(exp) = &this.exp else { return Poll::Ready(Some(Ok(frame))) };
        if let Some(data) = frame.data_ref() {
            let mut events = Vec::new();
            // An over-long event is the component's business, not the document's.
            let _ = this.parser.feed(data, &mut events);
            let doc = document();
            let mut violations = Vec::new();
            for item in events {
                if let sse::Item::Event(e) = item {
                    violations.extend(check_event(doc, exp, &e));
                }
            }
            if !violations.is_empty() {
                report(&exp.label, &violations);
                this.done = true;
                return Poll::Ready(Some(Err(format!("OpenAPI violations: {violations:?}").into())));
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(list: &[(&'static str, &'static str)]) -> http::HeaderMap {
        let mut map = http::HeaderMap::new();
        for (n, v) in list {
            map.append(*n, http::HeaderValue::from_static(v));
        }
        map
    }

    const JSON: [(&str, &str); 3] = [
        ("content-type", "application/json; charset=utf-8"),
        ("cache-control", "no-store"),
        ("x-content-type-options", "nosniff"),
    ];

    #[test]
    fn routes_match_their_templates_and_unknown_ones_are_unlisted() {
        let doc = document();
        assert_eq!(doc.match_path("/api/sessions/s_1/tools").unwrap().0, "/api/sessions/{session_id}/tools");
        assert_eq!(doc.match_path("/admin/v1/traces/trc_1").unwrap().0, "/admin/v1/traces/{trace_id}");
        assert!(doc.match_path("/api/nope").is_none());
        let exp = doc.expect("GET", "/api/nope", 404).unwrap();
        assert_eq!(exp.unlisted, Some(Unlisted::UnknownRoute));
        let exp = doc.expect("DELETE", "/api/config", 405).unwrap();
        assert_eq!(exp.unlisted, Some(Unlisted::OtherMethod(vec!["GET".into()])));
    }

    #[test]
    fn a_conforming_answer_passes_and_drift_is_caught() {
        let doc = document();
        let h = headers(&JSON);
        let exp = doc.expect("POST", "/api/sessions/s_1/turns/t_1/cancel", 202).unwrap();
        assert_eq!(check_head(doc, &exp, 202, &h), Vec::<String>::new());
        assert_eq!(check_body(doc, &exp, &h, b"{}"), Vec::<String>::new());
        assert!(!check_body(doc, &exp, &h, b"{\"x\":1}").is_empty(), "cancel answers {{}}");
        // A status the operation does not list.
        assert!(doc.expect("POST", "/api/sessions/s_1/turns/t_1/cancel", 201).is_err());
        // An error_code outside the route's closed set.
        let exp = doc.expect("GET", "/api/sessions/s_1/tools", 400).unwrap();
        let ok = br#"{"error_code":"invalid_session_id","message":"m"}"#;
        assert_eq!(check_body(doc, &exp, &h, ok), Vec::<String>::new());
        assert!(!check_body(doc, &exp, &h, br#"{"error_code":"made_up","message":"m"}"#).is_empty());
        // A route the document does not list answering anything but 404.
        let exp = doc.expect("GET", "/api/new-route", 200).unwrap();
        assert!(!check_head(doc, &exp, 200, &h).is_empty());
        // A documented header that is missing.
        let exp = doc.expect("DELETE", "/api/config", 405).unwrap();
        assert!(check_head(doc, &exp, 405, &h).iter().any(|v| v.contains("Allow")));
        let exp = doc.expect("POST", "/admin/v1/auth/login", 429).unwrap();
        assert!(check_head(doc, &exp, 429, &h).iter().any(|v| v.contains("Retry-After")));
    }

    fn event(name: &str, id: Option<&str>, data: &str) -> sse::Event {
        sse::Event { id: id.map(str::to_string), event: name.to_string(), data: data.to_string(), retry: None }
    }

    #[test]
    fn admin_stream_events_are_checked_against_the_item_schema_and_its_content_schemas() {
        let doc = document();
        let exp = doc.expect("GET", "/api/admin/events", 200).unwrap();
        let ok = |e: &sse::Event| assert_eq!(check_event(doc, &exp, e), Vec::<String>::new(), "{e:?}");
        let bad = |e: &sse::Event| assert!(!check_event(doc, &exp, e).is_empty(), "{e:?} passed");
        let frame = r#"{"id":1,"type":"session.created","timestamp":null,"data":{"session_id":"s"}}"#;
        ok(&event("admin_event", Some("1"), frame));
        ok(&event("admin_event", Some("7"), r#"{"id":7,"type":"system.notice","timestamp":"t","data":{}}"#));
        // The data's JSON is held to its contentSchema.
        bad(&event("admin_event", Some("1"), r#"{"id":"x"}"#));
        bad(&event("admin_event", Some("1"), r#"{"id":1,"type":"x","timestamp":null,"data":{},"extra":1}"#));
        bad(&event("admin_event", Some("1"), r#"{"id":1,"type":"system.heartbeat","timestamp":null,"data":{}}"#));
        bad(&event("admin_event", Some("1"), r#"{"id":1,"type":"turn.started","timestamp":null,"data":{}}"#));
        bad(&event("admin_event", Some("1"), "not json"));
        // The SSE fields: an admin_event has a decimal id, and no name is free.
        bad(&event("admin_event", None, frame));
        bad(&event("admin_event", Some("01"), frame));
        bad(&event("system.heartbeat", None, "{}"));
        let mut retry = event("admin_event", Some("1"), frame);
        retry.retry = Some(5);
        bad(&retry);
        let reason = r#"{"reason":"connect_failed","message":"could not connect to the admin event stream"}"#;
        ok(&event("stream_error", None, reason));
        ok(&event("stream_error", Some("9"), reason));
        let refused = r#"{"reason":"upstream_status","status":403,"message":"the admin event stream was refused"}"#;
        ok(&event("stream_error", None, refused));
        bad(&event(
            "stream_error",
            None,
            r#"{"reason":"upstream_status","message":"the admin event stream was refused"}"#,
        ));
        bad(&event("stream_error", None, r#"{"reason":"connect_failed","message":"m"}"#));
    }

    #[test]
    fn turn_and_chat_stream_events_are_checked_against_their_item_schemas() {
        let doc = document();
        let turn = doc.expect("POST", "/api/sessions/s_1/turns", 200).unwrap();
        for (name, data) in [
            ("turn.started", r#"{"turn_id":"t_1"}"#),
            ("text", r#"{"delta":"Hel"}"#),
            (
                "error",
                r#"{"code":"upstream_stream_dropped","message":"the turn stream ended before the turn finished"}"#,
            ),
            // Upstream events are relayed as they came, named or not, JSON or not.
            ("text", "{\"delta\":\"lo\"}\nsecond line"),
            ("usage.report", "{}"),
            ("message", "plain"),
        ] {
            assert_eq!(check_event(doc, &turn, &event(name, None, data)), Vec::<String>::new(), "{name} {data}");
        }
        // The relay never sends an id.
        assert!(!check_event(doc, &turn, &event("text", Some("1"), r#"{"delta":"x"}"#)).is_empty());

        let chat = doc.expect("POST", "/admin/v1/gw/acme/main/v1/chat/completions", 200).unwrap();
        let chunk = r#"{"object":"chat.completion.chunk","choices":[]}"#;
        assert_eq!(check_event(doc, &chat, &event("message", None, chunk)), Vec::<String>::new());
        assert_eq!(check_event(doc, &chat, &event("message", None, "[DONE]")), Vec::<String>::new());
        assert!(!check_event(doc, &chat, &event("message", None, r#"{"object":"chat.completion"}"#)).is_empty());
        assert!(!check_event(doc, &chat, &event("message", None, "[done]")).is_empty());
        assert!(!check_event(doc, &chat, &event("chunk", None, chunk)).is_empty());
    }

    /// The proxy end to end: a fake app whose answers drift from the document.
    #[tokio::test]
    async fn the_proxy_passes_conforming_answers_and_turns_drift_into_599() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(|req: Request<Incoming>| async move {
                        let body = match req.uri().path() {
                            "/api/sessions/s_1/turns/t_1/cancel" => "{}",
                            _ => "{\"surprise\":true}",
                        };
                        let mut r = Response::new(Full::new(Bytes::from(body)));
                        *r.status_mut() = http::StatusCode::ACCEPTED;
                        for (n, v) in JSON {
                            r.headers_mut().insert(n, http::HeaderValue::from_static(v));
                        }
                        Ok::<_, Infallible>(r)
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        register_app(addr);
        let client = crate::client();
        let ok = client.post(format!("http://{addr}/api/sessions/s_1/turns/t_1/cancel")).send().await.unwrap();
        assert_eq!(ok.status(), 202);
        assert_eq!(ok.text().await.unwrap(), "{}");
        let drift = client.get(format!("http://{addr}/api/config")).send().await.unwrap();
        assert_eq!(drift.status(), 599);
        assert!(drift.text().await.unwrap().contains("status 202 is not listed"));
        unregister_app(addr);
        // Seen: the binary would exit non-zero. This one was on purpose.
        VIOLATIONS.store(0, Ordering::SeqCst);
    }

    #[test]
    fn only_the_api_paths_of_apps_under_test_are_checked() {
        let url = |u: &str| reqwest::Url::parse(u).unwrap();
        let app: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert!(!proxied(&url("http://127.0.0.1:1/api/config")));
        register_app(app);
        assert!(proxied(&url("http://127.0.0.1:1/api/config")));
        unregister_app(app);
        assert!(!proxied(&url("http://127.0.0.1:1/api/config")));
        assert!(checked("/api/config") && checked("/admin/v1/auth/me"));
        assert!(!checked("/") && !checked("/brave/res/v1/web/search") && !checked("/admin/v1"));
    }
}
