//! The admin stream's guest work with no network or runtime around it: the
//! events of `bench-admin-events` in 64 KiB reads, timed inside the guest,
//! through each stage in turn (the SSE parser alone; the parser and the
//! session filter; the whole relay, with redaction and stamps).
//!
//!   cargo build --release --target wasm32-wasip2 -p console-api --example admin_relay
//!   target/wasmtime run -W timeout=1000s target/wasm32-wasip2/release/examples/admin_relay.wasm [ROUNDS [STAGE]]
//!
//! (`timeout` turns on epoch interruption, as Spin and the repo's host run guests.)

use std::time::Instant;

use admin_events::AdminEventFilter;
use console_api::redact::Redactor;
use console_api::relay::{AdminRelay, RelayFlow};
use sse::{ItemRef, Parser};

/// The frame of `tests/src/bin/bench-admin-events.rs` (the gateway's shape).
fn frame(id: u64) -> String {
    format!(
        "id: {id}\nevent: turn.started\ndata: {{\"session_id\":\"s_bench\",\"turn_id\":\"t_{id:08x}\",\"timestamp\":\"2026-12-02T10:00:00Z\",\"agent_id\":\"sindra\",\"model\":\"sim-large\"}}\n\n"
    )
}

const EVENTS: u64 = 200_000;

/// One pass of the stream through a stage; with `count`, returns the events
/// it saw (counted outside the timed passes).
fn pass(stage: &str, reads: &[&[u8]], out: &mut String, count: bool) -> u64 {
    let mut seen = 0;
    let mut frames = |out: &mut String| {
        if count {
            seen += memchr::memmem::find_iter(out.as_bytes(), b"\n\n").count() as u64;
        }
        out.clear();
    };
    match stage {
        "parser" => {
            let mut parser = Parser::new();
            for read in reads {
                let mut events = 0;
                parser.feed_with(read, |item| events += u64::from(matches!(item, ItemRef::Event(_)))).unwrap();
                out.push_str(&"\n\n".repeat(events as usize * usize::from(count)));
                frames(out);
            }
        }
        "filter" => {
            let mut filter = AdminEventFilter::new(Some("s_bench".into()));
            for read in reads {
                let _ = filter.feed(read, out);
                frames(out);
            }
        }
        _ => {
            let mut relay = AdminRelay::new(
                Some("s_bench".into()),
                Redactor::new(["bench-consumer-key-0123", "sekrit-admin-key-0123456789"]),
            );
            for read in reads {
                assert_eq!(relay.feed(read, 1, out), RelayFlow::Continue);
                frames(out);
            }
        }
    }
    seen
}

fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(7);
    let stream: String = (1..=EVENTS).map(frame).collect();
    // Reads cut anywhere, as the host hands them over.
    let reads: Vec<&[u8]> = stream.as_bytes().chunks(64 * 1024).collect();
    let mut out = String::with_capacity(256 * 1024);
    let only = std::env::args().nth(2);
    for stage in ["parser", "filter", "relay"].into_iter().filter(|s| only.as_deref().is_none_or(|o| o == *s)) {
        // The relay also writes the stamp comments' blocks: one a read.
        assert!(pass(stage, &reads, &mut out, true) >= EVENTS, "{stage}: every event");
        let mut ns = Vec::new();
        for _ in 0..rounds {
            let start = Instant::now();
            pass(stage, &reads, &mut out, false);
            let elapsed = start.elapsed();
            ns.push(elapsed.as_nanos() as f64 / EVENTS as f64);
        }
        ns.sort_by(f64::total_cmp);
        println!("{stage}: {:.0} ns an event (median of {rounds}; {:.0}-{:.0})", ns[rounds / 2], ns[0], ns[rounds - 1]);
    }
}
