//! What the simulator's answers do over time, as plain functions: a turn's
//! event stream, the admin firehose, and a chat completion with its trace.
//! The wasm handler hands them its response body and the clocks ([`Io`]);
//! the native tests hand them fakes.

use serde_json::Value;

use crate::admin::{live_sessions, AdminStream};
use crate::inference::{self, ChatRequest, Delta, TraceFacts, Usage};
use crate::ledger::{self, Db, Grant, TraceWriter};
use crate::rng::Rng;
use crate::service::{Kv, Sim, TurnTicket, BEAT_EVERY_MS};
use crate::{sse, turn};

/// While waiting between turn events, look at the cancel flag this often.
const CANCEL_POLL_MS: u64 = 100;
/// The admin firehose re-reads the session list this often.
const SESSIONS_REFRESH_MS: u64 = 5_000;
/// A non-streamed completion waits out its script, at most this long.
const MAX_COMPLETION_WAIT_MS: u64 = 5_000;

/// The clocks.
pub trait Clock {
    /// Wall clock, unix milliseconds.
    fn now_ms(&self) -> u64;
    fn sleep_ms(&mut self, ms: u64);
}

/// The clocks and the client.
pub trait Io: Clock {
    /// Sends one frame now; `false` once the client is gone.
    fn push(&mut self, frame: &str) -> bool;
}

/// Where frames go.
pub trait Client {
    /// Sends one frame now; `false` once the client is gone.
    fn send_frame(&mut self, frame: &str) -> bool;
}

/// A client on a clock: the [`Io`] the handler hands the streams.
pub struct Timed<C, W> {
    pub clock: C,
    pub client: W,
}

impl<C: Clock, W> Clock for Timed<C, W> {
    fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }
    fn sleep_ms(&mut self, ms: u64) {
        self.clock.sleep_ms(ms)
    }
}

impl<C: Clock, W: Client> Io for Timed<C, W> {
    fn push(&mut self, frame: &str) -> bool {
        self.client.send_frame(frame)
    }
}

/// Plays a turn's script. A cancel ends it with a `cancelled` event; a client
/// that leaves ends it as `disconnected`; either way the running flag clears.
pub fn turn<K: Kv>(io: &mut impl Io, sim: &Sim<'_, K>, ticket: &TurnTicket, rng: &mut Rng) {
    let script = turn::script(ticket.agent, &ticket.text, &ticket.turn_id, rng);
    let mut last_beat = ticket.started_at_ms;
    for ev in &script.events {
        let first = ev.event == "turn.started";
        if !first && wait_unless_cancelled(io, sim, ticket, ev.delay_ms, &mut last_beat) {
            sim.finish_turn(ticket, "cancelled", io.now_ms(), rng);
            let c = turn::cancelled_event(&ticket.turn_id);
            io.push(&sse::json_frame(None, c.event, &c.data));
            return;
        }
        if ev.is_terminal() {
            // Clear the running flag before the client can see the end of the turn.
            sim.finish_turn(ticket, script.status, io.now_ms(), rng);
        }
        if !io.push(&sse::json_frame(None, ev.event, &ev.data)) {
            if !ev.is_terminal() {
                sim.finish_turn(ticket, "disconnected", io.now_ms(), rng);
            }
            return;
        }
    }
}

/// Waits `ms`, watching the cancel flag and keeping the running flag's beat
/// fresh; true if a cancel was requested.
fn wait_unless_cancelled<K: Kv>(
    io: &mut impl Io,
    sim: &Sim<'_, K>,
    t: &TurnTicket,
    ms: u64,
    last_beat: &mut u64,
) -> bool {
    let mut left = ms;
    loop {
        if sim.cancel_requested(&t.session.session_id, &t.turn_id) {
            return true;
        }
        let now = io.now_ms();
        if now.saturating_sub(*last_beat) >= BEAT_EVERY_MS {
            sim.beat(t, now);
            *last_beat = now;
        }
        if left == 0 {
            return false;
        }
        let step = left.min(CANCEL_POLL_MS);
        io.sleep_ms(step);
        left -= step;
    }
}

