//! The Worldtree affect model (upstream.md section 2).
//!
//! Per agent, a short log of snapshots is kept. After each completed turn (`done`) the
//! handler calls [`evolve`] to derive the next snapshot from the newest recorded one:
//! PAD mood moves with the tone of the user's text plus noise and reverts towards the
//! agent's baseline; the relation edge towards `end_user:<end_user_id>` gains evidence
//! and its trust/warmth values drift towards what the tone suggests; peer edges drift
//! slowly. The new snapshot's `emitted_at` lies 1–8 s in the future (the real emitter
//! runs asynchronously after `done`), and a read returns the newest snapshot whose
//! `emitted_at` is not in the future — so a read straight after `done` usually still
//! sees the previous snapshot (or 404), and a poll over the next seconds catches it.
//!
//! Agents with `legacy_affect` (eitri) are served in the older flat shape: `valence`
//! instead of `relations`.
//!
//! Ranges: pad.* in [-1, 1]; trust_*/warmth value and confidence in [0, 1];
//! agency and obligation_balance in [-1, 1]; valence in [-1, 1].

use crate::catalog::AgentDef;
use crate::rng::Rng;
use crate::time::rfc3339_millis;
use crate::turn::quote;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Snapshots kept per agent (newest last).
pub const LOG_CAP: usize = 8;
/// At most this many relation edges per snapshot (the current user's edge comes first).
pub const MAX_EDGES: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Pad {
    pub pleasure: f64,
    pub arousal: f64,
    pub dominance: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Trust {
    pub value: f64,
    pub confidence: f64,
    pub evidence_count: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelationEdge {
    pub target_entity: String,
    pub trust_ability: Trust,
    pub trust_benevolence: Trust,
    pub trust_integrity: Trust,
    pub warmth: Trust,
    pub agency: f64,
    pub relation_context: String,
    pub obligation_balance: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub emitted_at_ms: u64,
    pub pad: Pad,
    pub relations: Vec<RelationEdge>,
    pub valence: f64,
}

/// What is stored per agent in the key-value store.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AffectLog {
    pub snapshots: Vec<Snapshot>,
}

impl AffectLog {
    /// The newest snapshot already emitted at `now_ms`.
    pub fn visible(&self, now_ms: u64) -> Option<&Snapshot> {
        self.snapshots.iter().filter(|s| s.emitted_at_ms <= now_ms).max_by_key(|s| s.emitted_at_ms)
    }

    /// The newest recorded snapshot (possibly not yet emitted): what the next one evolves from.
    pub fn latest(&self) -> Option<&Snapshot> {
        self.snapshots.iter().max_by_key(|s| s.emitted_at_ms)
    }

    pub fn push(&mut self, snap: Snapshot) {
        self.snapshots.push(snap);
        self.snapshots.sort_by_key(|s| s.emitted_at_ms);
        let excess = self.snapshots.len().saturating_sub(LOG_CAP);
        self.snapshots.drain(..excess);
    }
}

/// Tone of a text in [-1, 1] from a small word list.
pub fn tone(text: &str) -> f64 {
    const POS: &[&str] = &[
        "thanks",
        "thank",
        "great",
        "good",
        "love",
        "nice",
        "awesome",
        "please",
        "perfect",
        "excellent",
        "cool",
        "helpful",
        "brilliant",
        "wonderful",
        "appreciate",
        "yes",
    ];
    const NEG: &[&str] = &[
        "bad", "wrong", "hate", "angry", "stupid", "useless", "broken", "fail", "failed", "worse", "terrible", "awful",
        "no", "annoying", "slow", "error",
    ];
    let mut score = 0i32;
    let mut words = 0i32;
    for w in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        words += 1;
        let w = w.to_lowercase();
        if POS.contains(&w.as_str()) {
            score += 1;
        } else if NEG.contains(&w.as_str()) {
            score -= 1;
        }
    }
    if words == 0 {
        return 0.0;
    }
    (score as f64 / 2.0).clamp(-1.0, 1.0)
}

/// Intensity of a text in [0, 1]: exclamations, capitals, questions.
fn intensity(text: &str) -> f64 {
    let bangs = text.matches('!').count() as f64;
    let questions = text.matches('?').count() as f64;
    let letters = text.chars().filter(|c| c.is_alphabetic()).count().max(1) as f64;
    let caps = text.chars().filter(|c| c.is_uppercase()).count() as f64 / letters;
    (0.25 * bangs + 0.1 * questions + caps).min(1.0)
}

