// The flight recorder (docs/flight-recorder.md): turn timeline and stall marker, the
// buffering detector, the session export and the check of an imported document
// (replay.js shows it; panes.js seeds the durable affect history). A live session is
// recorded as it is shown: every relayed turn event with the proxy's `: t=` stamp and
// the browser's receive time, each tools / BifrostState answer fetched, the admin
// events shown, the affect snapshots drawn. Everything renders through el() only.

import { $, clear, el, up } from './dom.js';
import { ADMIN_EVENTS_CAP, state } from './console-state.js';
import { raiseAlert } from './alerts.js';

const EXPORT_FORMAT = 'ratatoskr-session';
const EXPORT_VERSION = 1;
const STALL_MS_DEFAULT = 10000;
// The buffering rule: >= BUFFER_SHARE of a turn's stamped events reach the browser
// within BUFFER_WINDOW_MS of each other while the proxy's stamps of those same
// events span >= BUFFER_SPREAD_MS.
const BUFFER_WINDOW_MS = 50;
const BUFFER_SHARE = 0.8;
const BUFFER_SPREAD_MS = 1000;
const BUFFER_MIN_EVENTS = 3;
const AFFECT_LOG_CAP = 500;
export const IMPORT_MAX_BYTES = 32 * 1024 * 1024;
export const TURN_TERMINALS = ['done', 'error', 'cancelled'];

/** The stall threshold: `?stall_ms=N` (100 to 600000) in the page's URL, else 10 s. */
function stallMsFromUrl() {
  if (typeof location === 'undefined') return STALL_MS_DEFAULT; // imported outside a page (unit tests)
  const raw = new URLSearchParams(location.search).get('stall_ms');
  const n = raw !== null && /^\d{1,6}$/.test(raw) ? Number(raw) : NaN;
  return n >= 100 && n <= 600000 ? n : STALL_MS_DEFAULT;
}

export const flight = {
  stallMs: stallMsFromUrl(),
  session: null, // the live recording (the export document's parts)
  live: null,    // the running turn: { turn, t0, pendingStamp, lastAt, nodes, stall }
  replay: null,  // the imported document while it is shown
  replayed: [],  // its turns as the replay recorded them again (the same as replay.turns: deterministic)
  replayer: null, // the replay's scheduler (replay.js), stopped when the replay is left
};

export const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const roundMs = (v) => Math.round(v * 10) / 10;

/** A fetched answer as recorded: when, HTTP status (0: no answer) and JSON body. */
function recordedResult(result) {
  return { fetched_at: new Date().toISOString(), status: result.status, ok: result.ok === true, body: result.body ?? null };
}

export function flightSessionStart() {
  flightLeaveReplay();
  const agent = state.agents.find((a) => a && a.agent_id === state.agentId);
  flight.session = {
    agent: { agent_id: state.agentId, display_name: agent && typeof agent.display_name === 'string' ? agent.display_name : null },
    session_id: state.sessionId,
    bifrost_visible_host: $('bifrost-host').textContent,
    started_at: new Date().toISOString(),
    turns: [], tools: null, bifrost_snapshots: [], admin_events: [], affect_history: [],
  };
  $('export-session').disabled = false;
  $('export-otlp').disabled = false;
}

export function flightTools(result) { if (flight.session && !flight.replay) flight.session.tools = recordedResult(result); }

export function flightBifrost(result) { if (flight.session && !flight.replay) flight.session.bifrost_snapshots.push(recordedResult(result)); }

/** An admin event as shown: the event and the time text the pane gave it. */
export function flightAdminShown(ev, shownAt) {
  if (!flight.session || flight.replay) return;
  const list = flight.session.admin_events;
  list.push({ event: ev, shown_at: shownAt });
  while (list.length > ADMIN_EVENTS_CAP) list.shift();
}

/** An affect snapshot added to the drawn history (after its emitted_at dedupe). */
export function flightAffect(snap) {
  if (!flight.session || flight.replay) return;
  const list = flight.session.affect_history;
  list.push(snap);
  while (list.length > AFFECT_LOG_CAP) list.shift();
}

