// An exported session opened read-only and replayed: the file (a session document or
// an OTLP/JSON trace, otlp.js) checked whole first; then every recorded turn event,
// tool, BifrostState and admin answer and affect snapshot fed at its recorded time
// (replay-clock.js: x1, x2, x10 or as fast as possible, pause, step) into the same
// functions the live console calls (transcript.js turnBegin / turnEvent, the panes'
// show* renderers), with no request; the way back to the empty console; the OTLP export.

import { $, clear, el, fill, setText, up } from './dom.js';
import { state } from './console-state.js';
import {
  IMPORT_MAX_BYTES, ImportRefused, buildExport, downloadJson, flight, flightLeaveReplay, flightSseHooks, flightStopStall,
} from './flight-recorder.js';
import { parseImportText, sessionToOtlp } from './otlp.js';
import {
  clearPadPolls, pushAffectHistory, renderAdminEvent, renderAffectPane, setAdminLight, showBifrostResult, showToolsResult,
} from './panes.js';
import { hideAwaiting, hideThinkingNote, turnBegin, turnDrop, turnEndByConsole, turnEvent } from './transcript.js';
import { SPEEDS, createScheduler } from './replay-clock.js';
import { leaveWatch } from './watch.js';

function showImportError(code, message) {
  const node = $('import-error');
  node.setAttribute('data-error-code', code);
  fill(node, 'Import refused: ' + code + ' — ' + message + '. Nothing was changed.');
  node.hidden = false;
}

/** The session (live, or the recording shown) as OTLP/JSON (docs/otlp.md); content only when ticked. */
export function exportOtlp() {
  const doc = buildExport();
  if (doc) downloadJson('ratatoskr-otlp-', doc.session_id, sessionToOtlp(doc, { content: $('otlp-content').checked }));
}

export async function importFile(file) {
  if (!file) return;
  $('import-error').hidden = true;
  let doc;
  try {
    if (file.size > IMPORT_MAX_BYTES) throw new ImportRefused('import_too_large', 'the file is larger than ' + (IMPORT_MAX_BYTES >> 20) + ' MiB');
    let text;
    try { text = await file.text(); } catch (_) { throw new ImportRefused('import_unreadable', 'the file could not be read'); }
    doc = parseImportText(text); // a session document or an OTLP/JSON trace, validated whole
  } catch (e) {
    if (e instanceof ImportRefused) { showImportError(e.code, e.message); return; }
    throw e;
  }
  enterReplay(doc);
}

/** Leaves the live session without a request: no stream, poll or turn stays running. */
function stopLive() {
  leaveWatch();
  if (state.adminES) { state.adminES.close(); state.adminES = null; }
  clearPadPolls();
  flightStopStall();
  flight.live = null;
  const controller = state.turnAbort;
  state.sessionId = null;
  state.agentId = null;
  state.turnAbort = null;
  state.turnRunning = false;
  state.turnView = null; // its stream's last words (the abort below) reach no turn
  if (controller) controller.abort();
  flight.session = null;
}

// ---- the replay ---------------------------------------------------------------------

const replay = { sched: null, view: null, steps: [], log: [], speed: 1 };

/**
 * The recording as steps on one time line (ms from the session's start): each turn at
 * its started_at (never before the previous one ended), its first byte, every event at
 * its browser_ms with its proxy stamp, a terminal the console made; the tool inventory
 * and BifrostState answers at their fetched_at, admin events at their shown time (clamped
 * to the recording; in order); each affect snapshot before the first turn sent after it
 * was drawn (turn.affect_at_start). Equal times keep this order.
 */
