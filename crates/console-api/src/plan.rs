//! Every decision of the console API, as plain Rust: a request's head, its
//! body (read on demand, bounded) and the Spin variables in; a typed answer
//! or the plan of one upstream call out, and after the call, what its answer
//! means. The wasm handler only moves bytes; the tests below drive this
//! natively.

use std::time::Duration;

use admin_events::StreamError;
use guest_http::{ApiError, BaseUrl, Method, TransportFailure};
use serde_json::{json, Map, Value};

use crate::alert::{AlertSettings, Alerting, TurnContext};
use crate::error;
use crate::history::{self, Entry};
use crate::redact::Redactor;
use crate::relay::{self, AdminRelay, Relay, TurnRelay};
use crate::routes::{self, Route};

/// Browser request bodies (a session or a turn) are small.
pub const MAX_REQUEST_BODY: usize = 64 * 1024;
/// Longest turn text accepted, in characters.
pub const MAX_TURN_TEXT: usize = 32 * 1024;
/// Upstream JSON answers larger than this are refused, not buffered.
pub const MAX_UPSTREAM_JSON: usize = 1 << 20;

/// What the handler takes from the request before any decision.
#[derive(Debug, Clone, Copy, Default)]
pub struct Head<'a> {
    pub method: &'a str,
    /// Below `/api` (Spin's `spin-path-info`).
    pub path: &'a str,
    /// The raw query, without `?`.
    pub query: &'a str,
    pub content_type: Option<&'a str>,
    pub last_event_id: Option<&'a str>,
    /// `Origin`, and the host the browser used (`Host`, or the one a proxy
    /// in `trusted_proxies` forwarded): a write from another site is refused.
    pub origin: Option<&'a str>,
    pub host: Option<&'a str>,
}

/// Configuration, from the component's Spin variables (read per request).
#[derive(Debug, Clone)]
pub struct Config {
    pub upstream: BaseUrl,
    pub consumer_key: String,
    pub admin_key: String,
    pub end_user_id: String,
    pub bifrost_visible_host: String,
    pub affect_read_url: String,
    pub timeout: Duration,
    pub keepalive: Duration,
    /// Both keys: whatever leaves the server goes through it (INV-ADMIN-KEY).
    pub redactor: Redactor,
}

impl Config {
    /// Builds the configuration from a variable lookup (`None` = unset).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Config, ApiError> {
        let get = |name: &str| var(name).ok_or_else(|| error::misconfigured("a server variable is missing"));
        let ms = |name: &str, default: u64| var(name).and_then(|v| v.parse().ok()).unwrap_or(default);
        let upstream = BaseUrl::parse(&get("upstream_url")?)
            .ok_or_else(|| error::misconfigured("upstream_url is not an http(s) URL"))?;
        let consumer_key = get("consumer_key")?;
        let admin_key = get("admin_key")?;
        let redactor = Redactor::new([consumer_key.as_str(), admin_key.as_str()]);
        Ok(Config {
            upstream,
            consumer_key,
            admin_key,
            end_user_id: get("end_user_id")?,
            bifrost_visible_host: get("bifrost_visible_host")?,
            affect_read_url: get("affect_read_url")?,
            timeout: Duration::from_millis(ms("upstream_timeout_ms", 10_000)),
            keepalive: Duration::from_millis(ms("sse_keepalive_ms", 15_000)),
            redactor,
        })
    }

    /// INV-FAIL-VISIBLE: no key, no upstream call.
    fn admin_key(&self) -> Result<&str, ApiError> {
        if self.admin_key.is_empty() {
            return Err(error::admin_key_not_configured());
        }
        Ok(&self.admin_key)
    }

    fn call(&self, method: Method, path: String, bearer: Option<&str>) -> Call {
        let mut headers = vec![("accept".to_string(), b"application/json".to_vec())];
        if let Some(key) = bearer {
            headers.push(("authorization".to_string(), format!("Bearer {key}").into_bytes()));
        }
        Call {
            method,
            https: self.upstream.https,
            authority: self.upstream.authority.clone(),
            path_and_query: path,
            headers,
            body: None,
            timeout: self.timeout,
            streaming: false,
        }
    }

    fn get(&self, path: String, bearer: Option<&str>) -> Call {
        self.call(Method::Get, path, bearer)
    }

    fn post(&self, path: String, payload: &Value) -> Call {
        let mut call = self.call(Method::Post, path, Some(&self.consumer_key));
        call.headers.push(("content-type".to_string(), b"application/json".to_vec()));
        call.body = Some(payload.to_string().into_bytes());
        call
    }

    fn fetch(&self, call: Call, expect: Expect) -> Plan {
        Plan::Fetch(Fetch { call, expect, redactor: self.redactor.clone() })
    }

    fn stream(&self, mut call: Call, relay: Relay) -> Plan {
        call.headers[0].1 = b"text/event-stream".to_vec();
        // Streams have no between-bytes timeout: they may be quiet for long.
        call.streaming = true;
        Plan::Stream(Box::new(Stream { call, keepalive: self.keepalive, relay }))
    }
}

/// One upstream request to make.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub method: Method,
    pub https: bool,
    pub authority: String,
    pub path_and_query: String,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Option<Vec<u8>>,
    /// Connect and first-byte limit; for a JSON answer also the limit on a
    /// quiet body.
    pub timeout: Duration,
    /// An event stream: no between-bytes limit.
    pub streaming: bool,
}

/// A successful JSON answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub status: u16,
    pub body: String,
    /// An affect snapshot to add to the durable history ([`history::remember`]).
    pub remember: Option<Entry>,
}

impl Reply {
    fn json(status: u16, body: String) -> Reply {
        Reply { status, body, remember: None }
    }
}

/// What to do for a request.
pub enum Plan {
    /// One upstream exchange; [`Fetch::finish`] turns its answer into ours.
    Fetch(Fetch),
    /// An event stream relayed from the upstream ([`Stream::open`]); its
    /// relay holds a parser's buffers, so it is boxed.
    Stream(Box<Stream>),
    /// `GET /api/affect/history`: this agent's log, [`history::read`]
    /// through the redactor (an entry stored by an older build may hold an
    /// escaped key).
    History { agent_id: String, redactor: Redactor },
}

