//! Parser and filter throughput on a realistic admin stream: heartbeats
//! mixed with ~200-byte JSON events of a few sessions, fed in network-sized
//! chunks.
//!
//! `cargo bench -p admin-events --bench throughput -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use admin_events::{AdminEventFilter, Flow};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sse::{ItemRef, Parser};

const CHUNK: usize = 16 * 1024;

/// Returns the stream and its number of events.
fn admin_stream(target_bytes: usize) -> (Vec<u8>, u64) {
    let types = ["turn.started", "tool_call.started", "tool_call.finished", "turn.done", "session.created"];
    let mut out = String::new();
    let mut id = 0u64;
    while out.len() < target_bytes {
        id += 1;
        if id.is_multiple_of(5) {
            out.push_str(&format!("id: {id}\nevent: system.heartbeat\ndata: {{}}\n\n"));
        } else {
            let session = id % 4;
            let kind = types[(id % types.len() as u64) as usize];
            out.push_str(&format!(
                "id: {id}\nevent: {kind}\ndata: {{\"session_id\":\"s_{session:08x}\",\"turn_id\":\"t_{id:012}\",\
                 \"timestamp\":\"2025-06-01T12:00:{:02}.{:06}Z\",\"agent_id\":\"sindra\",\"latency_ms\":{},\
                 \"note\":\"ordinary upstream text with a bit of unicode \u{2014} ok\"}}\n\n",
                id % 60,
                id % 1_000_000,
                id * 7 % 5000
            ));
        }
        if id.is_multiple_of(50) {
            out.push_str(": keepalive\n\n");
        }
    }
    (out.into_bytes(), id)
}

fn parse(c: &mut Criterion) {
    let (stream, _) = admin_stream(4 << 20);
    let mut group = c.benchmark_group("parse");
    group.throughput(Throughput::Bytes(stream.len() as u64));
    group.bench_function("admin_stream_16k_chunks", |b| {
        b.iter(|| {
            let mut parser = Parser::new();
            let mut events = 0u64;
            for chunk in stream.chunks(CHUNK) {
                let fed = parser.feed_with(chunk, |item| {
                    if let ItemRef::Event(ev) = item {
                        events += ev.data.len() as u64 & 1;
                    }
                });
                if fed.is_err() {
                    panic!("bench stream is within limits");
                }
            }
            black_box(events)
        })
    });
    group.finish();
}

fn filter(c: &mut Criterion) {
    let (stream, events) = admin_stream(1 << 20);
    let mut group = c.benchmark_group("parse_filter_encode");
    group.throughput(Throughput::Elements(events));
    group.bench_function("admin_stream_16k_chunks", |b| {
        let mut out = String::new();
        b.iter(|| {
            let mut filter = AdminEventFilter::new(Some("s_00000001".to_owned()));
            let mut written = 0usize;
            for chunk in stream.chunks(CHUNK) {
                out.clear();
                if filter.feed(chunk, &mut out) != Flow::Continue {
                    panic!("bench stream is valid");
                }
                written += black_box(out.len());
            }
            written
        })
    });
    group.finish();
}

criterion_group!(benches, parse, filter);
criterion_main!(benches);