// ---- the running turn: recorder, stall marker --------------------------------------
// One path for a live turn and a replayed one (replay.js): the recorder reads the
// turn's clock, performance.now() live, the replay clock in a replay, so silences,
// stalls and every recorded time are the recording's own at any replay speed.

/**
 * A turn starts: recorded into the live session, or, replayed (`replayOf`: the
 * recorded turn), into `flight.replayed` with the recording's stall threshold.
 */
export function flightTurnStart(text, nodes, replayOf = null, clock = performance) {
  flightStopStall();
  const list = replayOf ? flight.replayed : flight.session && !flight.replay ? flight.session.turns : null;
  if (!list) { flight.live = null; return; }
  const turn = {
    index: replayOf ? replayOf.index : list.length + 1, user_text: text, started_at: replayOf ? replayOf.started_at : new Date().toISOString(),
    server_t0: null, first_byte_ms: null, events: [], terminal: null, stalls: [],
    // the affect drawn when it was sent (compare.js: the change across a turn)
    affect_at_start: replayOf ? replayOf.affect_at_start : state.lastHistAt ?? null,
  };
  if (turn.affect_at_start === undefined) delete turn.affect_at_start; // an older document without it
  list.push(turn);
  const t0 = clock.now();
  const stallMs = replayOf && flight.replay && Number.isFinite(flight.replay.stall_ms) ? flight.replay.stall_ms : flight.stallMs;
  flight.live = { turn, t0, clock, stallMs, pendingStamp: null, lastAt: t0, nodes, stall: null };
  // Checked four times a second live; a replay checks ten times as often, so at x10 the
  // marker still shows within a quarter second of the recording's clock.
  flight.live.stall = { node: null, interval: setInterval(flightStallTick, replayOf ? 25 : 250) };
}

const liveMs = () => roundMs(flight.live.clock.now() - flight.live.t0);

/** readSse's options for the turn stream (a replay calls them too): the first byte, and the proxy's stamps. */
export function flightSseHooks() {
  return {
    beforeChunk: () => { if (flight.live && flight.live.turn.first_byte_ms === null) flight.live.turn.first_byte_ms = liveMs(); },
    onComment: (text) => {
      if (!flight.live) return;
      let m = /^t=(\d{1,15})$/.exec(text);
      if (m) { flight.live.pendingStamp = Number(m[1]); return; }
      m = /^t0=(\d{1,15})$/.exec(text);
      if (m) flight.live.turn.server_t0 = Number(m[1]);
    },
  };
}

/** A relayed event: recorded with both times; a stall it ends is recorded and cleared. */
export function flightEvent(name, data) {
  const live = flight.live;
  if (!live) return;
  const now = live.clock.now();
  const silent = now - live.lastAt;
  if (silent >= live.stallMs) live.turn.stalls.push({ from_ms: roundMs(live.lastAt - live.t0), to_ms: roundMs(now - live.t0) });
  live.lastAt = now;
  live.turn.events.push({ event: name, data, server_ms: live.pendingStamp, browser_ms: roundMs(now - live.t0) });
  live.pendingStamp = null;
  if (live.stall && live.stall.node) { live.stall.node.remove(); live.stall.node = null; }
}

function flightStallTick() {
  const live = flight.live;
  if (!live || !live.stall) return;
  const silent = live.clock.now() - live.lastAt;
  if (silent < live.stallMs) return;
  if (!live.stall.node) {
    live.stall.node = el('div', { class: 'stall-marker', role: 'status' });
    live.nodes.node.append(live.stall.node);
    if (!flight.replay && flight.session) {
      raiseAlert('stall', flight.session.session_id + ':' + live.turn.index, 'turn stalled',
        'no delta for ' + (live.stallMs / 1000).toFixed(1) + ' s · session ' + flight.session.session_id);
    }
  }
  const text = '⏸ stalled · no delta for ' + (silent / 1000).toFixed(1) + ' s';
  if (live.stall.node.textContent !== text) live.stall.node.textContent = text;
}

export function flightStopStall() {
  const live = flight.live;
  if (!live || !live.stall) return;
  clearInterval(live.stall.interval);
  if (live.stall.node) live.stall.node.remove();
  live.stall = null;
}

