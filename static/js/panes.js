// The console view's side panes: persona / affect (values, trends, sparklines and
// the durable history), the Tools pane, BifrostState and the admin event stream.
// Each loader records what it fetched in the flight recorder.

import { $, Upstream, el, fill, up } from './dom.js';
import { api, describeError, tryApi } from './api.js';
import { ADMIN_EVENTS_CAP, state } from './console-state.js';
import { flight, flightAdminShown, flightAffect, flightBifrost, flightTools, isObject } from './flight-recorder.js';
import { raiseAlert } from './alerts.js';

const HIST_CAP = 24;
const PAD_POLL_MS = [1500, 3500, 6500, 10500];
const SPARK_BLOCKS = '▁▂▃▄▅▆▇█';

// ---- trends and sparklines (pure; exposed for tests) ----------------------------

/** Unicode sparkline scaled to the values' own range; flat under 0.01. */
export function sparkline(vals) {
  const nums = vals.filter(Number.isFinite);
  if (nums.length === 0) return '';
  const min = Math.min(...nums), max = Math.max(...nums);
  if (max - min < 0.01) return '▄'.repeat(nums.length);
  return nums.map((v) => SPARK_BLOCKS[Math.min(7, Math.floor(((v - min) / (max - min)) * 8))]).join('');
}

/** Δ between the last two values, or null with fewer than two. */
export function trendDelta(vals) {
  const nums = vals.filter(Number.isFinite);
  return nums.length < 2 ? null : nums[nums.length - 1] - nums[nums.length - 2];
}

// ---- persona / affect ------------------------------------------------------------

export function pushAffectHistory(snap) {
  if (snap.emitted_at === state.lastHistAt) return; // one sample per emit, however often we poll
  state.lastHistAt = snap.emitted_at;
  flightAffect(snap);
  for (const [key, value] of affectMetrics(snap)) {
    const hist = state.affectHist.get(key) || [];
    hist.push(value);
    while (hist.length > HIST_CAP) hist.shift();
    state.affectHist.set(key, hist);
  }
}

/** [key, number] pairs present in the snapshot; nothing is synthesised. */
export function affectMetrics(snap) {
  const out = [];
  const num = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : null);
  const pad = snap.pad && typeof snap.pad === 'object' ? snap.pad : {};
  for (const k of ['pleasure', 'arousal', 'dominance']) if (num(pad[k]) !== null) out.push(['pad.' + k, pad[k]]);
  if (Array.isArray(snap.relations)) {
    snap.relations.forEach((rel, i) => {
      if (!rel || typeof rel !== 'object') return;
      const prefix = 'rel.' + i + '.' + String(rel.target_entity ?? '') + '.';
      for (const k of ['trust_ability', 'trust_benevolence', 'trust_integrity', 'warmth']) {
        if (rel[k] && num(rel[k].value) !== null) out.push([prefix + k, rel[k].value]);
      }
      for (const k of ['agency', 'obligation_balance']) if (num(rel[k]) !== null) out.push([prefix + k, rel[k]]);
    });
  } else if (num(snap.valence) !== null) {
    out.push(['valence', snap.valence]);
  }
  return out;
}

/** One metric: label and extra (parts, may hold upstream text), value, Δ, sparkline. */
function metricRow(label, key, value, extra) {
  const hist = state.affectHist.get(key) || [value];
  const delta = trendDelta(hist);
  const deltaText = delta === null ? '—' : (delta >= 0 ? '▲ ' : '▼ ') + Math.abs(delta).toFixed(3);
  return el('div', { class: 'metric' },
    el('span', {}, label, ...(extra ? [' ', ...extra] : [])),
    el('span', { class: 'value', text: value.toFixed(3) }),
    el('span', { class: 'delta' + (delta === null ? '' : delta >= 0 ? ' up' : ' down'), text: deltaText }),
    el('span', { class: 'spark', title: 'last ' + hist.length + ' emits', text: sparkline(hist) }));
}