/// The route, its variables and its body in; a plan or a typed answer out.
/// `read_body` is called (with the limit) only for routes that take a body,
/// after the content type passed.
pub fn plan(
    head: &Head<'_>,
    var: impl Fn(&str) -> Option<String>,
    read_body: impl FnOnce(usize) -> Result<Vec<u8>, TransportFailure>,
) -> Result<Plan, ApiError> {
    let route = routes::route(head.method, head.path, head.query)?;
    if matches!(route, Route::CreateSession | Route::Turn { .. } | Route::Cancel { .. }) {
        same_site_write(head)?;
    }
    let config = Config::from_vars(&var)?;
    let consumer = Some(config.consumer_key.as_str());
    let session_path = |id: &str, rest: &str| config.upstream.path(&format!("/v1/sessions/{id}{rest}"));
    Ok(match route {
        Route::Config => {
            let base = json!({
                "bifrost_visible_host": config.bifrost_visible_host,
                "end_user_id": config.end_user_id,
                "admin_configured": !config.admin_key.is_empty(),
                "agents": [],
            });
            config.fetch(config.get(config.upstream.path("/v1/agents"), consumer), Expect::Config(base))
        }
        Route::CreateSession => {
            let body = json_body(head.content_type, read_body)?;
            let agent_id = body.get("agent_id").and_then(Value::as_str).ok_or_else(error::missing_agent_id_field)?;
            let agent_id = routes::agent_id(agent_id)?;
            let payload = json!({ "agent_id": agent_id, "end_user_id": config.end_user_id });
            config.fetch(
                config.post(config.upstream.path("/v1/sessions"), &payload),
                Expect::Json("session_create_failed"),
            )
        }
        Route::Turn { session_id } => {
            let body = json_body(head.content_type, read_body)?;
            let text = turn_text(&body)?;
            // The page names the session's agent for the alerts; the upstream gets the text only.
            let agent_id = match body.get("agent_id") {
                None | Some(Value::Null) => None,
                Some(v) => Some(routes::agent_id(v.as_str().ok_or_else(error::invalid_agent_id)?)?),
            };
            let alerting = AlertSettings::from_vars(&var, config.timeout)?.map(|settings| {
                let context = TurnContext { session_id: session_id.clone(), agent_id, user_text: text.to_string() };
                Alerting::new(settings, context, config.redactor.clone())
            });
            let call = config.post(session_path(&session_id, "/turns"), &json!({ "text": text }));
            config.stream(call, Relay::Turn(TurnRelay::new(config.redactor.clone()).with_alerting(alerting)))
        }
        Route::Cancel { session_id, turn_id } => {
            let call = config.post(session_path(&session_id, &format!("/turns/{turn_id}/cancel")), &json!({}));
            config.fetch(call, Expect::Accepted("cancel_unavailable"))
        }
        Route::Tools { session_id } => {
            let call = config.get(session_path(&session_id, "/tools"), consumer);
            config.fetch(call, Expect::Json("session_tools_unavailable"))
        }
        Route::Bifrost { session_id } => {
            let call = config.get(session_path(&session_id, "/bifrost"), Some(config.admin_key()?));
            config.fetch(call, Expect::Json("bifrost_state_unavailable"))
        }
        Route::AdminEvents { session_id } => {
            let mut call = config.get(config.upstream.path("/v1/admin/events"), Some(config.admin_key()?));
            if let Some(raw) = head.last_event_id {
                call.headers.push(("last-event-id".to_string(), routes::last_event_id(raw)?.into_bytes()));
            }
            config.stream(call, Relay::Admin(AdminRelay::new(session_id, config.redactor.clone())))
        }
        Route::Affect { agent_id } => {
            let affect = BaseUrl::parse(&config.affect_read_url)
                .ok_or_else(|| error::misconfigured("affect_read_url is not an http(s) URL"))?;
            // No key goes to Worldtree.
            let mut call = config.get(affect.with_query("agent_id", &routes::encode_query_value(&agent_id)), None);
            (call.https, call.authority) = (affect.https, affect.authority);
            config.fetch(call, Expect::Affect(agent_id))
        }
        Route::AffectHistory { agent_id } => Plan::History { agent_id, redactor: config.redactor },
    })
}

/// Every write (a POST) must be JSON or come from the console's own origin.
/// A cross-site page can send neither: a form cannot set the JSON type, and a
/// script that sets it needs a CORS preflight, which these routes never
/// grant. So a JSON write passes whatever its `Origin`; any other write
/// passes only with an `Origin` naming the host the browser used ([`Head::host`]).
/// The scheme is not compared: a runtime without a peer address (the
/// portable console) cannot believe a TLS proxy's `X-Forwarded-Proto`.
fn same_site_write(head: &Head<'_>) -> Result<(), ApiError> {
    if head.content_type.is_some_and(guest_http::headers::is_json) {
        return Ok(());
    }
    let Some(origin) = head.origin else { return Err(ApiError::unsupported_media_type()) };
    let theirs = guest_http::forwarded::origin(origin);
    // Ours in the same form: the browser's scheme decides which port is the default.
    let ours = theirs.as_deref().zip(head.host).and_then(|(theirs, host)| {
        let scheme = theirs.split_once("://").map_or("", |(s, _)| s);
        guest_http::forwarded::origin(&format!("{scheme}://{}", host.trim()))
    });
    if theirs.is_some() && theirs == ours {
        return Ok(());
    }
    Err(error::cross_origin_rejected())
}

/// A browser's JSON body: the JSON content type only (a cross-site form
/// cannot send one without a preflight), at most [`MAX_REQUEST_BODY`] bytes,
/// one JSON object.
pub fn json_body(
    content_type: Option<&str>,
    read: impl FnOnce(usize) -> Result<Vec<u8>, TransportFailure>,
) -> Result<Map<String, Value>, ApiError> {
    if !content_type.is_some_and(guest_http::headers::is_json) {
        return Err(ApiError::unsupported_media_type());
    }
    let bytes = match read(MAX_REQUEST_BODY) {
        Ok(bytes) if bytes.len() > MAX_REQUEST_BODY => return Err(error::body_too_large()),
        Ok(bytes) => bytes,
        Err(TransportFailure::TooLarge) => return Err(error::body_too_large()),
        Err(_) => return Err(error::body_unreadable()),
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(error::invalid_json()),
    }
}