/** The turn ended (terminal() ran): record how, and draw its timeline under it. */
export function flightTurnEnd(kind, data, nodes) {
  const live = flight.live;
  if (!live) return;
  flightStopStall();
  const last = live.turn.events[live.turn.events.length - 1];
  const fromStream = last !== undefined && last.event === kind;
  live.turn.terminal = { kind, origin: fromStream ? 'stream' : 'console', data: isObject(data) ? data : {}, browser_ms: fromStream ? last.browser_ms : liveMs() };
  flight.live = null;
  if (nodes) renderTurnFlight(live.turn, nodes.node);
}

/** A replayed turn the recording leaves unfinished (no terminal): its timeline as recorded so far. */
export function flightTurnCut(nodes) {
  const live = flight.live;
  if (!live) return;
  flightStopStall();
  flight.live = null;
  if (nodes) renderTurnFlight(live.turn, nodes.node);
}

// ---- timeline and the buffering rule (pure; exposed for tests) ----------------------

/**
 * The buffering rule over a turn's events ({server_ms, browser_ms}): the largest set
 * of stamped events the browser received within BUFFER_WINDOW_MS; a warning when it
 * holds >= BUFFER_SHARE of them and the proxy's stamps of that set span >= BUFFER_SPREAD_MS.
 */
export function detectBuffering(events) {
  const stamped = events.filter((e) => Number.isFinite(e.server_ms) && Number.isFinite(e.browser_ms))
    .slice().sort((a, b) => a.browser_ms - b.browser_ms);
  const n = stamped.length;
  if (n < BUFFER_MIN_EVENTS) return { stamped: n, buffered: false };
  let best = { from: 0, to: 0 };
  for (let i = 0, j = 0; i < n; i += 1) {
    if (j < i) j = i;
    while (j + 1 < n && stamped[j + 1].browser_ms - stamped[i].browser_ms <= BUFFER_WINDOW_MS) j += 1;
    if (j - i > best.to - best.from) best = { from: i, to: j };
  }
  const bunch = stamped.slice(best.from, best.to + 1);
  const server = bunch.map((e) => e.server_ms);
  const serverSpread = Math.max(...server) - Math.min(...server);
  const windowMs = roundMs(bunch[bunch.length - 1].browser_ms - bunch[0].browser_ms);
  const buffered = bunch.length >= BUFFER_SHARE * n && serverSpread >= BUFFER_SPREAD_MS;
  return { stamped: n, bunched: bunch.length, window_ms: windowMs, server_spread_ms: serverSpread, buffered };
}

/** A recorded turn's timeline: every value in ms from the moment the turn was sent. */
export function turnTimeline(turn) {
  const events = turn.events;
  const first = (name) => { const e = events.find((x) => x.event === name); return e ? e.browser_ms : null; };
  const tools = [];
  const open = new Map();
  for (const e of events) {
    const d = isObject(e.data) ? e.data : {};
    if (e.event === 'tool_call') {
      const tool = { call_id: d.call_id ?? null, name: d.name ?? null, start_ms: e.browser_ms, end_ms: null, duration_ms: null, is_error: null };
      tools.push(tool);
      open.set(String(d.call_id), tool);
    } else if (e.event === 'tool_result') {
      const tool = open.get(String(d.call_id));
      if (tool && tool.end_ms === null) {
        tool.end_ms = e.browser_ms;
        tool.duration_ms = roundMs(e.browser_ms - tool.start_ms);
        tool.is_error = d.is_error === true;
        open.delete(String(d.call_id));
      } else {
        tools.push({ call_id: d.call_id ?? null, name: d.name ?? null, start_ms: null, end_ms: e.browser_ms, duration_ms: null, is_error: d.is_error === true });
      }
    }
  }
  let maxGap = null;
  for (let i = 1; i < events.length; i += 1) {
    const gap = roundMs(events[i].browser_ms - events[i - 1].browser_ms);
    if (maxGap === null || gap > maxGap.ms) maxGap = { ms: gap, before: events[i].event, after: events[i - 1].event };
  }
  const terminal = turn.terminal;
  const total = terminal ? terminal.browser_ms : (events.length ? events[events.length - 1].browser_ms : null);
  const deltas = events.filter((e) => e.event !== 'turn.started' && !TURN_TERMINALS.includes(e.event)).length;
  const stamps = events.map((e) => e.server_ms).filter(Number.isFinite);
  return {
    first_byte_ms: turn.first_byte_ms,
    first_thinking_ms: first('thinking'),
    first_text_ms: first('text'),
    tools,
    terminal: terminal ? { kind: terminal.kind, origin: terminal.origin, at_ms: terminal.browser_ms } : null,
    total_ms: total,
    max_gap: maxGap,
    deltas,
    deltas_per_s: total > 0 ? Math.round((deltas / (total / 1000)) * 10) / 10 : null,
    server_span_ms: stamps.length ? Math.max(...stamps) - Math.min(...stamps) : null,
    stalls: turn.stalls.slice(),
    buffering: detectBuffering(events),
  };
}