fn clamp_signed(x: f64) -> f64 {
    round3(x.clamp(-1.0, 1.0))
}

fn clamp_unit(x: f64) -> f64 {
    round3(x.clamp(0.0, 1.0))
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn confidence_for(evidence: u64) -> f64 {
    clamp_unit(1.0 - 0.85f64.powi(evidence.min(1000) as i32 + 1))
}

fn fresh_trust(base: f64) -> Trust {
    Trust { value: clamp_unit(base), confidence: confidence_for(0), evidence_count: 0 }
}

fn step_trust(t: &Trust, target: f64, rate: f64, noise: f64, evidence: u64, rng: &mut Rng) -> Trust {
    let value = t.value + (target - t.value) * rate + rng.jitter(noise);
    let evidence_count = t.evidence_count + evidence;
    Trust { value: clamp_unit(value), confidence: confidence_for(evidence_count), evidence_count }
}

fn fresh_edge(target_entity: String, rng: &mut Rng) -> RelationEdge {
    RelationEdge {
        target_entity,
        trust_ability: fresh_trust(0.5 + rng.jitter(0.1)),
        trust_benevolence: fresh_trust(0.5 + rng.jitter(0.1)),
        trust_integrity: fresh_trust(0.5 + rng.jitter(0.1)),
        warmth: fresh_trust(0.4 + rng.jitter(0.1)),
        agency: clamp_signed(rng.jitter(0.2)),
        relation_context: "first contact".to_owned(),
        obligation_balance: 0.0,
    }
}

/// The peers each agent keeps a (slowly drifting) relation with.
fn peers(agent: &AgentDef) -> Vec<String> {
    crate::catalog::AGENTS.iter().filter(|a| a.id != agent.id).take(2).map(|a| format!("agent:{}", a.id)).collect()
}

/// Everything a new snapshot depends on.
pub struct TurnFacts<'a> {
    pub agent: &'a AgentDef,
    pub end_user_id: &'a str,
    pub user_text: &'a str,
    /// 1-based number of the turn in its session.
    pub turn_number: u64,
    pub now_ms: u64,
}