/// A turn's text: a string, not blank, at most [`MAX_TURN_TEXT`] characters.
pub fn turn_text(body: &Map<String, Value>) -> Result<&str, ApiError> {
    let text = body.get("text").and_then(Value::as_str).ok_or_else(error::missing_text)?;
    if text.trim().is_empty() || text.chars().count() > MAX_TURN_TEXT {
        return Err(error::invalid_text());
    }
    Ok(text)
}

/// How an upstream answer becomes ours.
#[derive(Debug, Clone, PartialEq)]
enum Expect {
    /// The JSON body verbatim (redacted) at the upstream's 2xx; else the
    /// status-preserving envelope with this code.
    Json(&'static str),
    /// Any 2xx is `202 {}`; else the envelope with this code.
    Accepted(&'static str),
    /// As `Json("affect_unavailable")`, but a 404 is `affect_not_found`; a
    /// snapshot passed on is remembered for this agent.
    Affect(String),
    /// `/api/config`: this base plus the agent list, or why there is none.
    Config(Value),
}

/// A planned upstream exchange.
pub struct Fetch {
    pub call: Call,
    expect: Expect,
    redactor: Redactor,
}

impl Fetch {
    /// Our answer, from the upstream's status (or why there was none) and
    /// its body, which is read (bounded) only if it is needed.
    pub fn finish(
        self,
        answer: Result<u16, TransportFailure>,
        read: impl FnOnce(usize) -> Result<Vec<u8>, TransportFailure>,
    ) -> Result<Reply, ApiError> {
        let json =
            |code| json_answer(answer, read, code, &self.redactor).map(|(status, body)| Reply::json(status, body));
        match self.expect {
            Expect::Json(code) => json(code),
            Expect::Accepted(code) => match answer.map_err(error::transport)? {
                200..=299 => Ok(Reply::json(202, "{}".to_string())),
                status => Err(error::upstream_status(code, status)),
            },
            Expect::Affect(_) if answer == Ok(404) => Err(error::affect_not_found()),
            Expect::Affect(agent_id) => {
                let mut reply = json("affect_unavailable")?;
                if reply.status == 200 {
                    reply.remember = history::entry(&agent_id, &reply.body);
                }
                Ok(reply)
            }
            Expect::Config(mut body) => {
                // Nothing lost: if the agent list fails, the console says why.
                match json("agents_unavailable") {
                    Ok(Reply { status: 200, body: text, .. }) => {
                        match serde_json::from_str::<Value>(&text).ok().and_then(|v| v.get("agents").cloned()) {
                            Some(Value::Array(list)) => body["agents"] = Value::Array(list),
                            _ => body["agents_error"] = json!({ "error_code": "upstream_malformed" }),
                        }
                    }
                    Ok(Reply { status, .. }) => {
                        body["agents_error"] = json!({ "error_code": "agents_unavailable", "status": status })
                    }
                    Err(e) => body["agents_error"] = json!({ "error_code": e.code, "status": e.fields.get("status") }),
                }
                Ok(Reply::json(200, body.to_string()))
            }
        }
    }
}

/// A JSON answer: non-2xx is the route's status-preserving envelope (the
/// body is not read); a 2xx body must be UTF-8 JSON within
/// [`MAX_UPSTREAM_JSON`], and is passed on verbatim but redacted.
fn json_answer(
    answer: Result<u16, TransportFailure>,
    read: impl FnOnce(usize) -> Result<Vec<u8>, TransportFailure>,
    code: &'static str,
    redactor: &Redactor,
) -> Result<(u16, String), ApiError> {
    let status = answer.map_err(error::transport)?;
    if !(200..300).contains(&status) {
        return Err(error::upstream_status(code, status));
    }
    let bytes = match read(MAX_UPSTREAM_JSON) {
        Ok(bytes) if bytes.len() > MAX_UPSTREAM_JSON => return Err(error::transport(TransportFailure::TooLarge)),
        Ok(bytes) => bytes,
        Err(failure) => return Err(error::transport(failure)),
    };
    let text = String::from_utf8(bytes).map_err(|_| error::upstream_malformed())?;
    if serde_json::from_str::<serde::de::IgnoredAny>(&text).is_err() {
        return Err(error::upstream_malformed());
    }
    // Redacted in what the browser decodes; a key that cannot be taken out
    // of the JSON (one in a number) refuses the answer rather than pass it.
    let redacted = redactor.redact_json(&text).ok_or_else(error::upstream_malformed)?;
    Ok((status, redacted.into_owned()))
}

/// A planned event stream.
pub struct Stream {
    pub call: Call,
    /// A `: keepalive` comment after this long with nothing sent.
    pub keepalive: Duration,
    relay: Relay,
}

/// An event stream to start: `first` goes out at once (the `: t0=` stamp,
/// and for an admin stream that failed to open, its `stream_error`); then,
/// with a relay, the upstream body is pumped through it.
pub struct Opened {
    pub first: String,
    pub relay: Option<Relay>,
}

impl Stream {
    /// From the upstream's status (or why there was none): a turn that
    /// cannot start is an envelope; the admin stream always starts, and its
    /// failures are one `stream_error` frame inside it. `unix_ms` is the wall
    /// clock now, the stream's `t0`.
    pub fn open(self, answer: Result<u16, TransportFailure>, unix_ms: u64) -> Result<Opened, ApiError> {
        let mut first = String::new();
        let relay = match (self.relay, answer) {
            (Relay::Turn(mut relay), Ok(200)) => {
                relay.opened(unix_ms);
                Some(Relay::Turn(relay))
            }
            (relay, Ok(200)) => Some(relay),
            (Relay::Turn(_), Ok(status)) => return Err(error::upstream_status("turn_unavailable", status)),
            (Relay::Turn(_), Err(failure)) => return Err(error::transport(failure)),
            (Relay::Admin(mut relay), answer) => {
                relay::start(&mut first, unix_ms);
                let err = match answer {
                    Ok(status) => StreamError::UpstreamStatus { status },
                    Err(_) => StreamError::ConnectFailed,
                };
                relay.fail(err, 0, &mut first);
                return Ok(Opened { first, relay: None });
            }
        };
        relay::start(&mut first, unix_ms);
        Ok(Opened { first, relay })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    const CONSUMER: &str = "csm_0123456789";
    const ADMIN: &str = "adm_0123456789";

    fn vars(admin: &str) -> HashMap<&'static str, String> {
        HashMap::from([
            ("upstream_url", "http://upstream.test/base".to_string()),
            ("affect_read_url", "https://affect.test:8443/worldtree/affect".to_string()),
            ("consumer_key", CONSUMER.to_string()),
            ("admin_key", admin.to_string()),
            ("end_user_id", "operator".to_string()),
            ("bifrost_visible_host", "bifrost.local".to_string()),
            ("upstream_timeout_ms", "300".to_string()),
            ("sse_keepalive_ms", "200".to_string()),
        ])
    }

    fn head<'a>(method: &'a str, path: &'a str, query: &'a str) -> Head<'a> {
        Head {
            method,
            path,
            query,
            content_type: Some("application/json"),
            last_event_id: None,
            origin: None,
            host: Some("console.test:3000"),
        }
    }