const fmtMs = (v) => (v === null || v === undefined ? '—' : (v >= 10000 ? (v / 1000).toFixed(2) + ' s' : Math.round(v) + ' ms'));

/** The turn's timeline (a <details>) and, when the rule fires, its buffering warning. */
export function renderTurnFlight(turn, parent) {
  const t = turnTimeline(turn);
  const kv = el('dl', { class: 'kv flight-kv' });
  const row = (k, ...parts) => kv.append(el('dt', { text: k }), el('dd', { class: 'mono' }, ...parts));
  row('first byte', fmtMs(t.first_byte_ms));
  row('first thinking', fmtMs(t.first_thinking_ms));
  row('first text', fmtMs(t.first_text_ms));
  for (const tool of t.tools) {
    row('tool', up(tool.name ?? '?'), ' · ', tool.start_ms === null ? '?' : fmtMs(tool.start_ms), ' → ',
      tool.end_ms === null ? 'no result' : fmtMs(tool.end_ms),
      tool.duration_ms === null ? '' : ' · ' + fmtMs(tool.duration_ms), tool.is_error === null ? '' : tool.is_error ? ' · error' : ' · ok');
  }
  row('terminal', t.terminal ? t.terminal.kind + ' at ' + fmtMs(t.terminal.at_ms) + (t.terminal.origin === 'console' ? ' (ended by the console)' : '') : 'none');
  row('total', fmtMs(t.total_ms));
  row('largest gap', t.max_gap ? fmtMs(t.max_gap.ms) + ' (' : '—', ...(t.max_gap ? [up(t.max_gap.after), ' → ', up(t.max_gap.before), ')'] : []));
  row('deltas', t.deltas + (t.deltas_per_s === null ? '' : ' · ' + t.deltas_per_s.toFixed(1) + ' /s'));
  row('proxy stamps', t.server_span_ms === null ? 'none (the server sent no : t= stamps)' : 'span ' + fmtMs(t.server_span_ms) + ' over ' + t.buffering.stamped + ' events');
  if (t.stalls.length) {
    row('stalls', t.stalls.length + ' · longest ' + fmtMs(Math.max(...t.stalls.map((s) => s.to_ms - s.from_ms))));
  }
  const summary = el('summary', { class: 'mono', text: 'timeline · ' + fmtMs(t.total_ms) + ' · ' + t.deltas + ' deltas' + (t.buffering.buffered ? ' · buffered' : '') });
  parent.append(el('details', { class: 'flight' }, summary, kv));
  if (t.buffering.buffered) {
    const b = t.buffering;
    parent.append(el('div', { class: 'state-note bad buffering-warning', role: 'status', 'data-error-code': 'response_buffered' },
      '⚠ response_buffered: the console\'s server relayed ' + b.bunched + ' of ' + b.stamped + ' events over ' + fmtMs(b.server_spread_ms) +
      ', but this browser received them within ' + fmtMs(b.window_ms) + '. Something between the browser and the server buffers ' +
      'responses, most likely a reverse proxy: turn its response buffering off for /api/ (nginx: proxy_buffering off;). ' +
      'The app already sends X-Accel-Buffering: no, so look for a proxy, CDN or compression layer that ignores it.'));
  }
}