export function renderAffectPane(snap) {
  const root = $('affect');
  const parts = [el('div', { class: 'muted mono' }, up(snap.agent_id ?? ''), ' · emitted ', up(snap.emitted_at ?? '?'))];
  const metrics = new Map(affectMetrics(snap));
  const pad = ['pleasure', 'arousal', 'dominance'].filter((k) => metrics.has('pad.' + k));
  if (pad.length) {
    parts.push(el('div', { class: 'muted', text: 'PAD mood' }));
    for (const k of pad) parts.push(metricRow(k, 'pad.' + k, metrics.get('pad.' + k)));
  }
  if (Array.isArray(snap.relations)) {
    snap.relations.forEach((rel, i) => {
      if (!rel || typeof rel !== 'object') return;
      const prefix = 'rel.' + i + '.' + String(rel.target_entity ?? '') + '.';
      const block = el('div', { class: 'relation' }, el('div', { class: 'mono', text: up(rel.target_entity ?? '(unknown entity)') }));
      if (rel.relation_context !== undefined) block.append(el('div', { class: 'muted', text: up(rel.relation_context) }));
      for (const k of ['trust_ability', 'trust_benevolence', 'trust_integrity', 'warmth', 'agency', 'obligation_balance']) {
        if (!metrics.has(prefix + k)) continue;
        const conf = rel[k] && typeof rel[k] === 'object' && Number.isFinite(rel[k].confidence)
          ? ['(conf ' + rel[k].confidence.toFixed(2) + ', n=', up(rel[k].evidence_count ?? '?'), ')'] : null;
        block.append(metricRow(k, prefix + k, metrics.get(prefix + k), conf));
      }
      parts.push(block);
    });
  } else if (metrics.has('valence')) {
    parts.push(el('div', { class: 'muted', text: 'legacy emitter (flat valence)' }));
    parts.push(metricRow('valence', 'valence', metrics.get('valence')));
  }
  root.replaceChildren(...parts);
}

export async function loadAffect() {
  const agentId = state.agentId;
  if (!agentId) return;
  let result;
  try { result = await api('/api/affect?agent_id=' + encodeURIComponent(agentId)); } catch (_) { return; }
  if (agentId !== state.agentId) return; // a new session started meanwhile
  if (result.ok && result.body && typeof result.body === 'object') {
    state.lastAffectAt = result.body.emitted_at ?? null;
    pushAffectHistory(result.body);
    renderAffectPane(result.body);
  } else if (result.status === 404) {
    if (state.lastAffectAt === null) $('affect').replaceChildren(el('p', { class: 'muted', text: 'No snapshot yet for this agent.' }));
  } else {
    $('affect').replaceChildren(el('p', { class: 'state-note bad' }, 'Affect unavailable: ', ...describeError(result).parts));
  }
}

export function clearPadPolls() {
  for (const t of state.padTimers) clearTimeout(t);
  state.padTimers = [];
}

/** The affect emit lands 1-8 s after done: poll a bounded window until it moves. */
export function schedulePadPoll() {
  clearPadPolls();
  const beforeAt = state.lastAffectAt;
  let settled = false;
  state.padTimers = PAD_POLL_MS.map((ms) => setTimeout(async () => {
    if (settled || state.turnId) return; // a new turn started: never refresh stale state
    await loadAffect();
    if (state.lastAffectAt !== beforeAt) { settled = true; clearPadPolls(); }
  }, ms));
}

// ---- durable affect history (GET /api/affect/history) -------------------------------

/** The pane's heading names a server that keeps no history (`unavailable`: its answer), else says nothing. */
function showHistoryNote(unavailable) {
  let note = document.getElementById('affect-history-note');
  if (!unavailable) { if (note) note.remove(); return; }
  if (!note) {
    note = el('span', { id: 'affect-history-note', class: 'state-note muted' });
    document.querySelector('#affect-pane h2').append(note);
  }
  fill(note, ' · history not kept by this server: ', ...describeError(unavailable).parts);
}

/**
 * Seeds the drawn history from the server's log (oldest first, newest last), so it
 * survives a reload and spans sessions. A failure or an absent route leaves the
 * client-side history as it is; a server without a store (its typed 503
 * affect_history_unavailable) is named in the pane.
 */
