//! Property tests: chunking independence, encode -> parse round trips, and
//! that no input panics or grows memory past the limits.

use proptest::prelude::*;
// The generators, compiled into this test (the feature `strategies` exports
// them to other crates' tests).
#[path = "../src/strategies.rs"]
mod strategies;

use sse::{encode_comment, encode_event, EncodeError, Event, Item, Limits, Parser, SseError};
use strategies::{hostile_bytes, tricky_text};

/// Everything a parser produced for a stream, error included.
#[derive(Debug, PartialEq)]
struct Outcome {
    items: Vec<Item>,
    error: Option<SseError>,
    discarded_at_eof: bool,
    last_event_id: String,
    reconnection_time: Option<u64>,
}

fn parse_chunks<'a>(limits: Limits, chunks: impl IntoIterator<Item = &'a [u8]>) -> Outcome {
    let mut parser = Parser::with_limits(limits);
    let mut items = Vec::new();
    let mut error = None;
    for chunk in chunks {
        if let Err(err) = parser.feed(chunk, &mut items) {
            error = Some(err);
            break;
        }
    }
    let last_event_id = parser.last_event_id().to_owned();
    let reconnection_time = parser.reconnection_time();
    let discarded_at_eof = parser.finish();
    Outcome { items, error, discarded_at_eof, last_event_id, reconnection_time }
}

/// Splits `bytes` at the given points (any order, duplicates allowed, so
/// empty chunks happen too).
fn split_at_points(bytes: &[u8], points: &[usize]) -> Vec<Vec<u8>> {
    let mut cuts: Vec<usize> = points.iter().map(|p| p % (bytes.len() + 1)).collect();
    cuts.sort_unstable();
    let mut chunks = Vec::new();
    let mut start = 0;
    for cut in cuts {
        chunks.push(bytes[start..cut].to_vec());
        start = cut;
    }
    chunks.push(bytes[start..].to_vec());
    chunks
}

/// A single-line value (what `event` and `id` may carry).
fn field_value(max_len: usize) -> impl Strategy<Value = String> {
    tricky_text(max_len).prop_map(|s| s.replace(['\r', '\n', '\0'], ""))
}

#[derive(Debug, Clone)]
enum Frame {
    Event { event: Option<String>, id: Option<String>, data: String },
    Comment(String),
}

fn frame() -> impl Strategy<Value = Frame> {
    prop_oneof![
        4 => (
            prop::option::of(field_value(12)),
            prop::option::of(field_value(8)),
            tricky_text(40)
        )
            .prop_map(|(event, id, data)| Frame::Event { event, id, data }),
        1 => field_value(16).prop_map(Frame::Comment),
    ]
}

#[derive(Debug, Clone, Copy)]
enum LineEnd {
    Lf,
    Cr,
    CrLf,
}

fn encode_frames(frames: &[Frame]) -> String {
    let mut out = String::new();
    for frame in frames {
        match frame {
            Frame::Event { event, id, data } => {
                encode_event(&mut out, event.as_deref(), id.as_deref(), data).expect("single-line values");
            }
            Frame::Comment(text) => encode_comment(&mut out, text),
        }
    }
    out
}

/// A valid stream in one line-end style, maybe with a BOM and retry lines.
fn valid_stream() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(frame(), 0..12),
        prop_oneof![Just(LineEnd::Lf), Just(LineEnd::Cr), Just(LineEnd::CrLf)],
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(frames, line_end, bom, retry)| {
            let mut text = encode_frames(&frames);
            if retry {
                text = text.replace("\n\n", "\nretry: 250\n\n");
            }
            let text = match line_end {
                LineEnd::Lf => text,
                LineEnd::Cr => text.replace('\n', "\r"),
                LineEnd::CrLf => text.replace('\n', "\r\n"),
            };
            let mut bytes = if bom { vec![0xEF, 0xBB, 0xBF] } else { Vec::new() };
            bytes.extend_from_slice(text.as_bytes());
            bytes
        })
}

