//! Property test: whatever bytes the upstream sends, in whatever chunks, the
//! filter's output is well-formed SSE of `admin_event` frames only, ended by
//! exactly one `stream_error`, and it passes only what the session may see.

use admin_events::{AdminEventFilter, Flow, ADMIN_EVENT_NAME, STREAM_ERROR_NAME};
use proptest::prelude::*;
use sse::strategies::hostile_bytes;
use sse::{encode_event, Item, Limits, Parser};

/// Mostly well-formed admin streams: valid and invalid ids, every kind of
/// type, data of the right and the wrong shape, with hostile bytes between.
fn admin_stream() -> impl Strategy<Value = Vec<u8>> {
    let id = prop::sample::select(vec![Some("1"), Some("42"), Some("007"), None, Some(""), Some("+1"), Some("x")]);
    let ty = prop::sample::select(vec![
        None,
        Some("system.heartbeat"),
        Some("system.restart"),
        Some("turn.started"),
        Some("key.rotated"),
        Some("system"),
    ]);
    let data = prop::sample::select(vec![
        r#"{"session_id":"s"}"#,
        r#"{"session_id":"t","timestamp":"T"}"#,
        r#"{"session_id":""}"#,
        r#"{"session_id":1}"#,
        "{}",
        "[]",
        "x",
    ]);
    let frame = prop_oneof![
        8 => (id, ty, data).prop_map(|(id, ty, data)| {
            let mut out = String::new();
            encode_event(&mut out, ty, id, data).expect("single-line values");
            out.into_bytes()
        }),
        1 => hostile_bytes(3),
    ];
    prop::collection::vec(frame, 0..12).prop_map(|frames| frames.concat())
}

proptest! {
    // Many cases, small limits so the error paths are hit often.
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn filter_output_is_always_well_formed(
        bytes in prop_oneof![hostile_bytes(64), admin_stream()],
        chunk_size in 1usize..48,
        session in prop::option::of(prop::sample::select(vec!["s", ""])),
    ) {
        let mut filter = AdminEventFilter::with_limits(
            session.map(str::to_owned),
            Limits { max_line_bytes: 256, max_event_bytes: 256 },
        );
        let mut out = String::new();
        let mut flow = Flow::Continue;
        for chunk in bytes.chunks(chunk_size) {
            flow = filter.feed(chunk, &mut out);
            if flow != Flow::Continue {
                break;
            }
        }
        if flow == Flow::Continue {
            flow = filter.finish(&mut out);
        }
        prop_assert!(matches!(flow, Flow::Stop(_)));

        // Downstream: only admin_event frames, then exactly one stream_error.
        let mut parser = Parser::new();
        let mut items = Vec::new();
        prop_assert_eq!(parser.feed(out.as_bytes(), &mut items), Ok(()));
        prop_assert!(!parser.finish(), "nothing left half-written");
        let names: Vec<&str> = items
            .iter()
            .map(|item| match item {
                Item::Event(ev) => ev.event.as_str(),
                Item::Comment(_) => "comment",
            })
            .collect();
        let (last, rest) = names.split_last().expect("at least the stream_error frame");
        prop_assert_eq!(*last, STREAM_ERROR_NAME);
        prop_assert!(rest.iter().all(|name| *name == ADMIN_EVENT_NAME), "{:?}", names);
        for item in &items[..rest.len()] {
            let Item::Event(ev) = item else { unreachable!() };
            let payload: serde_json::Value = serde_json::from_str(&ev.data).expect("payload is JSON");
            let ty = payload["type"].as_str().expect("type");
            prop_assert!(ty != "system.heartbeat");
            if !ty.starts_with("system.") {
                prop_assert!(session.is_some(), "no session forwards only system events");
                prop_assert_eq!(payload["data"]["session_id"].as_str(), session);
            }
            prop_assert_eq!(ev.id.clone(), Some(payload["id"].as_u64().expect("id").to_string()));
        }
    }
}
