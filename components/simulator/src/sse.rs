//! Server-sent-event framing.
//!
//! One frame = optional `id:` line, `event:` line, one `data:` line per line of data,
//! blank line. JSON from serde_json is always a single line (it escapes CR/LF), but the
//! framer still splits on every SSE line terminator (CRLF, LF, CR) so no payload can
//! ever break out of its frame or forge another field.

use serde::Serialize;

pub fn frame(id: Option<u64>, event: &str, data: &str) -> String {
    let mut out = String::with_capacity(data.len() + event.len() + 32);
    if let Some(id) = id {
        out.push_str("id: ");
        out.push_str(&id.to_string());
        out.push('\n');
    }
    out.push_str("event: ");
    // An event name cannot contain a line break; drop any rather than split the field.
    out.extend(event.chars().filter(|c| *c != '\n' && *c != '\r'));
    out.push('\n');
    let normalized = data.replace("\r\n", "\n").replace('\r', "\n");
    for line in normalized.split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    out
}

/// A frame whose data is `value` as compact (single-line) JSON.
pub fn json_frame<T: Serialize + ?Sized>(id: Option<u64>, event: &str, value: &T) -> String {
    let data = serde_json::to_string(value).unwrap_or_else(|_| "{}".to_owned());
    frame(id, event, &data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn simple_frame() {
        assert_eq!(
            frame(Some(42), "turn.started", "{\"a\":1}"),
            "id: 42\nevent: turn.started\ndata: {\"a\":1}\n\n"
        );
        assert_eq!(frame(None, "text", "x"), "event: text\ndata: x\n\n");
    }

    #[test]
    fn multiline_data_is_split_into_data_lines() {
        assert_eq!(
            frame(None, "e", "a\r\nb\rc\nd"),
            "event: e\ndata: a\ndata: b\ndata: c\ndata: d\n\n"
        );
    }

    #[test]
    fn event_name_cannot_inject_fields() {
        assert_eq!(
            frame(None, "x\ndata: evil", "{}"),
            "event: xdata: evil\ndata: {}\n\n"
        );
    }

    #[test]
    fn json_with_hostile_text_stays_one_data_line() {
        let text = "line1\nevent: done\r\ndata: {}\n\n</script><img src=x onerror=alert(1)>\"'\\";
        let f = json_frame(None, "text", &json!({ "delta": text }));
        let lines: Vec<&str> = f.split('\n').collect();
        assert_eq!(lines.len(), 4, "{f:?}");
        assert_eq!(lines[0], "event: text");
        assert!(lines[1].starts_with("data: "));
        assert_eq!(lines[2], "");
        assert_eq!(lines[3], "");
        let back: serde_json::Value = serde_json::from_str(&lines[1]["data: ".len()..]).unwrap();
        assert_eq!(back["delta"], text);
    }
}
