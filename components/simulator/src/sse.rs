//! SSE frames for the simulator's streams, written with the project's shared
//! encoder (`crates/sse`), which splits data on every line terminator and
//! refuses line breaks in names and ids, so no payload can forge a field.

use serde::Serialize;

/// A frame whose data is `value` as compact (single-line) JSON.
pub fn json_frame<T: Serialize + ?Sized>(id: Option<u64>, event: &str, value: &T) -> String {
    frame(id, Some(event), value)
}

/// An unnamed `data:` frame (the chat-completions stream's chunks).
pub fn data_frame<T: Serialize + ?Sized>(value: &T) -> String {
    frame(None, None, value)
}

/// The chat-completions stream's last frame.
pub const DONE: &str = "data: [DONE]\n\n";

fn frame<T: Serialize + ?Sized>(id: Option<u64>, event: Option<&str>, value: &T) -> String {
    let data = serde_json::to_string(value).unwrap_or_else(|_| "{}".to_owned());
    let id = id.map(|id| id.to_string());
    let mut out = String::with_capacity(data.len() + 64);
    // Event names here are constants; the encoder refuses (writes nothing for)
    // a name with a line break rather than splitting it.
    let _ = ::sse::encode_event(&mut out, event, id.as_deref(), &data);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn frames_carry_id_event_and_one_json_data_line() {
        assert_eq!(
            json_frame(Some(42), "turn.started", &json!({"a": 1})),
            "event: turn.started\nid: 42\ndata: {\"a\":1}\n\n"
        );
        assert_eq!(json_frame(None, "text", &json!("x")), "event: text\ndata: \"x\"\n\n");
    }

    #[test]
    fn hostile_text_stays_inside_one_data_line() {
        let frame = json_frame(None, "text", &json!({"delta": "a\r\nevent: done\n\ndata: x"}));
        assert_eq!(frame.matches('\n').count(), 3, "{frame:?}");
        assert!(frame.starts_with("event: text\ndata: {"));
    }

    #[test]
    fn a_name_with_a_line_break_writes_nothing() {
        assert_eq!(json_frame(None, "x\ndata: evil", &json!({})), "");
    }
}
