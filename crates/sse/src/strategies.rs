//! Proptest generators of event-stream input that tries to break a reader:
//! the characters that matter to SSE over-represented, arbitrary bytes mixed
//! with valid fragments, partial UTF-8 and every kind of line end.

use proptest::prelude::*;

/// Text with the characters that matter to SSE over-represented.
pub fn tricky_text(max_len: usize) -> impl Strategy<Value = String> {
    let ch = prop_oneof![
        4 => any::<char>(),
        2 => Just('\n'),
        2 => Just('\r'),
        1 => Just(':'),
        1 => Just(' '),
        1 => Just('\u{FEFF}'),
        1 => Just('é'),
        1 => Just('😀'),
        1 => Just('\0'),
    ];
    prop::collection::vec(ch, 0..max_len).prop_map(String::from_iter)
}

/// Arbitrary bytes mixed with valid fragments, partial UTF-8 and line ends.
pub fn hostile_bytes(max_pieces: usize) -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        3 => prop::collection::vec(any::<u8>(), 0..24),
        2 => prop::sample::select(vec![
            &b"data: "[..], b"data:", b"data", b"id: 1", b"id: ", b"id: 18446744073709551616", b"event: ",
            b"event: system.heartbeat", b"event: turn.started", b"retry: 100", b"retry: x", b":", b": keepalive",
            b"\n", b"\r", b"\r\n", b"\n\n", b"\xEF\xBB\xBF", b"\xEF\xBB", b"\xF0\x9F", b"\x98\x80", b"\xC3", b"\0",
            b"{\"session_id\":\"s\"}", b"{}", b"[]",
        ])
        .prop_map(<[u8]>::to_vec),
        1 => tricky_text(16).prop_map(String::into_bytes),
    ];
    prop::collection::vec(piece, 0..max_pieces).prop_map(|pieces| pieces.concat())
}