function replaySteps(doc) {
  const origin = [doc.started_at, ...doc.turns.map((t) => t.started_at)].map((v) => Date.parse(v)).find(Number.isFinite);
  const rel = (iso) => (origin === undefined ? NaN : Date.parse(iso) - origin);
  const hooks = flightSseHooks();
  const turnSteps = [];
  let cursor = 0;
  for (const turn of doc.turns) {
    const started = rel(turn.started_at);
    const base = Number.isFinite(started) ? Math.max(cursor, started) : cursor;
    let last = base;
    const put = (ms, kind, run) => { const due = Math.max(last, base + ms); last = due; turnSteps.push({ due, kind, run, turn }); };
    put(0, 'turn', () => {
      replay.view = turnBegin(turn.user_text, turn, replay.sched);
      if (turn.first_byte_ms === null && turn.server_t0 !== null) hooks.onComment('t0=' + turn.server_t0);
    });
    if (turn.first_byte_ms !== null) {
      put(turn.first_byte_ms, 'first_byte', () => {
        hooks.beforeChunk();
        if (turn.server_t0 !== null) hooks.onComment('t0=' + turn.server_t0);
      });
    }
    for (const e of turn.events) {
      put(e.browser_ms, 'event', () => {
        if (e.server_ms !== null) hooks.onComment('t=' + e.server_ms);
        turnEvent(replay.view, e.event, e.data);
      });
    }
    const t = turn.terminal;
    const fromStream = t && t.origin === 'stream' && turn.events.some((e) => e.event === t.kind);
    if (!fromStream) {
      put(t && t.browser_ms !== null ? t.browser_ms : 0, 'end', () => {
        if (t) turnEndByConsole(replay.view, t.kind, t.data);
        turnDrop(replay.view, true); // no terminal recorded: the timeline as far as it went
      });
    }
    cursor = last;
  }
  const at = (iso, after) => { const r = rel(iso); return Number.isFinite(r) ? Math.min(Math.max(r, after, 0), cursor) : after; };
  const side = [];
  if (doc.tools) side.push({ due: at(doc.tools.fetched_at, 0), kind: 'tools', run: () => showToolsResult(doc.tools) });
  let prev = 0;
  for (const snap of doc.bifrost_snapshots) {
    prev = at(snap.fetched_at, prev);
    side.push({ due: prev, kind: 'bifrost', run: () => showBifrostResult(snap) });
  }
  prev = 0;
  for (const a of doc.admin_events) {
    prev = at(a.shown_at, prev);
    side.push({ due: prev, kind: 'admin', run: () => renderAdminEvent(Object.assign({}, a.event, { timestamp: a.shown_at })) });
  }
  // Affect: the snapshots drawn before each turn was sent, then the rest at the end.
  const affect = doc.affect_history;
  let next = 0;
  const drawUpTo = (end, due) => {
    for (; next < end; next += 1) {
      const snap = affect[next];
      side.push({ due, kind: 'affect', run: () => { pushAffectHistory(snap); renderAffectPane(snap); } });
    }
  };
  for (const step of turnSteps) {
    if (step.kind !== 'turn' || !step.turn.affect_at_start) continue;
    const k = affect.findIndex((snap, i) => i >= next && snap.emitted_at === step.turn.affect_at_start);
    if (k >= 0) drawUpTo(k + 1, step.due);
  }
  drawUpTo(affect.length, cursor);
  return side.concat(turnSteps).map((step, seq) => ({ ...step, seq }))
    .sort((x, y) => x.due - y.due || x.seq - y.seq);
}

/** The panes as a recording starts: empty, or saying what the recording lacks. */
function resetPanes(doc) {
  if (replay.view) turnDrop(replay.view, false);
  replay.view = null;
  hideThinkingNote();
  hideAwaiting();
  state.turnNodes = null;
  state.turnId = null;
  flight.replayed = [];
  clear($('transcript'));
  clear($('tool-events'));
  $('tools').querySelector('.tools-inventory').replaceWith(el('div', { class: 'tools-inventory muted', text: doc.tools ? 'No tool inventory yet.' : 'No tool inventory was recorded.' }));
  $('bifrost').replaceChildren(el('p', { class: 'muted', text: doc.bifrost_snapshots.length ? 'No BifrostState yet.' : 'No BifrostState was recorded.' }));
  clear($('admin-events'));
  state.adminPending = [];
  setAdminLight('recorded', 'recorded');
  state.affectHist.clear();
  state.lastHistAt = null;
  state.lastAffectAt = null;
  $('affect').replaceChildren(el('p', { class: 'muted', text: doc.affect_history.length ? 'No snapshot yet.' : 'No affect snapshot was recorded.' }));
}

/** A new scheduler at the start of the recording (paused), the panes reset. */
function loadReplay(doc) {
  if (flight.replayer) flight.replayer.stop();
  resetPanes(doc);
  replay.steps = replaySteps(doc);
  replay.log = [];
  const sched = createScheduler(replay.steps, {
    onChange: renderBar,
    onApplied: (step, i, wall) => {
      replay.log.push({ i, kind: step.kind, due: step.due, wall, target: sched.playing && sched.speed !== Infinity ? sched.dueWall(step.due) : null });
    },
  });
  sched.setSpeed(replay.speed);
  replay.sched = sched;
  // Leaving the replay (here, or a new live session) stops it and drops a turn half shown.
  flight.replayer = { stop() { sched.stop(); if (replay.view) turnDrop(replay.view, false); replay.view = null; } };
  renderBar(sched);
  return sched;
}