/// The admin firehose: the replay after `last_event_id`, then live events
/// until the client leaves.
pub fn admin<K: Kv>(io: &mut impl Io, sim: &Sim<'_, K>, last_event_id: Option<&str>) {
    let mut sessions = sim.session_ids();
    let mut refreshed_at = io.now_ms();
    let (mut stream, replay) = AdminStream::start(last_event_id, refreshed_at, live_sessions(&sessions));
    for ev in replay {
        if !io.push(&sse::json_frame(Some(ev.id), ev.event, &ev.data)) {
            return;
        }
    }
    loop {
        let now = io.now_ms();
        if now.saturating_sub(refreshed_at) >= SESSIONS_REFRESH_MS {
            sessions = sim.session_ids();
            refreshed_at = now;
        }
        let ev = stream.next(now, live_sessions(&sessions));
        io.sleep_ms(ev.at_ms.saturating_sub(io.now_ms()));
        if !io.push(&sse::json_frame(Some(ev.id), ev.event, &ev.data)) {
            return;
        }
    }
}

/// A chat completion whose trace row and first steps are written: what is
/// left is to answer it, streamed ([`Chat::stream`]) or whole ([`Chat::complete`]).
pub struct Chat<'a> {
    pub trace_id: String,
    trace: TraceWriter<'a>,
    completion_id: String,
    created_s: u64,
    model: String,
    text: String,
    deltas: Vec<Delta>,
    usage: Usage,
    started_ms: u64,
}