/// The snapshot recorded after a completed turn; `emitted_at_ms` is 1–8 s after `now_ms`
/// (and strictly after `prev`'s, so the log stays ordered).
pub fn evolve(prev: Option<&Snapshot>, f: &TurnFacts, rng: &mut Rng) -> Snapshot {
    let [bp, ba, bd] = f.agent.pad_baseline;
    let prev_pad = prev.map(|p| p.pad).unwrap_or(Pad { pleasure: bp, arousal: ba, dominance: bd });
    let t = tone(f.user_text);
    let k = intensity(f.user_text);
    let revert = 0.15;
    let pad = Pad {
        pleasure: clamp_signed(prev_pad.pleasure + (bp - prev_pad.pleasure) * revert + 0.18 * t + rng.jitter(0.06)),
        arousal: clamp_signed(prev_pad.arousal + (ba - prev_pad.arousal) * revert + 0.2 * k - 0.04 + rng.jitter(0.08)),
        dominance: clamp_signed(
            prev_pad.dominance + (bd - prev_pad.dominance) * revert - 0.05 * t.min(0.0) + rng.jitter(0.05),
        ),
    };

    let user_entity = format!("end_user:{}", f.end_user_id);
    let mut relations: Vec<RelationEdge> = Vec::new();
    let prev_edges: &[RelationEdge] = prev.map(|p| p.relations.as_slice()).unwrap_or(&[]);

    // The edge towards the user of this turn: real evidence.
    let mut user_edge = prev_edges
        .iter()
        .find(|e| e.target_entity == user_entity)
        .cloned()
        .unwrap_or_else(|| fresh_edge(user_entity.clone(), rng));
    let goal = 0.6 + 0.3 * t;
    user_edge.trust_ability = step_trust(&user_edge.trust_ability, goal + 0.05, 0.2, 0.03, 1, rng);
    user_edge.trust_benevolence = step_trust(&user_edge.trust_benevolence, goal, 0.25, 0.03, 1, rng);
    user_edge.trust_integrity = step_trust(&user_edge.trust_integrity, goal + 0.1, 0.15, 0.02, 1, rng);
    user_edge.warmth = step_trust(&user_edge.warmth, 0.5 + 0.4 * t, 0.3, 0.04, 1, rng);
    user_edge.agency = clamp_signed(user_edge.agency + 0.1 * k - 0.03 + rng.jitter(0.05));
    // Each request puts the agent a little further "owed"; thanks pays some of it back.
    user_edge.obligation_balance =
        clamp_signed(user_edge.obligation_balance * 0.9 - 0.05 + 0.12 * t.max(0.0) + rng.jitter(0.02));
    let mood = if t > 0.2 {
        "appreciative"
    } else if t < -0.2 {
        "frustrated"
    } else {
        "matter-of-fact"
    };
    user_edge.relation_context = format!(
        "turn {} with {}: {} exchange about \u{201c}{}\u{201d}",
        f.turn_number,
        f.end_user_id,
        mood,
        quote(f.user_text, 48)
    );
    relations.push(user_edge);

    // Peer edges: no new evidence, slight drift.
    for peer in peers(f.agent) {
        let edge = prev_edges.iter().find(|e| e.target_entity == peer).cloned().unwrap_or_else(|| {
            let mut e = fresh_edge(peer.clone(), rng);
            e.relation_context = format!("fellow smith; shares the forge with {}", f.agent.display_name);
            e
        });
        let drift = |tr: &Trust, rng: &mut Rng| Trust { value: clamp_unit(tr.value + rng.jitter(0.02)), ..*tr };
        let mut e = edge;
        e.trust_ability = drift(&e.trust_ability, rng);
        e.trust_benevolence = drift(&e.trust_benevolence, rng);
        e.trust_integrity = drift(&e.trust_integrity, rng);
        e.warmth = drift(&e.warmth, rng);
        e.agency = clamp_signed(e.agency + rng.jitter(0.02));
        relations.push(e);
    }

    // Other users' edges carry over unchanged, up to the cap.
    for e in prev_edges {
        if relations.len() >= MAX_EDGES {
            break;
        }
        if !relations.iter().any(|r| r.target_entity == e.target_entity) {
            relations.push(e.clone());
        }
    }

    let valence = clamp_signed(0.7 * pad.pleasure + 0.3 * (2.0 * relations[0].warmth.value - 1.0));

    let mut emitted_at_ms = f.now_ms + rng.range(1000, 8001);
    if let Some(p) = prev {
        emitted_at_ms = emitted_at_ms.max(p.emitted_at_ms + 1);
    }
    Snapshot { emitted_at_ms, pad, relations, valence }
}