export async function seedAffectHistory(agentId) {
  let result;
  try { result = await api('/api/affect/history?agent_id=' + encodeURIComponent(agentId)); } catch (_) { return; }
  if (agentId !== state.agentId || flight.replay) return;
  showHistoryNote(result.status === 503 && describeError(result).envelopeCode === 'affect_history_unavailable' ? result : null);
  const snaps = result.ok && isObject(result.body) && Array.isArray(result.body.snapshots) ? result.body.snapshots.filter(isObject) : [];
  if (!snaps.length) return;
  state.affectHist.clear();
  state.lastHistAt = null;
  for (const snap of snaps) pushAffectHistory(snap);
  const latest = snaps[snaps.length - 1];
  state.lastAffectAt = latest.emitted_at ?? null;
  renderAffectPane(latest);
}

// ---- tools and bifrost ---------------------------------------------------------------

function renderToolsInventory(inv) {
  const tools = Array.isArray(inv && inv.tools) ? inv.tools : [];
  const names = tools.map((t) => up((t && t.name) ?? '?'));
  const block = el('div', { class: 'tools-inventory' },
    el('div', { class: 'muted', text: names.length + ' tool' + (names.length === 1 ? '' : 's') + ' available at turn-fire' }),
    el('div', { class: 'mono' }, ...(names.length ? names.flatMap((n, i) => (i ? [', ', n] : [n])) : ['(none)'])));
  $('tools').querySelector('.tools-inventory').replaceWith(block); // live events below stay
}

/** label: parts (upstream names in up()); body: upstream text. */
export function addToolEvent(label, body) {
  const list = $('tool-events');
  list.prepend(el('li', {}, el('div', { class: 'mono' }, ...label), el('pre', { class: 'muted', text: up(body.length > 400 ? body.slice(0, 400) + '…' : body) })));
}

export async function loadTools(sessionId) {
  const result = await tryApi('/api/sessions/' + encodeURIComponent(sessionId) + '/tools');
  if (sessionId !== state.sessionId) return;
  flightTools(result);
  showToolsResult(result);
}

/** A tools answer ({ ok, status, body }, live or recorded) in the Tools pane. */
export function showToolsResult(result) {
  if (result.ok) renderToolsInventory(result.body);
  else $('tools').querySelector('.tools-inventory').replaceWith(el('div', { class: 'tools-inventory state-note bad' }, 'Tool inventory unavailable: ', ...describeError(result).parts));
}

function renderBifrostState(b) {
  const kv = el('dl', { class: 'kv' });
  const row = (k, ...parts) => kv.append(el('dt', { text: k }), el('dd', { class: 'mono' }, ...parts));
  row('agent', up(b.agent_id ?? ''));
  row('endpoint', up(b.endpoint ?? ''));
  row('model', up(b.model ?? ''));
  row('bound at', up(b.bound_at ?? ''));
  row('inflight turns', up(b.inflight_turns ?? ''));
  const caps = b.caps && typeof b.caps === 'object' ? Object.entries(b.caps) : [];
  row('caps', ...(caps.length ? caps.flatMap(([k, v], i) => [i ? ', ' : null, up(k), '=', up(typeof v === 'object' ? JSON.stringify(v) : v)]) : ['(none)']));
  const last = b.last_dispatch;
  if (last && typeof last === 'object') {
    row('last dispatch', up(last.turn_id ?? '?'), ' · ', up(last.latency_ms ?? '?'), ' ms · ', up(last.status ?? '?'));
  } else {
    row('last dispatch', 'none yet');
  }
  const tools = el('ul');
  for (const t of Array.isArray(b.tools) ? b.tools : []) {
    tools.append(el('li', {}, el('span', { class: 'mono', text: up((t && t.name) ?? '?') }), ' — ', el('span', { text: up((t && t.description) ?? '') })));
  }
  $('bifrost').replaceChildren(kv, el('div', { class: 'muted', text: 'tools' }), tools);
}

function bifrostStateNote(err) {
  if (err.envelopeCode === 'admin_key_not_configured') return ['Admin key not configured on the server (variable admin_key).', false];
  if (err.status === 404) return ['This session is not bound to a Bifrost endpoint (404).', false];
  if (err.status === 403) return ['The admin key\'s scope does not cover this session (403).', true];
  return [['Bifrost state unavailable: ', ...err.parts], true];
}

export async function loadBifrost(sessionId) {
  const result = await tryApi('/api/sessions/' + encodeURIComponent(sessionId) + '/bifrost');
  if (sessionId !== state.sessionId) return;
  flightBifrost(result);
  showBifrostResult(result);
  return result;
}