// ---- export ---------------------------------------------------------------------------

/** The export document (docs/session-export.schema.json): the live recording, or the one shown. */
export function buildExport() {
  if (flight.replay) return Object.assign({}, flight.replay, { exported_at: new Date().toISOString() });
  const s = flight.session;
  if (!s) return null;
  return {
    format: EXPORT_FORMAT, version: EXPORT_VERSION, exported_at: new Date().toISOString(),
    agent: s.agent, session_id: s.session_id, bifrost_visible_host: s.bifrost_visible_host, started_at: s.started_at,
    stall_ms: flight.stallMs, turns: s.turns, tools: s.tools, bifrost_snapshots: s.bifrost_snapshots,
    admin_events: s.admin_events, affect_history: s.affect_history,
  };
}

/** Downloads a JSON value as `<prefix><session id>.json` (the session export, the OTLP export). */
export function downloadJson(prefix, sessionId, value) {
  const blob = new Blob([JSON.stringify(value, null, 2) + '\n'], { type: 'application/json' });
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a'); // never attached: it only names the download
  a.href = url;
  a.download = prefix + String(sessionId).replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 80) + '.json';
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

export function exportSession() {
  const doc = buildExport();
  if (doc) downloadJson('ratatoskr-session-', doc.session_id, doc);
}

// ---- import: validate the whole document (replay.js renders it) ----------------------

export class ImportRefused extends Error {
  constructor(code, message) { super(message); this.code = code; }
}

