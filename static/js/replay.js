// An exported session opened read-only: the file (a session document or an OTLP/JSON
// trace, otlp.js) checked whole first, every pane drawn from it through the live
// renderers, no live call; the way back to the empty console; and the OTLP export.

import { $, clear, el, fill, setText, up } from './dom.js';
import { state } from './console-state.js';
import {
  IMPORT_MAX_BYTES, ImportRefused, TURN_TERMINALS, buildExport, downloadJson, flight, flightLeaveReplay, flightStopStall, renderTurnFlight,
} from './flight-recorder.js';
import { parseImportText, sessionToOtlp } from './otlp.js';
import {
  clearPadPolls, pushAffectHistory, renderAdminEvent, renderAffectPane, setAdminLight, showBifrostResult, showToolsResult,
} from './panes.js';
import { appendMessage, handleTurnEvent, hideAwaiting, hideThinkingNote, terminalParts } from './transcript.js';

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
  if (state.adminES) { state.adminES.close(); state.adminES = null; }
  clearPadPolls();
  flightStopStall();
  flight.live = null;
  const controller = state.turnAbort;
  state.sessionId = null;
  state.agentId = null;
  state.turnAbort = null;
  state.turnRunning = false;
  if (controller) controller.abort(); // its terminal() finds no session: no bifrost read
  flight.session = null;
}

/** Shows a validated document read-only: every pane drawn from it, no live call. */
function enterReplay(doc) {
  stopLive();
  flight.replay = doc;
  state.turnNodes = null;
  hideThinkingNote();
  hideAwaiting();
  for (const id of ['message', 'send', 'cancel', 'bifrost-refresh']) $(id).disabled = true;
  setText($('session-id'), up(doc.session_id));
  const banner = $('replay-banner');
  fill(banner, 'Recorded session (read-only): agent ', up(doc.agent.display_name ?? doc.agent.agent_id), ' · session ', up(doc.session_id),
    ' · exported ', up(doc.exported_at), ' · ' + doc.turns.length + ' turn' + (doc.turns.length === 1 ? '' : 's') + '. No live calls are made. ',
    el('button', { type: 'button', id: 'replay-close', text: 'Leave recording' }));
  banner.hidden = false;
  $('console-view').classList.add('replay');
  $('export-session').disabled = false;
  $('export-otlp').disabled = false;

  // Transcript (and the Tools pane's live events), through the live renderers.
  clear($('transcript'));
  clear($('tool-events'));
  for (const turn of doc.turns) {
    appendMessage('user', turn.user_text);
    const nodes = appendMessage('assistant', '');
    nodes.reasoning = null;
    state.turnNodes = nodes;
    for (const e of turn.events) if (!TURN_TERMINALS.includes(e.event)) handleTurnEvent(e.event, e.data);
    hideThinkingNote();
    state.turnNodes = null;
    if (turn.terminal) nodes.node.append(el('div', { class: 'status-line ' + turn.terminal.kind, role: 'status' }, ...terminalParts(turn.terminal.kind, turn.terminal.data)));
    renderTurnFlight(turn, nodes.node);
  }
  state.turnId = null;

  // Tools inventory and the last BifrostState answer.
  if (doc.tools) showToolsResult(doc.tools);
  else $('tools').querySelector('.tools-inventory').replaceWith(el('div', { class: 'tools-inventory muted', text: 'No tool inventory was recorded.' }));
  const snaps = doc.bifrost_snapshots;
  if (snaps.length) showBifrostResult(snaps[snaps.length - 1]);
  else $('bifrost').replaceChildren(el('p', { class: 'muted', text: 'No BifrostState was recorded.' }));

  // Admin events as they were shown (oldest first; the pane puts the newest on top).
  clear($('admin-events'));
  state.adminPending = [];
  for (const a of doc.admin_events) renderAdminEvent(Object.assign({}, a.event, { timestamp: a.shown_at }));
  setAdminLight('recorded', 'recorded');

  // Affect: the recorded history through the live HIST_CAP / dedupe rules.
  state.affectHist.clear();
  state.lastHistAt = null;
  state.lastAffectAt = null;
  for (const snap of doc.affect_history) pushAffectHistory(snap);
  const latest = doc.affect_history[doc.affect_history.length - 1];
  if (latest) renderAffectPane(latest);
  else $('affect').replaceChildren(el('p', { class: 'muted', text: 'No affect snapshot was recorded.' }));
}

export function leaveReplayToEmpty() {
  flightLeaveReplay();
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
