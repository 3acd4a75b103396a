//! The Spin HTTP entry point: plumbing only. All decisions live in the pure modules.
//!
//! Responses are set on the outparam before any body byte is written, so headers leave
//! at once; each SSE event is written (and flushed) as its own chunk. A failed write
//! means the client is gone: the turn is wound up (flags cleared) and the handler ends.
//!
//! Keys are only ever compared, never written to a body or to stdout/stderr. Gateway
//! tokens are hashed and looked up, never logged or stored.

use crate::admin::{live_sessions, AdminStream};
use crate::catalog::AGENTS;
use crate::inference::{self, InferenceError, TraceFacts, Usage};
use crate::ledger::{self, TraceWriter};
use crate::providers::{self, Reply};
use crate::rng::Rng;
use crate::routes::{bearer_ok, query_param, route, split_path_query, Route, Scope};
use crate::service::{ApiError, Kv, Sim, TurnTicket, BEAT_EVERY_MS};
use crate::sse;
use crate::turn;
use gateway_ledger::SpinDb;
use guest_http::{read_request_body, send, start_sse, TransportFailure};
use serde_json::{json, Value};
use spin_sdk::http::{IncomingRequest, ResponseOutparam};
use spin_sdk::http_component;
use spin_sdk::key_value::Store;

/// Request bodies larger than this are refused (400).
const MAX_BODY: usize = 64 * 1024;
/// While waiting between turn events, look at the cancel flag this often.
const CANCEL_POLL_MS: u64 = 100;
/// The admin firehose re-reads the session list this often.
const SESSIONS_REFRESH_MS: u64 = 5_000;

struct SpinKv(Store);