function renderBar(s) {
  if (s !== replay.sched) return;
  const what = s.playing ? 'playing' : s.ended ? 'ended' : s.position === 0 ? 'ready' : 'paused';
  $('replay-state').textContent = what + ' · ' + s.position + '/' + s.length + ' · ' + (s.speed === Infinity ? 'as fast as possible' : '×' + s.speed);
  const play = $('replay-play');
  play.textContent = s.playing ? 'Pause' : s.ended ? 'Replay' : 'Play';
  play.disabled = s.length === 0;
  $('replay-step').disabled = s.playing || s.ended;
  $('replay-restart').disabled = s.position === 0 && !s.playing;
}

/** Play / Pause / Replay (from the start once it has ended). */
export function replayToggle() {
  if (!flight.replay || !replay.sched) return;
  if (replay.sched.playing) { replay.sched.pause(); return; }
  if (replay.sched.ended) loadReplay(flight.replay);
  replay.log = [];
  replay.sched.play();
}

/** One step while paused. */
export function replayStep() { if (flight.replay && replay.sched) replay.sched.step(); }

/** Back to the start of the recording, paused, the panes empty. */
export function replayRestart() { if (flight.replay) loadReplay(flight.replay); }

/** The speed select: "1", "2", "10" or "max" (as fast as possible). */
export function replaySetSpeed(value) {
  const speed = value === 'max' ? Infinity : Number(value);
  if (!SPEEDS.includes(speed)) return;
  replay.speed = speed;
  if (replay.sched) replay.sched.setSpeed(speed);
}

/** The test hook's view of the replay (main.js): its state and each applied step's times. */
export function replayStatus() {
  const s = replay.sched;
  return s && flight.replay ? { position: s.position, length: s.length, playing: s.playing, ended: s.ended, speed: s.speed, now: s.now() } : null;
}
export function replayLog() { return replay.log.map((x) => ({ ...x })); }
export function replayedTurns() { return JSON.parse(JSON.stringify(flight.replayed)); }

/**
 * Shows a validated document read-only: the live session left without a request, then
 * the whole recording drawn at once by the replay itself (every step, through the live
 * renderers); Replay plays it again from the start at the speed chosen.
 */
function enterReplay(doc) {
  stopLive();
  if (flight.replayer) flight.replayer.stop();
  flight.replay = doc;
  for (const id of ['message', 'send', 'cancel', 'bifrost-refresh']) $(id).disabled = true;
  setText($('session-id'), up(doc.session_id));
  const banner = $('replay-banner');
  fill(banner, 'Recorded session (read-only): agent ', up(doc.agent.display_name ?? doc.agent.agent_id), ' · session ', up(doc.session_id),
    ' · exported ', up(doc.exported_at), ' · ' + doc.turns.length + ' turn' + (doc.turns.length === 1 ? '' : 's') + '. No live calls are made. ',
    el('button', { type: 'button', id: 'replay-close', text: 'Leave recording' }));
  banner.hidden = false;
  $('replay-bar').hidden = false;
  $('console-view').classList.add('replay');
  $('export-session').disabled = false;
  $('export-otlp').disabled = false;
  loadReplay(doc).finish();
}

export function leaveReplayToEmpty() {
  flightLeaveReplay(); // stops the replay (flight.replayer)
  replay.sched = null;
  $('session-id').textContent = 'none';
  clear($('transcript'));
  clear($('tool-events'));
  clear($('admin-events'));
  state.affectHist.clear();
  state.lastHistAt = null;
  $('tools').querySelector('.tools-inventory').replaceWith(el('div', { class: 'tools-inventory muted', text: 'Start a session to see the agent\'s tools.' }));
  $('bifrost').replaceChildren(el('p', { class: 'muted', text: 'Start a session to see its dispatch state.' }));
  $('affect').replaceChildren(el('p', { class: 'muted', text: 'No snapshot yet.' }));
  setAdminLight('', 'not connected');
  $('export-session').disabled = true;
  $('export-otlp').disabled = true;
  $('start-session').focus();
}
