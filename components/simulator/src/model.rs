//! Wire and storage types (serde).

use serde::{Deserialize, Serialize};

/// 201 body of `POST /v1/sessions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionCreated {
    pub session_id: String,
    pub agent_id: String,
    pub created_at: String,
}

/// `last_dispatch` of the dispatch-state dict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastDispatch {
    pub turn_id: String,
    pub latency_ms: u64,
    /// "ok" | "error" | "cancelled" | "disconnected"
    pub status: String,
}

/// A session, as stored under `sim:session:<session_id>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    pub session_id: String,
    pub agent_id: String,
    pub end_user_id: String,
    pub created_at: String,
    pub created_at_ms: u64,
    /// Turns started so far.
    pub turn_count: u64,
    /// The most recent turn ids (newest last, capped), so cancel can tell "unknown turn".
    pub recent_turns: Vec<String>,
    pub last_dispatch: Option<LastDispatch>,
}

/// The running-turn flag, stored under `sim:running:<session_id>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunningTurn {
    pub turn_id: String,
    pub started_at_ms: u64,
    /// Refreshed about once a second while the turn streams.
    #[serde(default)]
    pub beat_at_ms: u64,
}

/// Dispatch-state dict of `GET /v1/sessions/{id}/bifrost`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DispatchState {
    pub session_id: String,
    pub agent_id: String,
    pub endpoint: String,
    pub model: String,
    pub caps: serde_json::Value,
    pub tools: Vec<serde_json::Value>,
    pub bound_at: String,
    pub inflight_turns: u64,
    pub last_dispatch: Option<LastDispatch>,
}