impl Kv for SpinKv {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, String> {
        self.0.get(key).map_err(|e| format!("{e:?}"))
    }
    fn set(&self, key: &str, value: &[u8]) -> Result<(), String> {
        self.0.set(key, value).map_err(|e| format!("{e:?}"))
    }
    fn delete(&self, key: &str) -> Result<(), String> {
        self.0.delete(key).map_err(|e| format!("{e:?}"))
    }
    fn keys(&self) -> Result<Vec<String>, String> {
        self.0.get_keys().map_err(|e| format!("{e:?}"))
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

fn sleep_ms(ms: u64) {
    if ms > 0 {
        wasi::clocks::monotonic_clock::subscribe_duration(ms * 1_000_000).block();
    }
}

fn seeded_rng() -> Rng {
    Rng::new(wasi::random::random::get_random_u64())
}

fn variable(name: &str) -> String {
    // Undefined or unreadable = empty = nothing is accepted.
    spin_sdk::variables::get(name).unwrap_or_default()
}

fn open_kv() -> Result<SpinKv, ApiError> {
    Store::open_default().map(SpinKv).map_err(|e| {
        eprintln!("simulator: cannot open key-value store \"default\": {e:?}");
        ApiError::Internal
    })
}

fn header_values(req: &IncomingRequest, name: &str) -> Vec<Vec<u8>> {
    let fields = req.headers();
    let values = fields.get(name);
    drop(fields);
    values
}

fn send_json(out: ResponseOutparam, status: u16, body: &Value, extra: &[(&str, &str)]) {
    let extra: Vec<(String, String)> = extra.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
    guest_http::send_json(out, status, &body.to_string(), &extra);
}

fn send_error(out: ResponseOutparam, err: ApiError) {
    let allow;
    let extra: &[(&str, &str)] = match &err {
        ApiError::MethodNotAllowed(a) => {
            allow = [("allow", *a)];
            &allow
        }
        _ => &[],
    };
    send_json(out, err.status(), &err.body(), extra);
}

fn read_body(req: &IncomingRequest) -> Result<Vec<u8>, ApiError> {
    read_request_body(req, MAX_BODY).map_err(|failure| {
        ApiError::BadRequest(match failure {
            TransportFailure::TooLarge => "request body too large".into(),
            _ => "could not read the request body".into(),
        })
    })
}

#[http_component]
fn handle(req: IncomingRequest, out: ResponseOutparam) {
    let method = req.method().to_string();
    let path_query = req.path_with_query().unwrap_or_default();
    let (path, query) = split_path_query(&path_query);
    let route = match route(&method, path) {
        Ok(r) => r,
        Err(e) => return send_error(out, e),
    };

    let authorized = match route.scope() {
        Scope::Public | Scope::Own => true,
        Scope::Consumer => bearer_ok(&header_values(&req, "authorization"), &variable("consumer_key")),
        Scope::Admin => bearer_ok(&header_values(&req, "authorization"), &variable("admin_key")),
    };
    if !authorized {
        return send_error(out, ApiError::Unauthorized);
    }

    match route {
        Route::BraveSearch => {
            let tokens = header_values(&req, "x-subscription-token");
            return send_reply(out, providers::brave(query, &tokens));
        }
        Route::LinkupSearch => {
            let auth = header_values(&req, "authorization");
            return match read_body(&req) {
                Ok(body) => send_reply(out, providers::linkup(&auth, &body)),
                Err(e) => send_error(out, e),
            };
        }
        Route::ChatCompletions { tenant_slug, gateway_slug } => {
            return chat_completions(req, out, &tenant_slug, &gateway_slug)
        }
        _ => {}
    }

    if route == Route::Agents {
        let agents: Vec<Value> =
            AGENTS.iter().map(|a| json!({ "agent_id": a.id, "display_name": a.display_name })).collect();
        return send_json(out, 200, &json!({ "agents": agents }), &[]);
    }

    let kv = match open_kv() {
        Ok(kv) => kv,
        Err(e) => return send_error(out, e),
    };
    let sim = Sim::new(&kv);
    let mut rng = seeded_rng();

    match route {
        Route::Agents | Route::BraveSearch | Route::LinkupSearch | Route::ChatCompletions { .. } => unreachable!(),
        Route::CreateSession => {
            let result = match read_body(&req) {
                Ok(body) => sim.create_session(&body, now_ms(), &mut rng),
                Err(e) => Err(e),
            };
            match result {
                Ok(created) => send_json(out, 201, &json!(created), &[]),
                Err(e) => send_error(out, e),
            }
        }
        Route::StartTurn { session_id } => {
            // 404 for an unknown session before reading the body.
            match sim.session(&session_id) {
                Ok(Some(_)) => {}
                Ok(None) => return send_error(out, ApiError::NotFound("unknown_session")),
                Err(e) => return send_error(out, e),
            }
            let ticket = match read_body(&req) {
                Ok(body) => sim.begin_turn(&session_id, &body, now_ms(), &mut rng),
                Err(e) => Err(e),
            };
            match ticket {
                Ok(ticket) => stream_turn(out, &sim, ticket, &mut rng),
                Err(e) => send_error(out, e),
            }
        }
        Route::CancelTurn { session_id, turn_id } => match sim.cancel(&session_id, &turn_id, now_ms()) {
            Ok(()) => send_json(out, 202, &json!({}), &[]),
            Err(e) => send_error(out, e),
        },
        Route::Tools { session_id } => match sim.tools(&session_id) {
            Ok(inv) => send_json(out, 200, &inv, &[]),
            Err(e) => send_error(out, e),
        },
        Route::Bifrost { session_id } => match sim.bifrost(&session_id, now_ms()) {
            Ok(state) => send_json(out, 200, &json!(state), &[]),
            Err(e) => send_error(out, e),
        },
        Route::Affect => match sim.affect(query_param(query, "agent_id").as_deref(), now_ms()) {
            Ok(snap) => send_json(out, 200, &snap, &[]),
            Err(e) => send_error(out, e),
        },
        Route::AdminEvents => {
            let last_event_id =
                header_values(&req, "last-event-id").into_iter().next().and_then(|v| String::from_utf8(v).ok());
            drop(req);
            stream_admin(out, &sim, last_event_id)
        }
    }
}

/// Wait `ms`, watching the cancel flag and keeping the running flag's beat fresh;
/// true if a cancel was requested.
fn wait_unless_cancelled(sim: &Sim<SpinKv>, t: &TurnTicket, ms: u64, last_beat: &mut u64) -> bool {
    let mut left = ms;
    loop {
        if sim.cancel_requested(&t.session.session_id, &t.turn_id) {
            return true;
        }
        let now = now_ms();
        if now.saturating_sub(*last_beat) >= BEAT_EVERY_MS {
            sim.beat(t, now);
            *last_beat = now;
        }
        if left == 0 {
            return false;
        }
        let step = left.min(CANCEL_POLL_MS);
        sleep_ms(step);
        left -= step;
    }
}

fn stream_turn(out: ResponseOutparam, sim: &Sim<'_, SpinKv>, ticket: TurnTicket, rng: &mut Rng) {
    let Some(body) = start_sse(out, &[]) else { return };
    let script = turn::script(ticket.agent, &ticket.text, &ticket.turn_id, rng);
    let mut last_beat = ticket.started_at_ms;
    for ev in &script.events {
        let first = ev.event == "turn.started";
        if !first && wait_unless_cancelled(sim, &ticket, ev.delay_ms, &mut last_beat) {
            sim.finish_turn(&ticket, "cancelled", now_ms(), rng);
            let c = turn::cancelled_event(&ticket.turn_id);
            body.push(sse::json_frame(None, c.event, &c.data).as_bytes());
            return body.finish();
        }
        if ev.is_terminal() {
            // Clear the running flag before the client can see the end of the turn.
            sim.finish_turn(&ticket, script.status, now_ms(), rng);
        }
        if !body.push(sse::json_frame(None, ev.event, &ev.data).as_bytes()) {
            if !ev.is_terminal() {
                sim.finish_turn(&ticket, "disconnected", now_ms(), rng);
            }
            return;
        }
    }
    body.finish();
}

fn stream_admin(out: ResponseOutparam, sim: &Sim<'_, SpinKv>, last_event_id: Option<String>) {
    let Some(body) = start_sse(out, &[]) else { return };
    let mut sessions = sim.session_ids();
    let mut refreshed_at = now_ms();
    let (mut stream, replay) = AdminStream::start(last_event_id.as_deref(), refreshed_at, live_sessions(&sessions));
    for ev in replay {
        if !body.push(sse::json_frame(Some(ev.id), ev.event, &ev.data).as_bytes()) {
            return;
        }
    }
    // Ends when the client leaves (the next write fails).
    loop {
        let now = now_ms();
        if now.saturating_sub(refreshed_at) >= SESSIONS_REFRESH_MS {
            sessions = sim.session_ids();
            refreshed_at = now;
        }
        let ev = stream.next(now, live_sessions(&sessions));
        sleep_ms(ev.at_ms.saturating_sub(now_ms()));
        if !body.push(sse::json_frame(Some(ev.id), ev.event, &ev.data).as_bytes()) {
            return;
        }
    }
}

/// A provider answer, after its scripted delay.
fn send_reply(out: ResponseOutparam, reply: Reply) {
    sleep_ms(reply.delay_ms);
    send(out, reply.status, &reply.headers, &reply.body);
}

fn send_inference_error(out: ResponseOutparam, err: InferenceError) {
    send_json(out, err.status(), &err.body(), &[]);
}

/// `POST /inference/{tenant}/{gateway}/v1/chat/completions`: the token is checked (and any
/// refusal sent) before the body is read and before any byte of a reply; then the trace
/// row and its first steps are written, the reply streams, and the last steps are written
/// before the final chunk, so a client that has seen `[DONE]` finds the trace complete.
fn chat_completions(req: IncomingRequest, out: ResponseOutparam, tenant: &str, gateway: &str) {
    let started = now_ms();
    let token = match inference::request_token(&header_values(&req, "authorization")) {
        Ok(t) => t,
        Err(e) => return send_inference_error(out, e),
    };
    let token_hash = inference::token_hash(&token);
    drop(token);
    let db = match SpinDb::open("default") {
        Ok(db) => db,
        Err(e) => {
            eprintln!("simulator: cannot open sqlite database \"default\": {e:?}");
            return send_inference_error(out, InferenceError::Internal);
        }
    };
    let now_s = (now_ms() / 1000) as i64;
    let grant = match ledger::authorize(&db, &token_hash, tenant, gateway, now_s) {
        Ok(g) => g,
        Err(e) => return send_inference_error(out, e),
    };
    let auth_ended = now_ms();
    let chat = match read_body(&req) {
        Ok(body) => inference::parse_chat(&body),
        Err(e) => Err(InferenceError::BadRequest(match e {
            ApiError::BadRequest(m) => m,
            _ => "could not read the request body".into(),
        })),
    };
    let chat = match chat {
        Ok(c) => c,
        Err(e) => return send_inference_error(out, e),
    };

    let mut rng = seeded_rng();
    let trace_id = inference::trace_id(&mut rng);
    let completion_id = inference::completion_id(&mut rng);
    let created_s = now_ms() / 1000;
    let model = chat.model.clone();
    if let Err(e) = ledger::start_trace(&db, &trace_id, &grant.gateway_id, started, &model) {
        eprintln!("simulator: could not start the trace: {e}");
        return send_inference_error(out, InferenceError::Internal);
    }
    let mut trace = TraceWriter { db: &db, trace_id: trace_id.clone(), next_seq: 0 };
    let facts = TraceFacts {
        tenant_slug: tenant,
        gateway_slug: gateway,
        gateway_id: &grant.gateway_id,
        token_kind: &grant.kind,
        token_expires_at_s: grant.expires_at_s,
        request: &chat,
        completion_id: &completion_id,
    };
    trace.step(&inference::auth_step(&facts, started, auth_ended));
    let routed = now_ms();
    trace.step(&inference::route_step(&facts, auth_ended, routed));
    trace.step(&inference::model_request_step(&facts, routed, now_ms()));

    let prompt = chat.prompt();
    let text = inference::reply_text(prompt, tenant, gateway, &model, &mut rng);
    let deltas = inference::script(&text, inference::slow_requested(prompt), &mut rng);
    let usage = Usage::of(&chat, &text);

    if !chat.stream {
        let generating = now_ms();
        sleep_ms(deltas.iter().map(|d| d.delay_ms).sum::<u64>().min(5_000));
        let done = now_ms();
        trace.step(&inference::response_step(false, generating, done, None, 1, &text, true));
        trace.step(&inference::complete_step(done, started, "stop", &usage));
        trace.finish(now_ms(), "ok");
        let body = inference::completion(&completion_id, created_s, &model, &text, &usage);
        return send_json(out, 200, &body, &[("x-trace-id", &trace_id)]);
    }

    let Some(body) = start_sse(out, &[("x-trace-id", &trace_id)]) else { return };
    let streaming = now_ms();
    let mut first_delta = None;
    let mut sent = String::new();
    for (i, delta) in deltas.iter().enumerate() {
        sleep_ms(delta.delay_ms);
        let chunk = inference::content_chunk(&completion_id, created_s, &model, i, &delta.text);
        if !body.push(sse::data_frame(&chunk).as_bytes()) {
            let gone = now_ms();
            trace.step(&inference::response_step(true, streaming, gone, first_delta, i, &sent, false));
            trace.finish(gone, "disconnected");
            return;
        }
        first_delta.get_or_insert_with(now_ms);
        sent.push_str(&delta.text);
    }
    let streamed = now_ms();
    trace.step(&inference::response_step(true, streaming, streamed, first_delta, deltas.len(), &sent, true));
    trace.step(&inference::complete_step(now_ms(), started, "stop", &usage));
    trace.finish(now_ms(), "ok");
    let stop = inference::stop_chunk(&completion_id, created_s, &model);
    if body.push(sse::data_frame(&stop).as_bytes()) && body.push(sse::DONE.as_bytes()) {
        body.finish();
    }
}