/** Checks the whole document; throws ImportRefused(import_invalid_document) at the first fault. */
export function validateSessionDocument(doc) {
  const bad = (path, what) => { throw new ImportRefused('import_invalid_document', path + ' ' + what); };
  const obj = (v, path) => { if (!isObject(v)) bad(path, 'must be an object'); return v; };
  const arr = (v, path) => { if (!Array.isArray(v)) bad(path, 'must be an array'); return v; };
  const str = (v, path, nullable) => { if (!(typeof v === 'string' || (nullable && v === null))) bad(path, nullable ? 'must be a string or null' : 'must be a string'); };
  const num = (v, path, nullable) => { if (!((typeof v === 'number' && Number.isFinite(v) && v >= 0) || (nullable && v === null))) bad(path, nullable ? 'must be a number >= 0 or null' : 'must be a number >= 0'); };
  const only = (v, path, keys) => { for (const k of Object.keys(v)) if (!keys.includes(k)) bad(path, 'has an unknown field'); };
  const result = (v, path) => {
    obj(v, path);
    only(v, path, ['fetched_at', 'status', 'ok', 'body']);
    str(v.fetched_at, path + '.fetched_at');
    if (!Number.isInteger(v.status) || v.status < 0 || v.status > 999) bad(path + '.status', 'must be an HTTP status (0 for none)');
    if (typeof v.ok !== 'boolean') bad(path + '.ok', 'must be a boolean');
    if (!('body' in v)) bad(path + '.body', 'is missing');
  };
  only(doc, 'document', ['format', 'version', 'exported_at', 'agent', 'session_id', 'bifrost_visible_host', 'started_at', 'stall_ms',
    'turns', 'tools', 'bifrost_snapshots', 'admin_events', 'affect_history']);
  str(doc.exported_at, 'exported_at');
  obj(doc.agent, 'agent');
  only(doc.agent, 'agent', ['agent_id', 'display_name']);
  str(doc.agent.agent_id, 'agent.agent_id');
  str(doc.agent.display_name, 'agent.display_name', true);
  str(doc.session_id, 'session_id');
  if (doc.bifrost_visible_host !== undefined) str(doc.bifrost_visible_host, 'bifrost_visible_host', true);
  if (doc.started_at !== undefined) str(doc.started_at, 'started_at');
  if (doc.stall_ms !== undefined) num(doc.stall_ms, 'stall_ms');
  arr(doc.turns, 'turns').forEach((turn, i) => {
    const p = 'turns[' + i + ']';
    obj(turn, p);
    only(turn, p, ['index', 'user_text', 'started_at', 'server_t0', 'first_byte_ms', 'events', 'terminal', 'stalls', 'affect_at_start']);
    if (turn.affect_at_start !== undefined) str(turn.affect_at_start, p + '.affect_at_start', true);
    if (!Number.isInteger(turn.index) || turn.index < 1) bad(p + '.index', 'must be an integer >= 1');
    str(turn.user_text, p + '.user_text');
    str(turn.started_at, p + '.started_at');
    num(turn.server_t0, p + '.server_t0', true);
    num(turn.first_byte_ms, p + '.first_byte_ms', true);
    arr(turn.events, p + '.events').forEach((e, j) => {
      const q = p + '.events[' + j + ']';
      obj(e, q);
      only(e, q, ['event', 'data', 'server_ms', 'browser_ms']);
      str(e.event, q + '.event');
      obj(e.data, q + '.data');
      num(e.server_ms, q + '.server_ms', true);
      num(e.browser_ms, q + '.browser_ms');
    });
    if (turn.terminal !== null) {
      const q = p + '.terminal';
      obj(turn.terminal, q);
      only(turn.terminal, q, ['kind', 'origin', 'data', 'browser_ms']);
      if (!TURN_TERMINALS.includes(turn.terminal.kind)) bad(q + '.kind', 'must be done, error or cancelled');
      if (!['stream', 'console'].includes(turn.terminal.origin)) bad(q + '.origin', 'must be stream or console');
      obj(turn.terminal.data, q + '.data');
      num(turn.terminal.browser_ms, q + '.browser_ms', true);
    }
    arr(turn.stalls, p + '.stalls').forEach((s, j) => {
      const q = p + '.stalls[' + j + ']';
      obj(s, q);
      only(s, q, ['from_ms', 'to_ms']);
      num(s.from_ms, q + '.from_ms');
      num(s.to_ms, q + '.to_ms');
    });
  });
  if (doc.tools !== null) result(doc.tools, 'tools');
  arr(doc.bifrost_snapshots, 'bifrost_snapshots').forEach((r, i) => result(r, 'bifrost_snapshots[' + i + ']'));
  arr(doc.admin_events, 'admin_events').forEach((a, i) => {
    const p = 'admin_events[' + i + ']';
    obj(a, p);
    only(a, p, ['event', 'shown_at']);
    obj(a.event, p + '.event');
    str(a.shown_at, p + '.shown_at');
  });
  arr(doc.affect_history, 'affect_history').forEach((s, i) => obj(s, 'affect_history[' + i + ']'));
  if (doc.admin_events.length > ADMIN_EVENTS_CAP) bad('admin_events', 'has more than ' + ADMIN_EVENTS_CAP + ' events');
  if (doc.affect_history.length > AFFECT_LOG_CAP) bad('affect_history', 'has more than ' + AFFECT_LOG_CAP + ' snapshots');
}

/** Text to a validated document, or ImportRefused with its typed code. */
export function parseSessionDocument(text) {
  let doc;
  try { doc = JSON.parse(text); } catch (_) { throw new ImportRefused('import_invalid_json', 'the file is not JSON'); }
  return checkSessionDocument(doc);
}

/** A parsed value to a validated session document, or ImportRefused with its typed code. */
export function checkSessionDocument(doc) {
  if (!isObject(doc) || doc.format !== EXPORT_FORMAT) {
    throw new ImportRefused('import_wrong_format', 'not a ratatoskr session document (its "format" must be "' + EXPORT_FORMAT + '")');
  }
  if (doc.version !== EXPORT_VERSION) {
    throw new ImportRefused('import_unsupported_version', 'this console reads version ' + EXPORT_VERSION + ' documents only');
  }
  validateSessionDocument(doc);
  return doc;
}

// ---- leaving a replay -----------------------------------------------------------------

/** Back to the live console's empty state (no request: start a session to go live). */
export function flightLeaveReplay() {
  if (!flight.replay) return;
  if (flight.replayer) flight.replayer.stop();
  flight.replayer = null;
  flight.replay = null;
  flight.replayed = [];
  $('replay-bar').hidden = true;
  $('replay-banner').hidden = true;
  clear($('replay-banner'));
  $('console-view').classList.remove('replay');
}