/// The wire form (`GET /worldtree/affect`).
pub fn to_wire(agent: &AgentDef, snap: &Snapshot) -> Value {
    let mut v = json!({
        "agent_id": agent.id,
        "emitted_at": rfc3339_millis(snap.emitted_at_ms),
        "pad": snap.pad,
    });
    if agent.legacy_affect {
        v["valence"] = json!(snap.valence);
    } else {
        v["relations"] = json!(snap.relations);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::agent;

    const NOW: u64 = 1_790_000_000_000;

    fn facts<'a>(agent_id: &str, text: &'a str, n: u64, now: u64) -> TurnFacts<'a> {
        TurnFacts {
            agent: agent(agent_id).unwrap(),
            end_user_id: "operator",
            user_text: text,
            turn_number: n,
            now_ms: now,
        }
    }

    fn in_signed(x: f64) -> bool {
        (-1.0..=1.0).contains(&x)
    }
    fn in_unit(x: f64) -> bool {
        (0.0..=1.0).contains(&x)
    }

    fn check_ranges(s: &Snapshot) {
        assert!(in_signed(s.pad.pleasure) && in_signed(s.pad.arousal) && in_signed(s.pad.dominance));
        assert!(in_signed(s.valence));
        for e in &s.relations {
            for t in [&e.trust_ability, &e.trust_benevolence, &e.trust_integrity, &e.warmth] {
                assert!(in_unit(t.value) && in_unit(t.confidence));
            }
            assert!(in_signed(e.agency) && in_signed(e.obligation_balance));
        }
    }

    #[test]
    fn stays_in_range_over_many_turns_and_moves() {
        let mut rng = Rng::new(11);
        let texts = ["THANKS!!! great, perfect!!!", "this is broken and useless!!", "ok", "?"];
        let mut log = AffectLog::default();
        let mut now = NOW;
        for i in 0..500u64 {
            let s = evolve(log.latest(), &facts("sindra", texts[(i % 4) as usize], i + 1, now), &mut rng);
            check_ranges(&s);
            assert!(s.emitted_at_ms >= now + 1000 && s.emitted_at_ms <= now + 8000);
            if let Some(p) = log.latest() {
                assert!(s.emitted_at_ms > p.emitted_at_ms);
                assert_ne!(p.pad, s.pad);
            }
            log.push(s);
            assert!(log.snapshots.len() <= LOG_CAP);
            now += 10_000;
        }
        let last = log.latest().unwrap();
        assert_eq!(last.relations[0].target_entity, "end_user:operator");
        assert_eq!(last.relations[0].trust_ability.evidence_count, 500);
        assert!(last.relations[0].trust_ability.confidence > 0.9);
        assert!(last.relations.len() <= MAX_EDGES);
    }

    #[test]
    fn tone_steers_pleasure() {
        let mut up = None::<Snapshot>;
        let mut down = None::<Snapshot>;
        let (mut r1, mut r2) = (Rng::new(1), Rng::new(1));
        for i in 0..20 {
            up = Some(evolve(up.as_ref(), &facts("brokkr", "thanks, great, perfect", i, NOW), &mut r1));
            down = Some(evolve(down.as_ref(), &facts("brokkr", "bad wrong useless", i, NOW), &mut r2));
        }
        let (up, down) = (up.unwrap(), down.unwrap());
        assert!(up.pad.pleasure > down.pad.pleasure + 0.3);
        assert!(up.relations[0].warmth.value > down.relations[0].warmth.value);
        assert!(tone("Thanks!") > 0.0 && tone("useless") < 0.0 && tone("") == 0.0);
    }

    #[test]
    fn visibility_follows_emitted_at() {
        let mut rng = Rng::new(2);
        let mut log = AffectLog::default();
        assert!(log.visible(NOW).is_none());
        let s1 = evolve(None, &facts("sindra", "hi", 1, NOW), &mut rng);
        let t1 = s1.emitted_at_ms;
        log.push(s1);
        assert!(log.visible(NOW).is_none(), "not emitted yet");
        assert_eq!(log.visible(t1).unwrap().emitted_at_ms, t1);
        let s2 = evolve(log.latest(), &facts("sindra", "again", 2, t1 + 100), &mut rng);
        let t2 = s2.emitted_at_ms;
        log.push(s2);
        assert_eq!(log.visible(t1 + 100).unwrap().emitted_at_ms, t1, "old one until the new is due");
        assert_eq!(log.visible(t2).unwrap().emitted_at_ms, t2);
    }

    #[test]
    fn wire_shapes() {
        let mut rng = Rng::new(3);
        let s = evolve(None, &facts("sindra", "<script>alert(1)</script>", 1, NOW), &mut rng);
        let w = to_wire(agent("sindra").unwrap(), &s);
        let o = w.as_object().unwrap();
        let mut keys: Vec<&str> = o.keys().map(|k| k.as_str()).collect();
        keys.sort();
        assert_eq!(keys, ["agent_id", "emitted_at", "pad", "relations"]);
        assert_eq!(w["agent_id"], "sindra");
        assert!(w["emitted_at"].as_str().unwrap().ends_with('Z'));
        let e = &w["relations"][0];
        for k in ["trust_ability", "trust_benevolence", "trust_integrity", "warmth"] {
            let t = e[k].as_object().unwrap();
            assert_eq!(t.len(), 3);
            assert!(t["evidence_count"].is_u64());
            assert!(t["value"].is_f64() && t["confidence"].is_f64());
        }
        assert!(e["target_entity"].as_str().unwrap().starts_with("end_user:"));
        assert!(e["relation_context"].as_str().unwrap().contains("<script>"));
        assert!(e["agency"].is_number() && e["obligation_balance"].is_number());
        assert_eq!(w["relations"].as_array().unwrap().len(), 3, "user + two peers");

        let legacy = to_wire(agent("eitri").unwrap(), &evolve(None, &facts("eitri", "hi", 1, NOW), &mut rng));
        let mut keys: Vec<&str> = legacy.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        keys.sort();
        assert_eq!(keys, ["agent_id", "emitted_at", "pad", "valence"]);
        assert!(in_signed(legacy["valence"].as_f64().unwrap()));
    }
}