/// The parser's buffers never exceed a fixed multiple of the limits: the
/// line buffer < 2L (amortized growth), the data buffer < 2(E + 2L), and
/// event type and id < 2 * 3L each (one invalid byte decodes to 3 bytes).
fn memory_bound(limits: Limits) -> usize {
    20 * limits.max_line_bytes + 2 * limits.max_event_bytes + 64
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn rechunking_a_valid_stream_changes_nothing(
        stream in valid_stream(),
        points in prop::collection::vec(any::<usize>(), 0..16),
    ) {
        let whole = parse_chunks(Limits::default(), [stream.as_slice()]);
        prop_assert_eq!(whole.error, None);
        prop_assert!(!whole.discarded_at_eof);
        let chunks = split_at_points(&stream, &points);
        let chunked = parse_chunks(Limits::default(), chunks.iter().map(Vec::as_slice));
        prop_assert_eq!(&chunked, &whole);
        let bytewise = parse_chunks(Limits::default(), stream.chunks(1));
        prop_assert_eq!(&bytewise, &whole);
    }

    #[test]
    fn rechunking_any_bytes_changes_nothing(
        bytes in hostile_bytes(48),
        points in prop::collection::vec(any::<usize>(), 0..24),
        max_line_bytes in 1usize..80,
        max_event_bytes in 1usize..160,
    ) {
        // Errors included: the same error after the same items.
        let limits = Limits { max_line_bytes, max_event_bytes };
        let whole = parse_chunks(limits, [bytes.as_slice()]);
        let chunks = split_at_points(&bytes, &points);
        let chunked = parse_chunks(limits, chunks.iter().map(Vec::as_slice));
        prop_assert_eq!(&chunked, &whole);
        // Byte by byte no block is ever whole in one read: every line takes
        // the line path, and blocks read in place must agree with it.
        let bytewise = parse_chunks(limits, bytes.chunks(1));
        prop_assert_eq!(&bytewise, &whole);
    }

    #[test]
    fn encode_then_parse_round_trips(frames in prop::collection::vec(frame(), 0..10)) {
        let text = encode_frames(&frames);
        let parsed = parse_chunks(Limits::default(), [text.as_bytes()]);
        prop_assert_eq!(parsed.error, None);
        prop_assert!(!parsed.discarded_at_eof, "the encoder leaves no event open");

        let mut expected = Vec::new();
        let mut last_id = String::new();
        for frame in &frames {
            match frame {
                Frame::Event { event, id, data } => {
                    if let Some(id) = id {
                        last_id = id.clone();
                    }
                    expected.push(Item::Event(Event {
                        id: (!last_id.is_empty()).then(|| last_id.clone()),
                        event: event.clone().filter(|e| !e.is_empty()).unwrap_or_else(|| "message".into()),
                        data: data.replace("\r\n", "\n").replace('\r', "\n"),
                        retry: None,
                    }));
                }
                Frame::Comment(text) => expected.push(Item::Comment(text.clone())),
            }
        }
        prop_assert_eq!(parsed.items, expected);
    }

    #[test]
    fn encoder_refuses_multi_line_names_and_ids(
        prefix in field_value(6),
        bad in prop::sample::select(vec!["\n", "\r", "\r\n", "\0"]),
        suffix in field_value(6),
        data in tricky_text(20),
    ) {
        let value = format!("{prefix}{bad}{suffix}");
        let mut out = String::from("before");
        prop_assert_eq!(encode_event(&mut out, Some(&value), None, &data), Err(EncodeError::InvalidEventName));
        prop_assert_eq!(encode_event(&mut out, Some("ok"), Some(&value), &data), Err(EncodeError::InvalidId));
        prop_assert_eq!(out, "before");
    }

    #[test]
    fn encoded_data_cannot_inject_fields(data in tricky_text(60)) {
        // Whatever the data, exactly one event with the chosen name and id.
        let mut out = String::new();
        encode_event(&mut out, Some("fixed"), Some("1"), &data).expect("valid name and id");
        let parsed = parse_chunks(Limits::default(), [out.as_bytes()]);
        prop_assert_eq!(parsed.items.len(), 1);
        let Item::Event(ev) = &parsed.items[0] else { panic!("not an event") };
        prop_assert_eq!(ev.event.as_str(), "fixed");
        prop_assert_eq!(ev.id.as_deref(), Some("1"));
        prop_assert_eq!(ev.retry, None);
    }
}

proptest! {
    // The long one: many cases, small limits so the error paths are hit often.
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn no_input_panics_and_memory_stays_bounded(
        bytes in hostile_bytes(96),
        chunk_size in 1usize..64,
        max_line_bytes in 1usize..64,
        max_event_bytes in 1usize..128,
    ) {
        let limits = Limits { max_line_bytes, max_event_bytes };
        let mut parser = Parser::with_limits(limits);
        let mut first_error = None;
        for chunk in bytes.chunks(chunk_size) {
            let mut items = Vec::new();
            let result = parser.feed(chunk, &mut items);
            prop_assert!(parser.buffered_bytes() <= memory_bound(limits), "{} bytes buffered", parser.buffered_bytes());
            if let Some(err) = first_error {
                // Sticky: the same error, nothing more parsed.
                prop_assert_eq!(result, Err(err));
                prop_assert!(items.is_empty());
            } else if let Err(err) = result {
                first_error = Some(err);
            }
            for item in &items {
                if let Item::Event(ev) = item {
                    prop_assert!(ev.data.len() < max_event_bytes, "data within the event bound");
                }
            }
        }
        // A long enough stream without line ends must have failed.
        if bytes.len() > max_line_bytes && !bytes.iter().any(|b| matches!(b, b'\n' | b'\r')) && bytes.first() != Some(&0xEF) {
            prop_assert!(first_error.is_some());
        }
        parser.finish();
        prop_assert_eq!(parser.error(), None);
    }
}