/** A BifrostState answer ({ ok, status, body }, live or recorded) in its pane. */
export function showBifrostResult(result) {
  if (result.ok && result.body) { renderBifrostState(result.body); return; }
  const err = describeError(result);
  const [text, bad] = bifrostStateNote(err);
  // Only a code the server sent is marked, never the http_<status> fallback.
  $('bifrost').replaceChildren(el('p', { class: 'state-note' + (bad ? ' bad' : ''), 'data-error-code': err.envelopeCode }, ...[].concat(text)));
}

// ---- admin events ---------------------------------------------------------------

/** The stream's state: kind for the light, parts (upstream text in up()) for the words. */
export function setAdminLight(kind, ...parts) {
  const light = $('admin-light');
  light.className = 'light ' + kind;
  light.setAttribute('aria-label', parts.map((p) => (p instanceof Upstream ? p.text : p)).join(''));
  fill($('admin-state'), ...parts);
}

export function openAdminEvents(sessionId) {
  if (state.adminES) { state.adminES.close(); state.adminES = null; } // one stream at a time
  if (!state.adminConfigured) { setAdminLight('error', 'admin_key_not_configured'); return; }
  const es = new EventSource('/api/admin/events?session_id=' + encodeURIComponent(sessionId));
  state.adminES = es;
  setAdminLight('reconnecting', 'connecting');
  es.addEventListener('open', () => { if (state.adminES === es) setAdminLight('live', 'live'); });
  es.addEventListener('error', () => {
    if (state.adminES !== es) return;
    if (es.readyState === EventSource.CLOSED) setAdminLight('error', 'closed');
    else if (!$('admin-state').textContent.startsWith('stream_error')) setAdminLight('reconnecting', 'reconnecting');
  });
  es.addEventListener('admin_event', (e) => {
    if (state.adminES !== es) return;
    let ev;
    try { ev = JSON.parse(e.data); } catch (_) { return; }
    if (!ev || typeof ev !== 'object') return;
    if (state.adminPaused) {
      state.adminPending.push(ev);
      if (state.adminPending.length > ADMIN_EVENTS_CAP) state.adminPending.shift();
      $('admin-pause').textContent = 'Resume (' + state.adminPending.length + ')';
      return;
    }
    renderAdminEvent(ev);
  });
  es.addEventListener('stream_error', (e) => {
    if (state.adminES !== es) return;
    let reason = 'unknown';
    try { reason = String(JSON.parse(e.data).reason ?? 'unknown'); } catch (_) { /* keep unknown */ }
    // The server ended the stream; EventSource reconnects with Last-Event-ID.
    setAdminLight('error', 'stream_error: ', up(reason));
    raiseAlert('stream_error', sessionId + ':' + reason, 'admin stream ended', 'stream_error ' + reason + ' · session ' + sessionId);
  });
}

export function adminEventMatches(li) {
  const needle = state.adminFilter.trim().toLowerCase();
  return needle === '' || li.dataset.search.includes(needle);
}

export function renderAdminEvent(ev) {
  const type = String(ev.type ?? '?');
  const time = ev.timestamp ? String(ev.timestamp) : new Date().toISOString();
  flightAdminShown(ev, time);
  const data = JSON.stringify(ev.data ?? {});
  const li = el('li', {},
    el('div', {}, el('span', { class: 'mono', text: up(type) }), ' ', el('span', { class: 'muted mono' }, up(time), ' · #', up(ev.id ?? ''))),
    el('pre', { class: 'muted', text: up(data) }));
  li.dataset.search = (type + ' ' + data).toLowerCase();
  li.hidden = !adminEventMatches(li);
  const list = $('admin-events');
  list.prepend(li);
  while (list.children.length > ADMIN_EVENTS_CAP) list.lastElementChild.remove();
}

export function toggleAdminPause() {
  state.adminPaused = !state.adminPaused;
  const button = $('admin-pause');
  button.setAttribute('aria-pressed', String(state.adminPaused));
  if (!state.adminPaused) {
    const pending = state.adminPending;
    state.adminPending = [];
    pending.forEach(renderAdminEvent);
    button.textContent = 'Pause';
  } else {
    button.textContent = 'Resume (0)';
  }
}
