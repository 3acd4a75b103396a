//! The entry point of both packagings. Every decision is in [`crate::plan`];
//! this file reads the request, performs the planned upstream call with the
//! kit, and sends.
//!
//! A client that leaves ends this instance at its next write (the streams
//! send keepalives), which drops the upstream request.

use std::cell::RefCell;
use std::time::Instant;

use guest_http::{
    call, header, pump_beside, read_request_body, send_error, send_json, start_sse, Outgoing, Pump, Step, Timeouts,
    TransportFailure, Upstream,
};
use spin_sdk::http::{IncomingRequest, ResponseOutparam};
use sse::KEEPALIVE;

use crate::access::{self, Credentials};
use crate::error;
use crate::history;
use crate::plan::{self, Call, Head, Plan};
use crate::relay::RelayFlow;
use crate::webhook::Webhooks;
use crate::Platform;

/// Serves one `/api` request whose Host was allowed; `path` is below `/api`
/// (what Spin sends as `spin-path-info`).
pub fn serve(req: IncomingRequest, out: ResponseOutparam, path: &str, platform: &impl Platform) {
    let var = |name: &str| platform.var(name);
    let send = |c: &Call| {
        if platform.may_call(c.https, &c.authority) {
            call(&outgoing(c))
        } else {
            Err(TransportFailure::NotAllowed)
        }
    };
    let cookie = header(&req, "cookie");
    let authorization = header(&req, "authorization");
    let credentials = Credentials { cookie: cookie.as_deref(), authorization: authorization.as_deref() };
    match access::check(var, credentials) {
        Err(e) => return send_error(out, &e),
        Ok(Some(check)) => {
            let answer = send(&check.call);
            let quiet = Some(check.call.timeout);
            let read = |limit| answer.as_ref().map_err(|f| *f).and_then(|up| up.read_to_end(limit, quiet));
            if let Err(e) = check.finish(status(&answer), read) {
                return send_error(out, &e);
            }
        }
        Ok(None) => {}
    }
    let method = req.method().to_string();
    let query = guest_http::query(&req);
    let content_type = header(&req, "content-type");
    let last_event_id = header(&req, "last-event-id");
    let origin = header(&req, "origin");
    let host = guest_http::forwarded(&req, &platform.trusted_proxies()).host.or_else(|| guest_http::host(&req));
    let head = Head {
        method: &method,
        path,
        query: &query,
        content_type: content_type.as_deref(),
        last_event_id: last_event_id.as_deref(),
        origin: origin.as_deref(),
        host: host.as_deref(),
    };
    let planned = plan::plan(&head, var, |limit| read_request_body(&req, limit));
    match planned {
        Err(e) => send_error(out, &e),
        Ok(Plan::Fetch(fetch)) => {
            let answer = send(&fetch.call);
            let quiet = Some(fetch.call.timeout);
            let read = |limit| answer.as_ref().map_err(|f| *f).and_then(|up| up.read_to_end(limit, quiet));
            match fetch.finish(status(&answer), read) {
                Ok(reply) => {
                    // The history is a record, not the answer: its failure never fails the read.
                    if let Some(entry) = &reply.remember {
                        let _ = platform.store().and_then(|kv| history::remember(&kv, entry));
                    }
                    send_json(out, reply.status, &reply.body, &[]);
                }
                Err(e) => send_error(out, &e),
            }
        }
        Ok(Plan::History { agent_id, redactor }) => {
            match platform.store().and_then(|kv| history::read(&kv, &agent_id, &redactor)) {
                Ok(body) => send_json(out, 200, &body, &[]),
                Err(_) => send_error(out, &error::history_unavailable()),
            }
        }
        Ok(Plan::Stream(stream)) => {
            let answer = send(&stream.call);
            let keepalive = stream.keepalive;
            // The stream's clocks: `: t0=` is the wall clock now, every `: t=` the
            // monotonic milliseconds since (see relay.rs).
            let opened_at = Instant::now();
            let unix_ms = guest_http::unix_ms();
            let ms = || opened_at.elapsed().as_millis() as u64;
            let opened = match stream.open(status(&answer), unix_ms) {
                Ok(opened) => opened,
                Err(e) => return send_error(out, &e),
            };
            let Some(body) = start_sse(out, &[]) else { return };
            if !opened.first.is_empty() && !body.push(opened.first.as_bytes()) {
                return;
            }
            if let (Some(relay), Ok(upstream)) = (opened.relay, &answer) {
                let relay = RefCell::new(relay);
                let rules = Pump { keepalive: Some((keepalive, KEEPALIVE)), idle_limit: None };
                let on_chunk = |chunk: &[u8], out: &mut String| match relay.borrow_mut().feed(chunk, ms(), out) {
                    RelayFlow::Continue => Step::Continue,
                    RelayFlow::Ended => Step::Stop,
                };
                // A turn's alert POSTs go beside the stream, and are waited for only after it.
                let mut hooks =
                    Webhooks::new(&relay, opened_at, |https, authority: &str| platform.may_call(https, authority));
                let on_end = |out: &mut String| relay.borrow_mut().finish(ms(), out);
                pump_beside(&upstream.stream, &body, rules, &mut hooks, on_chunk, on_end);
                body.finish();
                hooks.finish();
                return;
            }
            body.finish();
        }
    }
}

fn status(answer: &Result<Upstream, TransportFailure>) -> Result<u16, TransportFailure> {
    answer.as_ref().map(|up| up.status).map_err(|f| *f)
}

fn outgoing(c: &Call) -> Outgoing<'_> {
    Outgoing {
        method: c.method,
        https: c.https,
        authority: &c.authority,
        path_and_query: &c.path_and_query,
        headers: c.headers.clone(),
        body: c.body.as_deref(),
        // JSON answers: a host-side between-bytes backstop only; the read keeps
        // the real clock (`quiet`) so that a stall is reported as a timeout.
        timeouts: Timeouts {
            connect: c.timeout,
            first_byte: c.timeout,
            between_bytes: (!c.streaming).then(|| c.timeout.saturating_mul(2)),
        },
    }
}
