//! The Spin HTTP entry point: plumbing only. All decisions live in the pure modules.
//!
//! Responses are set on the outparam before any body byte is written, so headers leave
//! at once; each SSE event is written (and flushed) as its own chunk. A failed write
//! means the client is gone: the turn is wound up (flags cleared) and the handler ends.
//!
//! Keys are only ever compared, never written to a body or to stdout/stderr. Gateway
//! tokens are hashed and looked up, never logged or stored.

use crate::catalog::AGENTS;
use crate::inference::{self, InferenceError};
use crate::ledger;
use crate::providers::{self, Reply};
use crate::rng::Rng;
use crate::routes::{bearer_ok, query_param, route, split_path_query, Route, Scope};
use crate::service::{Sim, TurnTicket, UpstreamError};
use crate::streams::{self, Chat, Client, Clock, Timed};
use gateway_ledger::SpinDb;
use guest_http::kv::SpinKv;
use guest_http::{read_request_body, send, start_sse, Body, TransportFailure};
use serde_json::{json, Value};
use spin_sdk::http::{IncomingRequest, ResponseOutparam};
use spin_sdk::http_component;

/// Request bodies larger than this are refused (400).
const MAX_BODY: usize = 64 * 1024;

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

fn open_kv() -> Result<SpinKv, UpstreamError> {
    SpinKv::open_default().map_err(|e| {
        eprintln!("simulator: cannot open key-value store \"default\": {e}");
        UpstreamError::Internal
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

fn send_error(out: ResponseOutparam, err: UpstreamError) {
    let allow;
    let extra: &[(&str, &str)] = match &err {
        UpstreamError::MethodNotAllowed(a) => {
            allow = [("allow", *a)];
            &allow
        }
        _ => &[],
    };
    send_json(out, err.status(), &err.body(), extra);
}

fn read_body(req: &IncomingRequest) -> Result<Vec<u8>, UpstreamError> {
    read_request_body(req, MAX_BODY).map_err(|failure| {
        UpstreamError::BadRequest(match failure {
            TransportFailure::TooLarge => "request body too large".into(),
            _ => "could not read the request body".into(),
        })
    })
}

#[http_component]
fn handle(req: IncomingRequest, out: ResponseOutparam) {
    if !guest_http::host_allowed(&req) {
        return guest_http::send_host_not_allowed(out);
    }
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
        return send_error(out, UpstreamError::Unauthorized);
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
                Ok(body) => sim.create_session(&body, guest_http::unix_ms(), &mut rng),
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
                Ok(None) => return send_error(out, UpstreamError::NotFound("unknown_session")),
                Err(e) => return send_error(out, e),
            }
            let ticket = match read_body(&req) {
                Ok(body) => sim.begin_turn(&session_id, &body, guest_http::unix_ms(), &mut rng),
                Err(e) => Err(e),
            };
            match ticket {
                Ok(ticket) => stream_turn(out, &sim, ticket, &mut rng),
                Err(e) => send_error(out, e),
            }
        }
        Route::CancelTurn { session_id, turn_id } => match sim.cancel(&session_id, &turn_id, guest_http::unix_ms()) {
            Ok(()) => send_json(out, 202, &json!({}), &[]),
            Err(e) => send_error(out, e),
        },
        Route::Tools { session_id } => match sim.tools(&session_id) {
            Ok(inv) => send_json(out, 200, &inv, &[]),
            Err(e) => send_error(out, e),
        },
        Route::Bifrost { session_id } => match sim.bifrost(&session_id, guest_http::unix_ms()) {
            Ok(state) => send_json(out, 200, &json!(state), &[]),
            Err(e) => send_error(out, e),
        },
        Route::Affect => match sim.affect(query_param(query, "agent_id").as_deref(), guest_http::unix_ms()) {
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

/// The response body, as the [`streams`] client.
impl Client for Body {
    fn send_frame(&mut self, frame: &str) -> bool {
        self.push(frame.as_bytes())
    }
}

fn stream_turn(out: ResponseOutparam, sim: &Sim<'_, SpinKv>, ticket: TurnTicket, rng: &mut Rng) {
    let Some(body) = start_sse(out, &[]) else { return };
    let mut io = Timed { clock: WasiClock, client: body };
    streams::turn(&mut io, sim, &ticket, rng);
    io.client.finish();
}

fn stream_admin(out: ResponseOutparam, sim: &Sim<'_, SpinKv>, last_event_id: Option<String>) {
    let Some(body) = start_sse(out, &[]) else { return };
    // Ends when the client leaves (its next write fails).
    streams::admin(&mut Timed { clock: WasiClock, client: body }, sim, last_event_id.as_deref());
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
    let started = guest_http::unix_ms();
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
    let now_s = (guest_http::unix_ms() / 1000) as i64;
    let grant = match ledger::authorize(&db, &token_hash, tenant, gateway, now_s) {
        Ok(g) => g,
        Err(e) => return send_inference_error(out, e),
    };
    let auth_ended = guest_http::unix_ms();
    let chat = match read_body(&req) {
        Ok(body) => inference::parse_chat(&body),
        Err(e) => Err(InferenceError::BadRequest(match e {
            UpstreamError::BadRequest(m) => m,
            _ => "could not read the request body".into(),
        })),
    };
    let chat = match chat {
        Ok(c) => c,
        Err(e) => return send_inference_error(out, e),
    };

    let mut rng = seeded_rng();
    let run = match Chat::begin(&WasiClock, &db, &grant, &chat, &mut rng, (started, auth_ended)) {
        Ok(run) => run,
        Err(e) => {
            eprintln!("simulator: could not start the trace: {e}");
            return send_inference_error(out, InferenceError::Internal);
        }
    };
    let trace_id = run.trace_id.clone();
    if !chat.stream {
        let body = run.complete(&mut WasiClock);
        return send_json(out, 200, &body, &[("x-trace-id", &trace_id)]);
    }
    let Some(body) = start_sse(out, &[("x-trace-id", &trace_id)]) else { return };
    let mut io = Timed { clock: WasiClock, client: body };
    if run.stream(&mut io) {
        io.client.finish();
    }
}

/// The wasi clocks.
struct WasiClock;

impl Clock for WasiClock {
    fn now_ms(&self) -> u64 {
        guest_http::unix_ms()
    }
    fn sleep_ms(&mut self, ms: u64) {
        sleep_ms(ms)
    }
}
