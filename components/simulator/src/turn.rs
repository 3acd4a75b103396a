//! The turn script: what a simulated agent streams for one user message.
//!
//! `script` is pure: given the agent, the user's text, the turn id and a seeded RNG it
//! returns the whole event sequence with the delay to wait before each event. The
//! handler plays it out (sleeping, checking the cancel flag between events) and builds
//! `cancelled` itself.
//!
//! Sequence: `turn.started`, 2–4 `thinking` deltas, `tool_call`, `tool_result`, 6+ `text`
//! deltas that quote the user's text, then exactly one terminal: `done` (usage,
//! finish_reason "stop") or, for the text `/error`, `error` {code, message} after the
//! tool round-trip. The text `/slow` stretches every delay (~0.35–1 s per delta,
//! 2.5 s before the tool result, about 12–25 s in all) so there is time to cancel. Both commands match after trimming.
//!
//! The user's text is untrusted: it is carried only inside JSON string values
//! (serde-escaped), never spliced into JSON or SSE syntax.

use crate::catalog::AgentDef;
use crate::rng::Rng;
use serde_json::{json, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Normal,
    Slow,
    Error,
}

pub fn mode_for(text: &str) -> Mode {
    match text.trim() {
        "/error" => Mode::Error,
        "/slow" => Mode::Slow,
        _ => Mode::Normal,
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ScriptedEvent {
    /// Milliseconds to wait before sending this event.
    pub delay_ms: u64,
    pub event: &'static str,
    pub data: Value,
}

impl ScriptedEvent {
    pub fn is_terminal(&self) -> bool {
        matches!(self.event, "done" | "error" | "cancelled")
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    pub events: Vec<ScriptedEvent>,
    /// "ok" or "error": how the turn ends if it runs to completion.
    pub status: &'static str,
}

pub fn cancelled_event(turn_id: &str) -> ScriptedEvent {
    ScriptedEvent { delay_ms: 0, event: "cancelled", data: json!({ "turn_id": turn_id }) }
}

/// Rough token estimate (~4 characters a token), never zero.
pub fn est_tokens(s: &str) -> u64 {
    (s.chars().count() as u64).div_ceil(4).max(1)
}

/// The user's text shortened for quoting (whole characters, single spaces).
pub fn quote(text: &str, max_chars: usize) -> String {
    let collapsed: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.chars().count() <= max_chars {
        collapsed
    } else {
        let mut q: String = collapsed.chars().take(max_chars).collect();
        q.push('…');
        q
    }
}

/// Split into deltas of 1–4 words, each keeping its following whitespace, so that
/// concatenating the deltas gives back `s` exactly.
pub fn chunk_words(s: &str, rng: &mut Rng) -> Vec<String> {
    let mut words: Vec<&str> = Vec::new();
    let mut start = 0;
    let mut in_space = false;
    for (i, c) in s.char_indices() {
        if c.is_whitespace() {
            in_space = true;
        } else if in_space {
            words.push(&s[start..i]);
            start = i;
            in_space = false;
        }
    }
    if start < s.len() {
        words.push(&s[start..]);
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let n = rng.range(1, 5) as usize;
        let end = (i + n).min(words.len());
        out.push(words[i..end].concat());
        i = end;
    }
    out
}

struct Pace {
    think: (u64, u64),
    tool_call: (u64, u64),
    tool_result: (u64, u64),
    text: (u64, u64),
    terminal: (u64, u64),
}

const NORMAL: Pace =
    Pace { think: (60, 200), tool_call: (120, 300), tool_result: (300, 700), text: (40, 150), terminal: (40, 120) };

const SLOW: Pace = Pace {
    think: (600, 1100),
    tool_call: (700, 1000),
    tool_result: (1500, 2500),
    text: (350, 650),
    terminal: (300, 600),
};

pub fn script(agent: &AgentDef, text: &str, turn_id: &str, rng: &mut Rng) -> Script {
    let mode = mode_for(text);
    let pace = if mode == Mode::Slow { &SLOW } else { &NORMAL };
    let q = quote(text, 160);
    let mut events = Vec::new();

    events.push(ScriptedEvent { delay_ms: 0, event: "turn.started", data: json!({ "turn_id": turn_id }) });

    // Reasoning.
    let thoughts = thinking_lines(agent, &q, rng);
    let mut thinking_text = String::new();
    for t in thoughts {
        thinking_text.push_str(&t);
        events.push(ScriptedEvent { delay_ms: delay(rng, pace.think), event: "thinking", data: json!({ "delta": t }) });
    }

    // One tool round-trip.
    let tool = rng.pick(agent.tools);
    let call_id = format!("call_{}", rng.hex(8));
    let (arguments, output) = tool_exchange(tool.name, text, &q, rng);
    events.push(ScriptedEvent {
        delay_ms: delay(rng, pace.tool_call),
        event: "tool_call",
        data: json!({ "call_id": call_id, "name": tool.name, "arguments": arguments }),
    });
    events.push(ScriptedEvent {
        delay_ms: delay(rng, pace.tool_result),
        event: "tool_result",
        data: json!({ "call_id": call_id, "name": tool.name, "output": output, "is_error": false }),
    });

    if mode == Mode::Error {
        events.push(ScriptedEvent {
            delay_ms: delay(rng, pace.terminal),
            event: "error",
            data: json!({
                "code": "upstream_model_error",
                "message": format!(
                    "{} could not complete the turn: the model endpoint returned 502 Bad Gateway (simulated by /error)",
                    agent.display_name
                ),
            }),
        });
        return Script { events, status: "error" };
    }

    // The answer.
    let reply = reply_text(agent, &q, tool.name, mode, rng);
    for d in chunk_words(&reply, rng) {
        events.push(ScriptedEvent { delay_ms: delay(rng, pace.text), event: "text", data: json!({ "delta": d }) });
    }

    let input_tokens = 220 + est_tokens(text) + est_tokens(&output) + 40 * agent.tools.len() as u64;
    let output_tokens = est_tokens(&reply) + est_tokens(&thinking_text);
    events.push(ScriptedEvent {
        delay_ms: delay(rng, pace.terminal),
        event: "done",
        data: json!({
            "turn_id": turn_id,
            "usage": { "input_tokens": input_tokens, "output_tokens": output_tokens },
            "finish_reason": "stop",
        }),
    });
    Script { events, status: "ok" }
}

fn delay(rng: &mut Rng, (lo, hi): (u64, u64)) -> u64 {
    rng.range(lo, hi)
}

fn thinking_lines(agent: &AgentDef, q: &str, rng: &mut Rng) -> Vec<String> {
    let openers = [
        format!("The operator writes: \u{201c}{q}\u{201d}. "),
        "Let me work out what is actually being asked here. ".to_owned(),
        format!("Reading the request carefully: \u{201c}{q}\u{201d}. "),
    ];
    let middles = [
        "I should check a source before answering rather than guess. ",
        "A tool call will ground this; the answer should stay short. ",
        "There are two readings of this; the practical one matters more. ",
        "I remember a similar question earlier in this session. ",
    ];
    let closers = [
        format!("{} will use a tool, then answer plainly.", agent.display_name),
        "Plan: one lookup, then a concise reply.".to_owned(),
        "Enough reasoning; time to act.".to_owned(),
    ];
    let mut v = vec![rng.pick(&openers).clone()];
    let n = rng.range(0, 3) as usize;
    let start = rng.range(0, middles.len() as u64) as usize;
    for i in 0..n {
        v.push(middles[(start + i) % middles.len()].to_owned());
    }
    v.push(rng.pick(&closers).clone());
    v
}

fn tool_exchange(tool: &str, text: &str, q: &str, rng: &mut Rng) -> (Value, String) {
    let short = quote(text, 80);
    match tool {
        "web_search" => {
            let n = rng.range(3, 6);
            (
                json!({ "query": short, "count": 5 }),
                format!(
                    "{n} results for \u{201c}{short}\u{201d}:\n1. Overview and background (encyclopedia.example)\n2. A practical guide (blog.example)\n3. Discussion thread (forum.example)"
                ),
            )
        }
        "read_url" => (
            json!({ "url": "https://docs.example/reference", "max_chars": 8000 }),
            format!("Fetched 6,214 characters. The page's relevant section concerns: {short}"),
        ),
        "calculator" => {
            let a = rng.range(12, 999);
            let b = rng.range(2, 99);
            (json!({ "expression": format!("{a} * {b}") }), format!("{}", a * b))
        }
        "run_python" => (
            json!({ "code": format!("print(len({}))", serde_json::to_string(&short).unwrap_or_default()), "timeout_s": 10 }),
            format!("stdout: {}\nstderr: \nexit_code: 0", short.chars().count()),
        ),
        "read_file" => (
            json!({ "path": "notes/TODO.md", "max_bytes": 65536 }),
            "# TODO\n- tidy the forge log\n- answer the operator's questions".to_owned(),
        ),
        "git_log" => (
            json!({ "repo": "mjolnir", "limit": 3 }),
            format!(
                "{} fix: temper the handle\n{} feat: shorter haft\n{} chore: sweep the forge",
                rng.hex(4),
                rng.hex(4),
                rng.hex(4)
            ),
        ),
        "recall_memory" => (
            json!({ "query": short, "k": 3 }),
            format!("2 notes match: (1) the operator asked something similar last week; (2) {q}"),
        ),
        "calendar_lookup" => {
            (json!({ "date": "2026-12-03" }), "09:00 stand-up\n13:30 review of the gateway keys".to_owned())
        }
        _ => (json!({ "input": short }), "ok".to_owned()),
    }
}

fn reply_text(agent: &AgentDef, q: &str, tool: &str, mode: Mode, rng: &mut Rng) -> String {
    let intro = [
        format!("You asked: \u{201c}{q}\u{201d}. "),
        format!("On \u{201c}{q}\u{201d}: "),
        format!("Here is what I found about \u{201c}{q}\u{201d}. "),
    ];
    let body = [
        format!("I checked with {tool} first, and the result supports a simple answer. "),
        format!("The {tool} call came back clean, so I can be fairly confident. "),
        format!("{tool} gave me enough to go on without guessing. "),
    ];
    let detail = [
        "The short version is that it depends on what you want to optimise for, but the default choice is usually right. ",
        "In practice, start small, measure, and only then add the complicated parts. ",
        "Most of the difficulty is in the edge cases, not in the main path. ",
        "Nothing here looks unusual; the usual approach applies. ",
    ];
    let outro = [
        format!("Ask {} again if you want the details.", agent.display_name),
        "Shall I dig deeper into any part of it?".to_owned(),
        "That should be enough to move forward.".to_owned(),
    ];
    let mut s = rng.pick(&intro).clone();
    s.push_str(rng.pick(&body).as_str());
    let d: &str = rng.pick::<&str>(&detail);
    s.push_str(d);
    if mode == Mode::Slow {
        // A longer answer, so there is more to cancel.
        s.push_str(detail[(detail.iter().position(|x| s.contains(x)).unwrap_or(0) + 1) % detail.len()]);
    }
    s.push_str(rng.pick(&outro).as_str());
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{agent, AGENTS};

    fn run(agent_id: &str, text: &str, seed: u64) -> Script {
        script(agent(agent_id).unwrap(), text, "t_0123456789abcdef", &mut Rng::new(seed))
    }

    fn names(s: &Script) -> Vec<&'static str> {
        s.events.iter().map(|e| e.event).collect()
    }

    #[test]
    fn normal_turn_shape() {
        for a in AGENTS {
            for seed in 0..50 {
                let s = run(a.id, "How do I rotate the gateway key?", seed);
                let n = names(&s);
                assert_eq!(n[0], "turn.started");
                assert_eq!(s.events[0].data, json!({"turn_id": "t_0123456789abcdef"}));
                assert_eq!(*n.last().unwrap(), "done");
                assert_eq!(s.status, "ok");
                assert_eq!(s.events.iter().filter(|e| e.is_terminal()).count(), 1);
                let thinking = n.iter().filter(|x| **x == "thinking").count();
                assert!((2..=4).contains(&thinking), "{thinking}");
                assert!(n.iter().filter(|x| **x == "text").count() >= 6);
                let call = n.iter().position(|x| *x == "tool_call").unwrap();
                assert_eq!(n[call + 1], "tool_result");
                // thinking before the tool, text after it
                assert!(n[..call].iter().all(|x| *x != "text"));
                assert!(n[call..].iter().all(|x| *x != "thinking"));
                let c = &s.events[call].data;
                let r = &s.events[call + 1].data;
                assert_eq!(c["call_id"], r["call_id"]);
                assert_eq!(c["name"], r["name"]);
                assert!(c["call_id"].as_str().unwrap().starts_with("call_"));
                assert!(c["arguments"].is_object());
                assert!(a.tools.iter().any(|t| t.name == c["name"]));
                assert_eq!(r["is_error"], false);
                assert!(r["output"].is_string());
                let done = &s.events.last().unwrap().data;
                assert_eq!(done["turn_id"], "t_0123456789abcdef");
                assert_eq!(done["finish_reason"], "stop");
                assert!(done["usage"]["input_tokens"].as_u64().unwrap() > 0);
                assert!(done["usage"]["output_tokens"].as_u64().unwrap() > 0);
                let total: u64 = s.events.iter().map(|e| e.delay_ms).sum();
                assert!((1000..6000).contains(&total), "total {total}");
                assert!(s.events.iter().skip(1).all(|e| (40..=700).contains(&e.delay_ms)));
            }
        }
    }

    #[test]
    fn reply_quotes_the_user_text() {
        let text = "what is <b>\"bold\"</b>\nand\tmore";
        let s = run("sindra", text, 3);
        let reply: String =
            s.events.iter().filter(|e| e.event == "text").map(|e| e.data["delta"].as_str().unwrap()).collect();
        assert!(reply.contains("what is <b>\"bold\"</b> and more"), "{reply}");
    }

    #[test]
    fn deterministic_per_seed() {
        assert_eq!(run("brokkr", "hi", 9), run("brokkr", "hi", 9));
        assert_ne!(run("brokkr", "hi", 9), run("brokkr", "hi", 10));
    }

    #[test]
    fn error_command() {
        for seed in 0..20 {
            let s = run("eitri", "  /error ", seed);
            let n = names(&s);
            assert_eq!(n[0], "turn.started");
            assert_eq!(*n.last().unwrap(), "error");
            assert!(!n.contains(&"done") && !n.contains(&"text"));
            assert_eq!(s.status, "error");
            let e = &s.events.last().unwrap().data;
            assert!(e["code"].is_string() && e["message"].is_string());
            assert_eq!(e.as_object().unwrap().len(), 2);
        }
        assert_eq!(mode_for("/error please"), Mode::Normal);
    }

    #[test]
    fn slow_command_is_slow() {
        for seed in 0..50 {
            let s = run("sindra", "/slow", seed);
            let total: u64 = s.events.iter().map(|e| e.delay_ms).sum();
            // long enough to cancel, well inside the 60 s stale-flag window
            assert!((10_000..30_000).contains(&total), "{total}");
            assert!(s.events.iter().skip(1).all(|e| e.delay_ms >= 300));
            assert_eq!(*names(&s).last().unwrap(), "done");
        }
    }

    #[test]
    fn chunks_reassemble_exactly() {
        let mut rng = Rng::new(5);
        for s in ["", "one", "  lead and trail  ", "a b\nc\td  e", "ünïcödé wörds ✓ ok"] {
            let c = chunk_words(s, &mut rng);
            assert_eq!(c.concat(), s);
            assert!(c.iter().all(|x| !x.is_empty()));
        }
    }

    #[test]
    fn quote_truncates_on_char_boundary() {
        let q = quote(&"é".repeat(300), 160);
        assert_eq!(q.chars().count(), 161);
        assert!(q.ends_with('…'));
        assert_eq!(quote(" a \n b ", 10), "a b");
    }

    #[test]
    fn cancelled_shape() {
        let c = cancelled_event("t_1");
        assert!(c.is_terminal());
        assert_eq!(c.data, json!({"turn_id": "t_1"}));
    }
}
