//! Event streams: a 200 `text/event-stream` head that leaves at once, and a
//! pump that moves an upstream body to the client through a filter.

use std::time::Duration;

use spin_sdk::http::ResponseOutparam;
use wasi::clocks::monotonic_clock;
use wasi::io::streams::InputStream;

use crate::body::READ_CHUNK;
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

/// Moves `upstream` to `downstream` through `on_chunk`, which appends what to
/// send to its `String`; `on_end` runs once if the upstream ends or breaks.
/// Every upstream read's output goes out in one write. Returns when either
/// side is done, the filter stops, or the upstream was idle too long.
pub fn pump(
    upstream: &InputStream,
    downstream: &Body,
    rules: Pump,
    mut on_chunk: impl FnMut(&[u8], &mut String) -> Step,
    on_end: impl FnOnce(&mut String),
) {
    let mut out = String::new();
    let mut on_end = Some(on_end);
    let nanos = |d: Duration| d.as_nanos() as u64;
    // The silence that counts for the keepalive is downstream: upstream bytes
    // the filter drops (heartbeats, other sessions) must not hold it back.
    let mut keepalive_at = rules.keepalive.map(|(every, _)| monotonic_clock::now().saturating_add(nanos(every)));
    loop {
        let readable = upstream.subscribe();
        // The poll says which deadline passed: no clock read on the hot path.
        let keepalive_timer = keepalive_at.map(monotonic_clock::subscribe_instant);
        let idle_timer = rules.idle_limit.map(|idle| monotonic_clock::subscribe_duration(nanos(idle)));
        let mut pollables = vec![&readable];
        pollables.extend(keepalive_timer.as_ref());
        pollables.extend(idle_timer.as_ref());
        let ready = wasi::io::poll::poll(&pollables);
        let keepalive_index = keepalive_timer.as_ref().map(|_| 1);
        let idle_index = idle_timer.as_ref().map(|_| 1 + u32::from(keepalive_timer.is_some()));
        let fired = |index: Option<u32>| index.is_some_and(|i| ready.contains(&i));
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
        } else if fired(idle_index) {
            stop = true;
        }
        if let (false, true, true, Some((_, comment))) = (stop, out.is_empty(), fired(keepalive_index), rules.keepalive)
        {
            // Comments are not events: EventSource and the console's reader ignore them.
            out.push_str(comment);
        }
        if !out.is_empty() {
            if !downstream.push(out.as_bytes()) {
                return; // the client is gone
            }
            out.clear();
            if let Some((every, _)) = rules.keepalive {
                keepalive_at = Some(monotonic_clock::now().saturating_add(nanos(every)));
            }
        }
        if stop {
            return;
        }
    }
}