impl<'a> Chat<'a> {
    /// Writes the trace row and its `auth`, `route` and `model_request` steps.
    /// `started_ms` is when the request arrived, `auth_ended_ms` when its token
    /// was accepted. The grant names the tenant and gateway: `authorize`
    /// only returns one whose slugs match the request's path.
    pub fn begin(
        io: &impl Clock,
        db: &'a dyn Db,
        grant: &Grant,
        chat: &ChatRequest,
        rng: &mut Rng,
        (started_ms, auth_ended_ms): (u64, u64),
    ) -> Result<Chat<'a>, ledger::DbError> {
        let trace_id = inference::trace_id(rng);
        let completion_id = inference::completion_id(rng);
        let created_s = io.now_ms() / 1000;
        ledger::start_trace(db, &trace_id, &grant.gateway_id, started_ms, &chat.model)?;
        let mut trace = TraceWriter { db, trace_id: trace_id.clone(), next_seq: 0 };
        let facts = TraceFacts {
            tenant_slug: &grant.tenant_slug,
            gateway_slug: &grant.gateway_slug,
            gateway_id: &grant.gateway_id,
            token_kind: &grant.kind,
            token_expires_at_s: grant.expires_at_s,
            request: chat,
            completion_id: &completion_id,
        };
        trace.step(&inference::auth_step(&facts, started_ms, auth_ended_ms));
        let routed = io.now_ms();
        trace.step(&inference::route_step(&facts, auth_ended_ms, routed));
        trace.step(&inference::model_request_step(&facts, routed, io.now_ms()));
        let prompt = chat.prompt();
        let text = inference::reply_text(prompt, &grant.tenant_slug, &grant.gateway_slug, &chat.model, rng);
        let deltas = inference::script(&text, inference::slow_requested(prompt), rng);
        let usage = Usage::of(chat, &text);
        Ok(Chat {
            trace_id,
            trace,
            completion_id,
            created_s,
            model: chat.model.clone(),
            text,
            deltas,
            usage,
            started_ms,
        })
    }

    /// Waits out the script (at most 5 s), records the last steps, and returns
    /// the whole completion.
    pub fn complete(mut self, io: &mut impl Clock) -> Value {
        let generating = io.now_ms();
        io.sleep_ms(self.deltas.iter().map(|d| d.delay_ms).sum::<u64>().min(MAX_COMPLETION_WAIT_MS));
        let done = io.now_ms();
        self.trace.step(&inference::response_step(false, generating, done, None, 1, &self.text, true));
        self.trace.step(&inference::complete_step(done, self.started_ms, "stop", &self.usage));
        self.trace.finish(io.now_ms(), "ok");
        inference::completion(&self.completion_id, self.created_s, &self.model, &self.text, &self.usage)
    }

    /// Streams the deltas; the last steps are written before the final chunk,
    /// so a client that has seen `[DONE]` finds the trace complete. A client
    /// that leaves ends the trace as `disconnected`. True if the stream ended.
    pub fn stream(mut self, io: &mut impl Io) -> bool {
        let streaming = io.now_ms();
        let mut first_delta = None;
        let mut sent = String::new();
        for (i, delta) in self.deltas.iter().enumerate() {
            io.sleep_ms(delta.delay_ms);
            let chunk = inference::content_chunk(&self.completion_id, self.created_s, &self.model, i, &delta.text);
            if !io.push(&sse::data_frame(&chunk)) {
                let gone = io.now_ms();
                self.trace.step(&inference::response_step(true, streaming, gone, first_delta, i, &sent, false));
                self.trace.finish(gone, "disconnected");
                return false;
            }
            first_delta.get_or_insert_with(|| io.now_ms());
            sent.push_str(&delta.text);
        }
        let streamed = io.now_ms();
        let n = self.deltas.len();
        self.trace.step(&inference::response_step(true, streaming, streamed, first_delta, n, &sent, true));
        self.trace.step(&inference::complete_step(io.now_ms(), self.started_ms, "stop", &self.usage));
        self.trace.finish(io.now_ms(), "ok");
        let stop = inference::stop_chunk(&self.completion_id, self.created_s, &self.model);
        io.push(&sse::data_frame(&stop)) && io.push(sse::DONE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::running_key;
    use crate::service::tests::MemKv;
    use gateway_ledger::testing::MemDb;
    use serde_json::json;

    const NOW: u64 = 1_796_000_000_000;

    /// A virtual clock (sleeping moves it) and a client that leaves after
    /// `accept` frames; `on_sleep` runs at each sleep (e.g. a cancel arriving).
    struct Fake<'a> {
        now: u64,
        frames: Vec<String>,
        accept: usize,
        on_sleep: Box<dyn FnMut(u64) + 'a>,
    }

    impl<'a> Fake<'a> {
        fn new(accept: usize) -> Self {
            Fake { now: NOW, frames: Vec::new(), accept, on_sleep: Box::new(|_| {}) }
        }
        fn events(&self) -> Vec<String> {
            self.frames
                .iter()
                .filter_map(|f| f.strip_prefix("event: ")?.split('\n').next().map(str::to_owned))
                .collect()
        }
    }

    impl Clock for Fake<'_> {
        fn now_ms(&self) -> u64 {
            self.now
        }
        fn sleep_ms(&mut self, ms: u64) {
            self.now += ms;
            (self.on_sleep)(self.now);
        }
    }

    impl Io for Fake<'_> {
        fn push(&mut self, frame: &str) -> bool {
            if self.frames.len() >= self.accept {
                return false;
            }
            self.frames.push(frame.to_owned());
            true
        }
    }

    fn ticket(sim: &Sim<MemKv>, rng: &mut Rng) -> TurnTicket {
        let body = json!({"agent_id": "sindra", "end_user_id": "operator"}).to_string();
        let sid = sim.create_session(body.as_bytes(), NOW, rng).unwrap().session_id;
        sim.begin_turn(&sid, br#"{"text":"hello"}"#, NOW, rng).unwrap()
    }

    #[test]
    fn a_turn_plays_its_script_to_a_terminal_event_and_clears_the_running_flag() {
        let kv = MemKv::default();
        let sim = Sim::new(&kv);
        let mut rng = Rng::new(7);
        let t = ticket(&sim, &mut rng);
        let mut io = Fake::new(usize::MAX);
        turn(&mut io, &sim, &t, &mut rng);
        let events = io.events();
        assert_eq!(events.first().map(String::as_str), Some("turn.started"));
        assert!(matches!(events.last().map(String::as_str), Some("done" | "error")), "{events:?}");
        assert!(io.now > NOW, "the script's delays were waited out");
        assert!(kv.get(&running_key(&t.session.session_id)).unwrap().is_none());
    }

    #[test]
    fn a_cancel_during_a_wait_ends_the_turn_with_one_cancelled_event() {
        let kv = MemKv::default();
        let sim = Sim::new(&kv);
        let mut rng = Rng::new(7);
        let t = ticket(&sim, &mut rng);
        let (sid, tid) = (t.session.session_id.clone(), t.turn_id.clone());
        let mut io = Fake::new(usize::MAX);
        let canceller = Sim::new(&kv);
        io.on_sleep = Box::new(move |now| {
            let _ = canceller.cancel(&sid, &tid, now);
        });
        turn(&mut io, &sim, &t, &mut rng);
        assert_eq!(io.events(), vec!["turn.started".to_string(), "cancelled".to_string()]);
        assert!(kv.get(&running_key(&t.session.session_id)).unwrap().is_none());
    }

    #[test]
    fn a_client_that_leaves_ends_the_turn_and_clears_the_running_flag() {
        let kv = MemKv::default();
        let sim = Sim::new(&kv);
        let mut rng = Rng::new(7);
        let t = ticket(&sim, &mut rng);
        let mut io = Fake::new(2);
        turn(&mut io, &sim, &t, &mut rng);
        assert_eq!(io.frames.len(), 2);
        assert!(kv.get(&running_key(&t.session.session_id)).unwrap().is_none());
    }

    #[test]
    fn the_admin_firehose_sends_numbered_events_until_the_client_leaves() {
        let kv = MemKv::default();
        let sim = Sim::new(&kv);
        let mut io = Fake::new(5);
        admin(&mut io, &sim, None);
        assert_eq!(io.frames.len(), 5);
        let ids: Vec<u64> = io
            .frames
            .iter()
            .map(|f| f.lines().find_map(|l| l.strip_prefix("id: ")).unwrap().parse().unwrap())
            .collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    }

    fn chat(stream: bool) -> (MemDb, Grant, ChatRequest) {
        let db = MemDb::with_shared_tables();
        db.exec("INSERT INTO tenants (id, slug) VALUES ('ten_a', 'acme')", &[]).unwrap();
        db.exec("INSERT INTO gateways (id, tenant_id, slug) VALUES ('gw_a', 'ten_a', 'main')", &[]).unwrap();
        let grant = Grant {
            expires_at_s: (NOW / 1000) as i64 + 60,
            kind: "playground".into(),
            gateway_id: "gw_a".into(),
            gateway_slug: "main".into(),
            tenant_slug: "acme".into(),
        };
        let body = json!({"model": "m", "stream": stream, "messages": [{"role": "user", "content": "hi"}]});
        (db, grant, inference::parse_chat(body.to_string().as_bytes()).unwrap())
    }

    fn trace(db: &MemDb, id: &str) -> (String, Vec<String>) {
        let status = db.one("SELECT status FROM traces WHERE id = ?", &[id.into()]).unwrap().unwrap().text(0).unwrap();
        let steps = db
            .query("SELECT name FROM trace_steps WHERE trace_id = ? ORDER BY seq", &[id.into()])
            .unwrap()
            .iter()
            .map(|r| r.text(0).unwrap())
            .collect();
        (status, steps)
    }

    #[test]
    fn a_streamed_chat_records_its_whole_trace_before_done() {
        let (db, grant, req) = chat(true);
        let mut io = Fake::new(usize::MAX);
        let run = Chat::begin(&io, &db, &grant, &req, &mut Rng::new(1), (NOW, NOW + 1)).unwrap();
        let id = run.trace_id.clone();
        assert!(run.stream(&mut io));
        assert_eq!(io.frames.last().map(String::as_str), Some(sse::DONE));
        let (status, steps) = trace(&db, &id);
        assert_eq!(status, "ok");
        assert_eq!(steps, ["auth", "route", "model.request", "stream", "complete"]);
    }

    #[test]
    fn a_chat_client_that_leaves_is_recorded_as_disconnected() {
        let (db, grant, req) = chat(true);
        let mut io = Fake::new(1);
        let run = Chat::begin(&io, &db, &grant, &req, &mut Rng::new(1), (NOW, NOW + 1)).unwrap();
        let id = run.trace_id.clone();
        assert!(!run.stream(&mut io));
        let (status, steps) = trace(&db, &id);
        assert_eq!((status.as_str(), steps.last().map(String::as_str)), ("disconnected", Some("stream")));
    }

    #[test]
    fn a_whole_completion_waits_at_most_five_seconds_and_records_its_trace() {
        let (db, grant, req) = chat(false);
        let mut io = Fake::new(0);
        let run = Chat::begin(&io, &db, &grant, &req, &mut Rng::new(1), (NOW, NOW + 1)).unwrap();
        let id = run.trace_id.clone();
        let body = run.complete(&mut io);
        assert_eq!(body["object"], "chat.completion");
        assert!(io.now - NOW <= MAX_COMPLETION_WAIT_MS);
        assert_eq!(trace(&db, &id).0, "ok");
    }
}
