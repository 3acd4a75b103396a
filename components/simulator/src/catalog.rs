//! The simulated agents: who they are, what tools they have, how they are dispatched.
//!
//! - `sindra` (Sindra): research agent, web tools; affect with `relations` (relation_edge/1).
//! - `brokkr` (Brokkr): forge/code agent; affect with `relations`.
//! - `eitri`  (Eitri):  archivist running on an older stack: its affect snapshots use the
//!   legacy flat `valence` (no `relations`), and its sessions are outside the admin key's
//!   scope, so `GET /v1/sessions/{id}/bifrost` answers 403 `scope_denied` for them.

use serde_json::{json, Value};

#[derive(Debug, PartialEq)]
pub struct ToolDef {
    pub name: &'static str,
    pub description: &'static str,
    /// JSON Schema of the arguments, as JSON text (parsed when served).
    pub input_schema: &'static str,
}

#[derive(Debug, PartialEq)]
pub struct AgentDef {
    pub id: &'static str,
    pub display_name: &'static str,
    pub endpoint: &'static str,
    pub model: &'static str,
    pub max_tokens: u32,
    pub context_window: u32,
    pub parallel_tools: bool,
    pub tools: &'static [ToolDef],
    /// Affect snapshots in the legacy flat-`valence` shape instead of `relations`.
    pub legacy_affect: bool,
    /// Bifrost dispatch state is outside the admin scope (403 `scope_denied`).
    pub bifrost_scope_denied: bool,
    /// PAD baseline the mood reverts towards.
    pub pad_baseline: [f64; 3],
}

pub static AGENTS: &[AgentDef] = &[
    AgentDef {
        id: "sindra",
        display_name: "Sindra",
        endpoint: "http://sindra.agents.ratatoskr.internal:8400/v1",
        model: "sim-large-2026-10",
        max_tokens: 4096,
        context_window: 200_000,
        parallel_tools: true,
        tools: &[
            ToolDef {
                name: "web_search",
                description: "Search the web and return the top results with title, URL and snippet.",
                input_schema: r#"{"type":"object","properties":{"query":{"type":"string","description":"What to search for"},"count":{"type":"integer","minimum":1,"maximum":10,"default":5}},"required":["query"]}"#,
            },
            ToolDef {
                name: "read_url",
                description: "Fetch a web page and return its readable text.",
                input_schema: r#"{"type":"object","properties":{"url":{"type":"string","format":"uri"},"max_chars":{"type":"integer","default":8000}},"required":["url"]}"#,
            },
            ToolDef {
                name: "calculator",
                description: "Evaluate an arithmetic expression exactly.",
                input_schema: r#"{"type":"object","properties":{"expression":{"type":"string"}},"required":["expression"]}"#,
            },
        ],
        legacy_affect: false,
        bifrost_scope_denied: false,
        pad_baseline: [0.25, 0.1, 0.15],
    },
    AgentDef {
        id: "brokkr",
        display_name: "Brokkr",
        endpoint: "http://brokkr.agents.ratatoskr.internal:8400/v1",
        model: "sim-coder-2026-09",
        max_tokens: 8192,
        context_window: 128_000,
        parallel_tools: false,
        tools: &[
            ToolDef {
                name: "run_python",
                description: "Run a Python snippet in a sandbox and return stdout, stderr and the exit code.",
                input_schema: r#"{"type":"object","properties":{"code":{"type":"string"},"timeout_s":{"type":"integer","minimum":1,"maximum":60,"default":10}},"required":["code"]}"#,
            },
            ToolDef {
                name: "read_file",
                description: "Read a file from the agent's workspace.",
                input_schema: r#"{"type":"object","properties":{"path":{"type":"string"},"max_bytes":{"type":"integer","default":65536}},"required":["path"]}"#,
            },
            ToolDef {
                name: "git_log",
                description: "List recent commits of a workspace repository.",
                input_schema: r#"{"type":"object","properties":{"repo":{"type":"string"},"limit":{"type":"integer","default":10}},"required":["repo"]}"#,
            },
        ],
        legacy_affect: false,
        bifrost_scope_denied: false,
        pad_baseline: [0.05, 0.3, 0.35],
    },
    AgentDef {
        id: "eitri",
        display_name: "Eitri",
        endpoint: "http://eitri.legacy.ratatoskr.internal:8300/v1",
        model: "sim-small-2025-04",
        max_tokens: 2048,
        context_window: 32_000,
        parallel_tools: false,
        tools: &[
            ToolDef {
                name: "recall_memory",
                description: "Search the agent's long-term memory for notes related to a query.",
                input_schema: r#"{"type":"object","properties":{"query":{"type":"string"},"k":{"type":"integer","minimum":1,"maximum":20,"default":3}},"required":["query"]}"#,
            },
            ToolDef {
                name: "calendar_lookup",
                description: "List calendar entries for a date (YYYY-MM-DD).",
                input_schema: r#"{"type":"object","properties":{"date":{"type":"string","pattern":"^\\d{4}-\\d{2}-\\d{2}$"}},"required":["date"]}"#,
            },
        ],
        legacy_affect: true,
        bifrost_scope_denied: true,
        pad_baseline: [-0.05, -0.15, 0.0],
    },
];

pub fn agent(id: &str) -> Option<&'static AgentDef> {
    AGENTS.iter().find(|a| a.id == id)
}

impl AgentDef {
    /// `GET /v1/sessions/{id}/tools` entries.
    pub fn tool_inventory(&self) -> Vec<Value> {
        self.tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "input_schema": serde_json::from_str::<Value>(t.input_schema)
                        .unwrap_or_else(|_| json!({"type": "object"})),
                })
            })
            .collect()
    }

    /// The `tools` list of the dispatch-state dict (names and descriptions only).
    pub fn tool_summaries(&self) -> Vec<Value> {
        self.tools.iter().map(|t| json!({"name": t.name, "description": t.description})).collect()
    }

    pub fn caps(&self) -> Value {
        json!({
            "max_tokens": self.max_tokens,
            "parallel_tools": self.parallel_tools,
            "streaming": true,
            "thinking": true,
            "context_window": self.context_window,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_are_unique_and_schemas_parse() {
        assert!((2..=3).contains(&AGENTS.len()));
        for (i, a) in AGENTS.iter().enumerate() {
            assert!(AGENTS[i + 1..].iter().all(|b| b.id != a.id));
            assert!(!a.tools.is_empty());
            for t in a.tools {
                let v: Value = serde_json::from_str(t.input_schema).expect(t.name);
                assert_eq!(v["type"], "object");
                assert!(v["required"].is_array());
            }
            assert_eq!(a.tool_inventory().len(), a.tools.len());
        }
        assert!(agent("sindra").is_some());
        assert!(agent("nobody").is_none());
        assert_eq!(AGENTS.iter().filter(|a| a.legacy_affect).count(), 1);
    }
}
