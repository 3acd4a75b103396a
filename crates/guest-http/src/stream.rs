//! Event streams: a 200 `text/event-stream` head that leaves at once, and a
//! pump that moves an upstream body to the client through a filter.

use std::time::Duration;

use spin_sdk::http::ResponseOutparam;
use wasi::clocks::monotonic_clock;
use wasi::io::poll::Pollable;
use wasi::io::streams::InputStream;

use crate::body::READ_CHUNK;
use crate::deadline::Deadline;
use crate::{headers, respond, Body};

/// Starts a 200 event stream with the standard headers plus `extra`.
pub fn start_sse(out: ResponseOutparam, extra: &[(&str, &str)]) -> Option<Body> {
    let mut list: Vec<(&str, &str)> = headers::SSE.to_vec();
    list.extend_from_slice(extra);
    respond(out, 200, &list, &[])
}

/// What the filter wants after a chunk.
pub enum Step {
    Continue,
    Stop,
}

/// How a pump treats silence.
#[derive(Clone, Copy)]
pub struct Pump {
    /// After this long with nothing sent downstream, send `keepalive`.
    pub keepalive: Option<(Duration, &'static str)>,
    /// After this long with nothing from upstream, stop (a stalled upstream).
    pub idle_limit: Option<Duration>,
}

/// Work a pump carries beside its stream in the same loop (a single-threaded
/// guest has no other): its own pollables are polled with the stream's, and
/// it is woken after every turn of the loop, never blocking it.
pub trait Beside {
    /// What to wait on besides the stream (asked once per turn of the loop).
    fn pollables(&self) -> Vec<&Pollable>;
    /// After each turn of the loop; `ready`: which of [`Beside::pollables`] were ready.
    fn woke(&mut self, ready: &[u32]);
}

/// Nothing beside the stream.
impl Beside for () {
    fn pollables(&self) -> Vec<&Pollable> {
        Vec::new()
    }
    fn woke(&mut self, _: &[u32]) {}
}

/// Moves `upstream` to `downstream` through `on_chunk`, which appends what to
/// send to its `String`; `on_end` runs once if the upstream ends or breaks.
/// Every upstream read's output goes out in one write. Returns when either
/// side is done, the filter stops, or the upstream was idle too long.
pub fn pump(
    upstream: &InputStream,
    downstream: &Body,
    rules: Pump,
    on_chunk: impl FnMut(&[u8], &mut String) -> Step,
    on_end: impl FnOnce(&mut String),
) {
    pump_beside(upstream, downstream, rules, &mut (), on_chunk, on_end)
}

/// [`pump`], with `beside` carried in the same loop.
pub fn pump_beside(
    upstream: &InputStream,
    downstream: &Body,
    rules: Pump,
    beside: &mut impl Beside,
    mut on_chunk: impl FnMut(&[u8], &mut String) -> Step,
    on_end: impl FnOnce(&mut String),
) {
    let mut out = String::new();
    let mut on_end = Some(on_end);
    // One subscription for the stream's life, and timers armed again only
    // when they fire: an event costs a poll, a read, a write and a clock read,
    // not three fresh pollables (measured in BENCHMARKS.md: added latency at 1,000 events/s).
    let readable = upstream.subscribe();
    let start = monotonic_clock::now();
    // The silence that counts for the keepalive is downstream: upstream bytes
    // the filter drops (heartbeats, other sessions) must not hold it back.
    let mut keepalive = rules.keepalive.map(|(every, comment)| (Watched::new(start, every), comment));
    let mut idle = rules.idle_limit.map(|limit| Watched::new(start, limit));
    loop {
        let mut pollables = vec![&readable];
        pollables.extend(keepalive.as_ref().map(|(d, _)| &d.timer));
        pollables.extend(idle.as_ref().map(|d| &d.timer));
        let own = pollables.len() as u32;
        pollables.extend(beside.pollables());
        let ready = wasi::io::poll::poll(&pollables);
        drop(pollables);
        let keepalive_index = keepalive.as_ref().map(|_| 1);
        let idle_index = idle.as_ref().map(|_| 1 + u32::from(keepalive.is_some()));
        let fired = |index: Option<u32>| index.is_some_and(|i| ready.contains(&i));
        let mut stop = false;
        let mut read = false;
        if ready.contains(&0) {
            match upstream.read(READ_CHUNK) {
                Ok(chunk) if chunk.is_empty() => {}
                Ok(chunk) => {
                    read = true;
                    stop = matches!(on_chunk(&chunk, &mut out), Step::Stop);
                }
                Err(_) => {
                    if let Some(end) = on_end.take() {
                        end(&mut out);
                    }
                    stop = true;
                }
            }
        }
        let theirs: Vec<u32> = ready.iter().filter_map(|&i| i.checked_sub(own)).collect();
        beside.woke(&theirs);
        let now = (read || !out.is_empty()).then(monotonic_clock::now);
        if let (Some(idle), Some(now)) = (idle.as_mut(), now.filter(|_| read)) {
            idle.touch(now);
        }
        if fired(idle_index) && idle.as_mut().is_some_and(|d| d.passed()) {
            stop = true;
        }
        if fired(keepalive_index) {
            if let Some((deadline, comment)) = keepalive.as_mut() {
                // Comments are not events: EventSource and the console's reader ignore them.
                if deadline.passed() && !stop && out.is_empty() {
                    out.push_str(comment);
                }
            }
        }
        if !out.is_empty() {
            if !downstream.push(out.as_bytes()) {
                return; // the client is gone
            }
            out.clear();
            if let Some((deadline, _)) = keepalive.as_mut() {
                deadline.touch(now.unwrap_or_else(monotonic_clock::now));
            }
        }
        if stop {
            return;
        }
    }
}

/// A [`Deadline`] and the host timer that watches it.
struct Watched {
    deadline: Deadline,
    timer: Pollable,
}

impl Watched {
    fn new(now: u64, after: Duration) -> Self {
        let deadline = Deadline::new(now, after);
        Watched { deadline, timer: monotonic_clock::subscribe_instant(deadline.due()) }
    }

    fn touch(&mut self, now: u64) {
        self.deadline.touch(now);
    }

    /// After its timer fired: whether the deadline has passed.
    fn passed(&mut self) -> bool {
        let (passed, next) = self.deadline.fired(monotonic_clock::now());
        self.timer = monotonic_clock::subscribe_instant(next);
        passed
    }
}