    fn plan_with(head: &Head<'_>, vars: &HashMap<&'static str, String>, body: &[u8]) -> Result<Plan, ApiError> {
        plan(head, |name| vars.get(name).cloned(), |_limit| Ok(body.to_vec()))
    }

    fn run(head: &Head<'_>, body: &[u8]) -> Result<Plan, ApiError> {
        plan_with(head, &vars(ADMIN), body)
    }

    fn code(result: Result<Plan, ApiError>) -> (u16, &'static str) {
        match result {
            Err(e) => (e.status, e.code),
            Ok(_) => (0, "planned"),
        }
    }

    fn fetch(result: Result<Plan, ApiError>) -> Fetch {
        match result {
            Ok(Plan::Fetch(fetch)) => fetch,
            _ => panic!("expected a fetch plan"),
        }
    }

    fn stream(result: Result<Plan, ApiError>) -> Stream {
        match result {
            Ok(Plan::Stream(stream)) => *stream,
            _ => panic!("expected a stream plan"),
        }
    }

    fn header<'c>(call: &'c Call, name: &str) -> Vec<&'c str> {
        call.headers.iter().filter(|(n, _)| n == name).map(|(_, v)| std::str::from_utf8(v).unwrap()).collect()
    }

    fn turn(body: &str) -> (u16, &'static str) {
        code(run(&head("POST", "/sessions/s_1/turns", ""), body.as_bytes()))
    }

    fn text_body(text: &str) -> String {
        json!({ "text": text }).to_string()
    }

    #[test]
    fn turn_text_limit_is_32768_characters_exactly() {
        for unit in ["x", "é", "€", "🦀"] {
            let at_limit = Map::from_iter([("text".to_string(), Value::from(unit.repeat(MAX_TURN_TEXT)))]);
            let over = Map::from_iter([("text".to_string(), Value::from(unit.repeat(MAX_TURN_TEXT + 1)))]);
            assert_eq!(turn_text(&at_limit).map(|t| t.chars().count()), Ok(MAX_TURN_TEXT), "{unit}");
            assert_eq!(turn_text(&over).unwrap_err().code, "invalid_text", "{unit}");
        }
        assert_eq!(turn(&text_body(&"x".repeat(MAX_TURN_TEXT))), (0, "planned"));
        assert_eq!(turn(&text_body(&"x".repeat(MAX_TURN_TEXT + 1))), (400, "invalid_text"));
        // Multi-byte characters count once each: 16,385 two-byte plus 16,384 one-byte is 32,769.
        let mixed = format!("{}{}", "é".repeat(16_385), "x".repeat(16_384));
        assert_eq!(mixed.chars().count(), MAX_TURN_TEXT + 1);
        assert!(text_body(&mixed).len() < MAX_REQUEST_BODY);
        assert_eq!(turn(&text_body(&mixed)), (400, "invalid_text"));
        let mixed_ok = format!("{}{}", "é".repeat(16_384), "x".repeat(16_384));
        assert_eq!(turn(&text_body(&mixed_ok)), (0, "planned"));
        for blank in ["", " ", "\n\t ", "\u{3000}"] {
            assert_eq!(turn(&text_body(blank)), (400, "invalid_text"), "{blank:?}");
        }
        assert_eq!(turn("{}"), (400, "missing_text"));
        assert_eq!(turn(r#"{"text":7}"#), (400, "missing_text"));
        assert_eq!(turn(r#"{"text":null}"#), (400, "missing_text"));
    }

    /// A body of exactly `len` bytes that is a valid session body.
    fn padded_session_body(len: usize) -> Vec<u8> {
        let mut body = br#"{"agent_id":"sindra"}"#.to_vec();
        body.resize(len, b' ');
        body
    }

    #[test]
    fn request_body_limit_is_64_kib_exactly() {
        let sessions = head("POST", "/sessions", "");
        assert_eq!(code(run(&sessions, &padded_session_body(MAX_REQUEST_BODY))), (0, "planned"));
        assert_eq!(code(run(&sessions, &padded_session_body(MAX_REQUEST_BODY + 1))), (413, "body_too_large"));
        // The bounded reader's own verdict is the same answer.
        let too_large = plan(&sessions, |n| vars(ADMIN).get(n).cloned(), |_| Err(TransportFailure::TooLarge));
        assert_eq!(code(too_large), (413, "body_too_large"));
        let broken = plan(&sessions, |n| vars(ADMIN).get(n).cloned(), |_| Err(TransportFailure::Unreachable));
        assert_eq!(code(broken), (400, "invalid_json"));
        // The reader is asked for exactly the limit.
        let mut asked = 0;
        let _ = json_body(Some("application/json"), |limit| {
            asked = limit;
            Ok(b"{}".to_vec())
        });
        assert_eq!(asked, 64 * 1024);
    }

    #[test]
    fn bodies_must_be_json_objects_sent_as_json() {
        for path in ["/sessions", "/sessions/s_1/turns"] {
            let mut h = head("POST", path, "");
            let types = [
                None,
                Some("text/plain"),
                Some("application/x-www-form-urlencoded"),
                Some(""),
                Some("application/jsonx"),
            ];
            for content_type in types {
                h.content_type = content_type;
                // The body is never read for a wrong type.
                let read = |_: usize| -> Result<Vec<u8>, TransportFailure> { panic!("read") };
                let result = plan(&h, |n| vars(ADMIN).get(n).cloned(), read);
                assert_eq!(code(result), (415, "unsupported_media_type"), "{content_type:?}");
            }
            h.content_type = Some("Application/JSON; charset=utf-8");
            for bad in ["", "{not json", "[1]", "\"x\"", "null", "{} {}"] {
                assert_eq!(code(run(&h, bad.as_bytes())), (400, "invalid_json"), "{bad:?}");
            }
            assert!(matches!(code(run(&h, b"\xff")), (400, "invalid_json")));
        }
    }

    #[test]
    fn writes_from_another_origin_or_as_a_form_are_refused_before_any_upstream_call() {
        let form = Some("application/x-www-form-urlencoded");
        let writes = [
            ("/sessions", &br#"{"agent_id":"a"}"#[..]),
            ("/sessions/s_1/turns", br#"{"text":"hi"}"#),
            ("/sessions/s_1/turns/t_1/cancel", b""),
        ];
        for (path, body) in writes {
            let mut h = head("POST", path, "");
            // A cross-site form: its own Origin (or none, or "null"), a form type.
            h.content_type = form;
            for origin in ["http://rebind.attacker.example", "null", "http://console.test:3001", "console.test:3000"] {
                h.origin = Some(origin);
                assert_eq!(code(run(&h, body)), (403, "cross_origin_rejected"), "{path} {origin}");
            }
            h.origin = None;
            assert_eq!(code(run(&h, body)), (415, "unsupported_media_type"), "{path}");
            // JSON needs a preflight cross-site: it passes whatever the Origin
            // (a proxy may rewrite Host).
            h.content_type = Some("application/json");
            h.origin = Some("http://proxy.example");
            assert_eq!(code(run(&h, body)), (0, "planned"), "{path}");
        }
        // The bodiless cancel: without the JSON type, only from the console's
        // own origin (the scheme may differ behind a TLS proxy).
        let mut cancel = head("POST", "/sessions/s_1/turns/t_1/cancel", "");
        for content_type in [None, form, Some("text/plain"), Some("application/jsonx")] {
            cancel.content_type = content_type;
            cancel.origin = None;
            assert_eq!(code(run(&cancel, b"")), (415, "unsupported_media_type"), "{content_type:?}");
            for origin in ["http://console.test:3000", "https://CONSOLE.test:3000"] {
                cancel.origin = Some(origin);
                assert_eq!(code(run(&cancel, b"")), (0, "planned"), "{content_type:?} {origin}");
            }
        }
    }

    #[test]
    fn create_session_needs_a_valid_agent_id_and_adds_the_end_user() {
        let h = head("POST", "/sessions", "");
        assert_eq!(code(run(&h, b"{}")), (400, "missing_agent_id"));
        assert_eq!(code(run(&h, br#"{"agent_id":7}"#)), (400, "missing_agent_id"));
        for bad in ["", "../admin", "a b", &"a".repeat(65)] {
            let body = json!({ "agent_id": bad }).to_string();
            assert_eq!(code(run(&h, body.as_bytes())), (400, "invalid_agent_id"), "{bad:?}");
        }
        let plan = fetch(run(&h, br#"{"agent_id":"sindra","end_user_id":"mallory"}"#));
        let call = &plan.call;
        assert_eq!((call.method, call.https, call.authority.as_str()), (Method::Post, false, "upstream.test"));
        assert_eq!(call.path_and_query, "/base/v1/sessions");
        let sent: Value = serde_json::from_slice(call.body.as_deref().unwrap()).unwrap();
        assert_eq!(sent, json!({ "agent_id": "sindra", "end_user_id": "operator" }));
        assert_eq!(header(call, "authorization"), [format!("Bearer {CONSUMER}")]);
        assert_eq!(header(call, "content-type"), ["application/json"]);
        assert_eq!((call.timeout, call.streaming), (Duration::from_millis(300), false));
        // The upstream's status passes through; a refusal keeps its status.
        let ok = plan.finish(Ok(201), |_| Ok(br#"{"session_id":"s_1"}"#.to_vec())).unwrap();
        assert_eq!(ok, Reply::json(201, r#"{"session_id":"s_1"}"#.into()));
        let refused = fetch(run(&h, br#"{"agent_id":"sindra"}"#)).finish(Ok(409), |_| panic!("not read"));
        let e = refused.unwrap_err();
        assert_eq!((e.status, e.code, &e.fields["status"]), (409, "session_create_failed", &json!(409)));
    }

    #[test]
    fn every_route_plans_its_upstream_call() {
        let t = stream(run(&head("POST", "/sessions/s_1/turns", ""), br#"{"text":"hi"}"#));
        assert_eq!(t.call.path_and_query, "/base/v1/sessions/s_1/turns");
        assert_eq!(header(&t.call, "accept"), ["text/event-stream"]);
        assert_eq!(serde_json::from_slice::<Value>(t.call.body.as_deref().unwrap()).unwrap(), json!({"text": "hi"}));
        assert!(t.call.streaming);
        assert_eq!(t.keepalive, Duration::from_millis(200));

        let c = fetch(run(&head("POST", "/sessions/s_1/turns/t_2/cancel", ""), b"ignored"));
        assert_eq!(c.call.path_and_query, "/base/v1/sessions/s_1/turns/t_2/cancel");
        assert_eq!(c.call.body.as_deref(), Some(&b"{}"[..]));
        assert_eq!(header(&c.call, "authorization"), [format!("Bearer {CONSUMER}")]);

        let tools = fetch(run(&head("GET", "/sessions/s_1/tools", ""), b""));
        assert_eq!(
            (tools.call.method, tools.call.path_and_query.as_str()),
            (Method::Get, "/base/v1/sessions/s_1/tools")
        );
        assert_eq!(header(&tools.call, "authorization"), [format!("Bearer {CONSUMER}")]);
        assert_eq!(tools.call.body, None);

        // Admin routes: the admin bearer replaces the consumer one.
        let b = fetch(run(&head("GET", "/sessions/s_1/bifrost", ""), b""));
        assert_eq!(b.call.path_and_query, "/base/v1/sessions/s_1/bifrost");
        assert_eq!(header(&b.call, "authorization"), [format!("Bearer {ADMIN}")]);
        let mut h = head("GET", "/admin/events", "session_id=s_1");
        h.last_event_id = Some("1042");
        let a = stream(run(&h, b""));
        assert_eq!(a.call.path_and_query, "/base/v1/admin/events", "the upstream gets the whole firehose");
        assert_eq!(header(&a.call, "authorization"), [format!("Bearer {ADMIN}")]);
        assert_eq!(header(&a.call, "accept"), ["text/event-stream"]);
        assert_eq!(header(&a.call, "last-event-id"), ["1042"]);

        // Affect: its own origin, the agent in the query, no key at all.
        let f = fetch(run(&head("GET", "/affect", "agent_id=sindra"), b""));
        assert_eq!((f.call.https, f.call.authority.as_str()), (true, "affect.test:8443"));
        assert_eq!(f.call.path_and_query, "/worldtree/affect?agent_id=sindra");
        assert!(header(&f.call, "authorization").is_empty());

        let cfg = fetch(run(&head("GET", "/config", ""), b""));
        assert_eq!(cfg.call.path_and_query, "/base/v1/agents");
        assert_eq!(header(&cfg.call, "authorization"), [format!("Bearer {CONSUMER}")]);
    }

    #[test]
    fn admin_routes_without_an_admin_key_fail_visibly_and_bad_last_event_ids_are_refused() {
        let no_admin = vars("");
        for (method, path) in [("GET", "/sessions/s_1/bifrost"), ("GET", "/admin/events")] {
            let result = plan_with(&head(method, path, ""), &no_admin, b"");
            assert_eq!(code(result), (400, "admin_key_not_configured"), "{path}");
        }
        let mut h = head("GET", "/admin/events", "");
        h.last_event_id = Some("1e3");
        assert_eq!(code(run(&h, b"")), (400, "invalid_last_event_id"));
    }

    #[test]
    fn route_errors_come_first_then_missing_variables() {
        assert_eq!(code(run(&head("GET", "/nope", ""), b"")), (404, "not_found"));
        let e = run(&head("GET", "/sessions", ""), b"").err().unwrap();
        assert_eq!((e.status, e.headers.clone()), (405, vec![("allow".to_string(), "POST".to_string())]));
        let mut missing = vars(ADMIN);
        missing.remove("end_user_id");
        assert_eq!(code(plan_with(&head("GET", "/config", ""), &missing, b"")), (500, "server_misconfigured"));
        let mut bad = vars(ADMIN);
        bad.insert("upstream_url", "ftp://x".into());
        assert_eq!(code(plan_with(&head("GET", "/config", ""), &bad, b"")), (500, "server_misconfigured"));
        let mut bad = vars(ADMIN);
        bad.insert("affect_read_url", "nope".into());
        assert_eq!(code(plan_with(&head("GET", "/affect", "agent_id=a"), &bad, b"")), (500, "server_misconfigured"));
        // Tools still work with a bad affect URL.
        assert_eq!(code(plan_with(&head("GET", "/sessions/s_1/tools", ""), &bad, b"")), (0, "planned"));
        // Timeouts default when unset or unparsable.
        let mut defaults = vars(ADMIN);
        defaults.remove("upstream_timeout_ms");
        defaults.insert("sse_keepalive_ms", "soon".into());
        let config = Config::from_vars(|n| defaults.get(n).cloned()).unwrap();
        assert_eq!((config.timeout, config.keepalive), (Duration::from_secs(10), Duration::from_secs(15)));
    }

    fn tools() -> Fetch {
        fetch(run(&head("GET", "/sessions/s_1/tools", ""), b""))
    }

    #[test]
    fn json_answers_are_verbatim_redacted_and_status_preserving() {
        let body = format!(r#"{{"tools":[], "echo":"Bearer {ADMIN} {CONSUMER}"}}"#);
        let reply = tools().finish(Ok(200), |_| Ok(body.clone().into_bytes())).unwrap();
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body, r#"{"tools":[], "echo":"Bearer [redacted] [redacted]"}"#);
        for status in [400, 401, 403, 404, 409, 500, 503] {
            let e = tools().finish(Ok(status), |_| panic!("not read")).unwrap_err();
            assert_eq!((e.status, e.code, &e.fields["status"]), (status, "session_tools_unavailable", &json!(status)));
        }
        for status in [100, 301, 304] {
            assert_eq!(tools().finish(Ok(status), |_| panic!("not read")).unwrap_err().status, 502);
        }
        let failures = [
            (TransportFailure::Unreachable, 502, "upstream_unreachable"),
            (TransportFailure::Timeout, 504, "upstream_timeout"),
            (TransportFailure::NotAllowed, 502, "upstream_not_allowed"),
            (TransportFailure::TooLarge, 502, "upstream_body_too_large"),
        ];
        for (failure, status, code) in failures {
            let e = tools().finish(Err(failure), |_| panic!("not read")).unwrap_err();
            assert_eq!((e.status, e.code), (status, code));
            let e = tools().finish(Ok(200), |_| Err(failure)).unwrap_err();
            assert_eq!((e.status, e.code), (status, code), "while reading");
        }
        for malformed in [&b"{\"a\":"[..], b"not json", b"\xff\xfe", b""] {
            let e = tools().finish(Ok(200), |_| Ok(malformed.to_vec())).unwrap_err();
            assert_eq!((e.status, e.code), (502, "upstream_malformed"));
        }
        let mut asked = 0;
        let _ = tools().finish(Ok(200), |limit| {
            asked = limit;
            Ok(b"{}".to_vec())
        });
        assert_eq!(asked, MAX_UPSTREAM_JSON);
        let e = tools().finish(Ok(200), |_| Ok(vec![b' '; MAX_UPSTREAM_JSON + 1])).unwrap_err();
        assert_eq!(e.code, "upstream_body_too_large");
    }

    /// A key as an upstream may echo it: raw, every character escaped, the
    /// first one escaped, the last one escaped.
    fn echoed(key: &str) -> [String; 4] {
        let all: String = key.chars().map(|c| format!("\\u{:04x}", c as u32)).collect();
        let first = format!("\\u{:04X}{}", key.as_bytes()[0], &key[1..]);
        let n = key.len() - 1;
        let last = format!("{}\\u{:04x}", &key[..n], key.as_bytes()[n]);
        [key.to_string(), all, first, last]
    }

    #[test]
    fn escaped_keys_never_reach_the_page_on_any_json_route() {
        let routes = [
            ("POST", "/sessions", "", &br#"{"agent_id":"sindra"}"#[..]),
            ("GET", "/sessions/s_1/tools", "", b""),
            ("GET", "/sessions/s_1/bifrost", "", b""),
            ("GET", "/affect", "agent_id=sindra", b""),
            ("GET", "/config", "", b""),
        ];
        for key in [CONSUMER, ADMIN] {
            for form in echoed(key) {
                let body = format!(
                    r#"{{"agents":[{{"agent_id":"a","display_name":"{form}"}}],"emitted_at":"2025-01-01T00:00:05Z","{form}":["{form}"]}}"#
                );
                for (method, path, query, sent) in routes {
                    let plan = fetch(run(&head(method, path, query), sent));
                    let reply = plan.finish(Ok(200), |_| Ok(body.clone().into_bytes())).unwrap();
                    // What the page's JSON.parse makes of it, written out again.
                    let decoded: Value = serde_json::from_str(&reply.body).unwrap();
                    for text in [decoded.to_string(), reply.body.clone()] {
                        assert!(!text.contains(CONSUMER) && !text.contains(ADMIN), "{path} {form}: {text}");
                    }
                    if let Some(entry) = reply.remember {
                        assert!(!serde_json::from_str::<Value>(&entry.value).unwrap().to_string().contains(key));
                    }
                }
            }
        }
        // A key in a number cannot be taken out of the JSON: the answer is refused.
        let digits = vars(ADMIN).into_iter().map(|(k, v)| (k, if k == "admin_key" { "90817263".into() } else { v }));
        let vars: HashMap<_, _> = digits.collect();
        let plan = fetch(plan_with(&head("GET", "/sessions/s_1/tools", ""), &vars, b""));
        let e = plan.finish(Ok(200), |_| Ok(br#"{"n":1908172634}"#.to_vec())).unwrap_err();
        assert_eq!((e.status, e.code), (502, "upstream_malformed"));
    }

    #[test]
    fn cancel_is_202_on_any_2xx_and_status_preserving_otherwise() {
        let cancel = || fetch(run(&head("POST", "/sessions/s_1/turns/t_1/cancel", ""), b""));
        for status in [200, 202, 204] {
            let reply = cancel().finish(Ok(status), |_| panic!("the body is not read")).unwrap();
            assert_eq!(reply, Reply::json(202, "{}".into()));
        }
        let e = cancel().finish(Ok(404), |_| panic!()).unwrap_err();
        assert_eq!((e.status, e.code), (404, "cancel_unavailable"));
        let e = cancel().finish(Err(TransportFailure::Timeout), |_| panic!()).unwrap_err();
        assert_eq!(e.code, "upstream_timeout");
    }

    #[test]
    fn affect_404_is_affect_not_found_and_other_answers_map_as_json() {
        let affect = || fetch(run(&head("GET", "/affect", "agent_id=sindra"), b""));
        let e = affect().finish(Ok(404), |_| panic!("not read")).unwrap_err();
        assert_eq!((e.status, e.code, &e.fields["status"]), (404, "affect_not_found", &json!(404)));
        let e = affect().finish(Ok(500), |_| panic!()).unwrap_err();
        assert_eq!((e.status, e.code), (500, "affect_unavailable"));
        let snapshot = format!(r#"{{"agent_id":"sindra","emitted_at":"2025-01-01T00:00:05Z","echo":"{ADMIN}"}}"#);
        let reply = affect().finish(Ok(200), |_| Ok(snapshot.as_bytes().to_vec())).unwrap();
        let redacted = snapshot.replace(ADMIN, "[redacted]");
        assert_eq!((reply.status, reply.body.as_str()), (200, redacted.as_str()));
        // The snapshot passed on, redacted, is the one remembered, under the queried agent.
        let remembered = reply.remember.unwrap();
        assert_eq!((remembered.agent_id.as_str(), remembered.value.as_str()), ("sindra", redacted.as_str()));
        // A 2xx that is not 200, or a snapshot without a timestamp, is not remembered.
        assert_eq!(affect().finish(Ok(203), |_| Ok(snapshot.as_bytes().to_vec())).unwrap().remember, None);
        assert_eq!(affect().finish(Ok(200), |_| Ok(b"{}".to_vec())).unwrap().remember, None);
        let h = run(&head("GET", "/affect/history", "agent_id=sindra"), b"");
        assert!(matches!(h, Ok(Plan::History { agent_id, .. }) if agent_id == "sindra"));
        assert_eq!(code(run(&head("GET", "/affect/history", "agent_id=a%20b"), b"")), (400, "invalid_agent_id"));
        assert_eq!(code(run(&head("GET", "/affect", ""), b"")), (400, "missing_agent_id"));
        assert_eq!(code(run(&head("GET", "/affect", "agent_id=..%2Fx"), b"")), (400, "invalid_agent_id"));
    }

    fn config_reply(admin: &str, answer: Result<u16, TransportFailure>, body: &str) -> Value {
        let plan = fetch(plan_with(&head("GET", "/config", ""), &vars(admin), b""));
        let reply = plan.finish(answer, |_| Ok(body.as_bytes().to_vec())).unwrap();
        assert_eq!(reply.status, 200);
        serde_json::from_str(&reply.body).unwrap()
    }

    #[test]
    fn config_lists_agents_or_says_why_and_never_a_key() {
        let agents = format!(r#"{{"agents":[{{"id":"sindra","note":"{CONSUMER}"}}]}}"#);
        let v = config_reply(ADMIN, Ok(200), &agents);
        assert_eq!(
            v,
            json!({
                "bifrost_visible_host": "bifrost.local",
                "end_user_id": "operator",
                "admin_configured": true,
                "agents": [{ "id": "sindra", "note": "[redacted]" }],
            })
        );
        assert_eq!(config_reply("", Ok(200), r#"{"agents":[]}"#)["admin_configured"], false);
        let e = config_reply(ADMIN, Ok(200), r#"{"agents":{}}"#);
        assert_eq!((&e["agents"], &e["agents_error"]), (&json!([]), &json!({ "error_code": "upstream_malformed" })));
        let e = config_reply(ADMIN, Ok(200), "not json");
        assert_eq!(e["agents_error"], json!({ "error_code": "upstream_malformed", "status": null }));
        let e = config_reply(ADMIN, Ok(201), r#"{"agents":[]}"#);
        assert_eq!(e["agents_error"], json!({ "error_code": "agents_unavailable", "status": 201 }));
        let e = config_reply(ADMIN, Ok(503), "");
        assert_eq!(e["agents_error"], json!({ "error_code": "agents_unavailable", "status": 503 }));
        let e = config_reply(ADMIN, Err(TransportFailure::Unreachable), "");
        assert_eq!(e["agents_error"], json!({ "error_code": "upstream_unreachable", "status": null }));
        let text = config_reply(ADMIN, Ok(200), &agents).to_string();
        assert!(!text.contains(ADMIN) && !text.contains(CONSUMER));
    }

    #[test]
    fn a_turn_names_its_agent_for_the_alerts_only_and_a_bad_webhook_url_is_misconfigured() {
        let turn = |body: &[u8], vars: &HashMap<&'static str, String>| {
            plan_with(&head("POST", "/sessions/s_1/turns", ""), vars, body)
        };
        let mut hooked = vars(ADMIN);
        hooked.insert("alert_webhook_url", "http://hook.test/h?k=1".into());
        let s = stream(turn(br#"{"text":"hi","agent_id":"sindra"}"#, &hooked));
        assert_eq!(s.call.body.as_deref(), Some(&br#"{"text":"hi"}"#[..]), "the upstream gets the text only");
        let mut opened = s.open(Ok(200), 7).unwrap();
        let mut out = String::new();
        let relay = opened.relay.as_mut().unwrap();
        assert_eq!(relay.next_alert_check(), Some(30_000), "alert_stall_ms defaults to 30 s");
        relay.finish(12, &mut out);
        let sent = relay.alerts(12);
        assert_eq!(
            (sent.len(), sent[0].authority.as_str(), sent[0].path_and_query.as_str()),
            (1, "hook.test", "/h?k=1")
        );
        let v: Value = serde_json::from_str(&sent[0].body).unwrap();
        assert_eq!((&v["alert"]["agent_id"], &v["alert"]["at_unix_ms"]), (&json!("sindra"), &json!(19)));
        assert_eq!(sent[0].timeout, Duration::from_millis(300), "bounded by upstream_timeout_ms");
        // Without the variable there is no alerting at all.
        let mut plain = stream(turn(br#"{"text":"hi"}"#, &vars(ADMIN))).open(Ok(200), 0).unwrap();
        assert_eq!(plain.relay.as_mut().unwrap().next_alert_check(), None);
        assert_eq!(code(turn(br#"{"text":"hi","agent_id":"../x"}"#, &hooked)), (400, "invalid_agent_id"));
        assert_eq!(code(turn(br#"{"text":"hi","agent_id":7}"#, &vars(ADMIN))), (400, "invalid_agent_id"));
        hooked.insert("alert_webhook_url", "hook.test/h".into());
        assert_eq!(code(turn(br#"{"text":"hi"}"#, &hooked)), (500, "server_misconfigured"));
    }

    #[test]
    fn a_turn_that_cannot_start_is_an_envelope_and_an_admin_stream_always_starts() {
        let turn = || stream(run(&head("POST", "/sessions/s_1/turns", ""), br#"{"text":"hi"}"#));
        let opened = turn().open(Ok(200), 1_764_000_000_123).unwrap();
        assert_eq!(opened.first, ": t0=1764000000123\n\n");
        assert!(matches!(opened.relay, Some(Relay::Turn(_))));
        let e = turn().open(Ok(403), 0).err().unwrap();
        assert_eq!((e.status, e.code, &e.fields["status"]), (403, "turn_unavailable", &json!(403)));
        assert_eq!(turn().open(Ok(201), 0).err().unwrap().status, 502);
        assert_eq!(turn().open(Err(TransportFailure::Timeout), 0).err().unwrap().code, "upstream_timeout");

        let admin = || stream(run(&head("GET", "/admin/events", ""), b""));
        assert!(matches!(admin().open(Ok(200), 5).unwrap().relay, Some(Relay::Admin(_))));
        let refused = admin().open(Ok(503), 5).unwrap();
        assert!(refused.relay.is_none());
        let data = |frames: &str| -> Value {
            assert_eq!(frames.matches("event:").count(), 1, "{frames}");
            let frame = frames.strip_prefix(": t0=5\n\n: t=0\n").unwrap();
            let data = frame.strip_prefix("event: stream_error\ndata: ").unwrap().strip_suffix("\n\n").unwrap();
            serde_json::from_str(data).unwrap()
        };
        let v = data(&refused.first);
        assert_eq!((&v["reason"], &v["status"]), (&json!("upstream_status"), &json!(503)));
        let unreachable = admin().open(Err(TransportFailure::Unreachable), 5).unwrap();
        assert_eq!(data(&unreachable.first)["reason"], "connect_failed");
    }
}
