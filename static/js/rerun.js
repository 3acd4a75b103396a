// Re-run a recording on a live agent (docs/rerun.md): from the recording shown (a
// session document or an OTLP trace with content) or the live session, "Re-run on …"
// starts a new live session on the agent picked and sends the recorded user texts in
// order, each once the previous turn has ended, through the live path (transcript.js
// startSession / sendText: every pane live as usual). When the run ends or is
// stopped, the recording (A) and the re-run (B) are compared (run-compare.js) and the
// comparison is shown (run-compare-view.js); each row opens the two-turn Compare.

import { $, clear, el, fill, up } from './dom.js';
import { state } from './console-state.js';
import { IMPORT_MAX_BYTES, ImportRefused, buildExport, downloadJson, flight, flightLeaveReplay } from './flight-recorder.js';
import { parseImportText } from './otlp.js';
import { RerunRefused, comparisonDocument, rerunPlan } from './run-compare.js';
import { renderRunComparison } from './run-compare-view.js';
import { openComparePair } from './compare-view.js';
import { cancelTurn, sendText, startSession } from './transcript.js';
import { leaveReplayToEmpty } from './replay.js';

// phase: idle, running, cancelling, then ended / cancelled / interrupted (a comparison),
// or failed (no session could be started). shown: the recording the sheet was opened on;
// a: the recording compared; b: the re-run as recorded (or loaded from a file).
const run = {
  phase: 'idle', shown: null, a: null, texts: [], agentId: null, agentName: null, sessionId: null, sent: 0,
  stop: false, b: null, recording: null, comparison: null, error: null,
};

const clone = (v) => JSON.parse(JSON.stringify(v));
const agentLabel = (agent) => String(agent.display_name ?? agent.agent_id);

function showRefusal(code, message) {
  const node = $('rerun-error');
  node.setAttribute('data-error-code', code);
  fill(node, 'Re-run refused: ' + code + ' — ' + message + '.');
  node.hidden = false;
}

/** The recording a re-run would send: the one shown, else the live session's. */
function currentRecording() {
  if (flight.replay) return { source: 'recording', doc: clone(buildExport()) };
  if (flight.session) {
    if (state.turnRunning) throw new RerunRefused('rerun_turn_running', 'a turn of the live session is still running: wait for it to end, or cancel it');
    return { source: 'live session', doc: clone(buildExport()) };
  }
  throw new RerunRefused('rerun_no_recording', 'nothing to re-run: import a recording, or start a session and run a turn');
}

/** "Re-run on …": the sheet with the recording's summary and the agent picker, or why it cannot run. */
export function openRerun() { openSetup(currentRecording); }

/** "Re-run A again…": the last comparison's recording, on an agent picked again. */
export function rerunAgain() { if (run.a) openSetup(() => ({ source: 'recording A', doc: run.a })); }

function openSetup(recording) {
  if (run.phase === 'running' || run.phase === 'cancelling') return;
  $('rerun-error').hidden = true;
  $('rerun-result').hidden = true;
  $('rerun-setup').hidden = false;
  $('rerun-start').disabled = true;
  $('rerun-load').disabled = true;
  const select = $('rerun-agent');
  clear(select);
  clear($('rerun-note'));
  $('rerun-pane').hidden = false;
  let rec;
  try {
    rec = recording();
    run.shown = rec.doc;
    $('rerun-load').disabled = false; // comparing with a file needs no user text
    fill($('rerun-source'), 'From the ' + rec.source + ' ', up(rec.doc.session_id), ' · agent ', up(agentLabel(rec.doc.agent)), ' · ' + rec.doc.turns.length + ' turn' + (rec.doc.turns.length === 1 ? '' : 's'));
    const plan = rerunPlan(rec.doc);
    if (!state.agents.length) throw new RerunRefused('rerun_no_agents', 'this console lists no agents to run it on');
    run.texts = plan.texts;
    for (const agent of state.agents) select.append(el('option', { value: agent.agent_id, text: agent.display_name ?? agent.agent_id }));
    const offered = state.agents.some((agent) => agent.agent_id === plan.agent_id);
    select.value = offered ? plan.agent_id : state.agents[0].agent_id;
    fill($('rerun-note'), plan.texts.length + ' user text' + (plan.texts.length === 1 ? '' : 's') + ' will be sent in order, each once the previous turn has ended, in a new live session. ',
      ...(offered ? ['The recorded agent is picked.'] : ['The recorded agent ', up(plan.agent_id), ' is not offered here: pick one.']));
    $('rerun-start').disabled = false;
    select.focus();
  } catch (e) {
    if (!(e instanceof RerunRefused)) throw e;
    if (!rec) { clear($('rerun-source')); run.shown = null; }
    run.texts = [];
    showRefusal(e.code, e.message);
    $('rerun-close').focus();
  }
}

export function closeRerun() {
  $('rerun-pane').hidden = true;
  $('rerun-open').focus();
}

function setBar(text) {
  $('rerun-state').textContent = text;
  const busy = run.phase === 'running' || run.phase === 'cancelling';
  $('rerun-cancel').disabled = run.phase !== 'running';
  $('rerun-show').disabled = run.comparison === null;
  $('rerun-open').disabled = busy;
}

const progress = (what) => 'turn ' + run.sent + '/' + run.texts.length + ' · ' + what;

/** Start re-run: a new live session on the agent picked, then every recorded text in order. */
export async function startRerun() {
  if (!run.shown || !run.texts.length || run.phase === 'running' || run.phase === 'cancelling') return;
  const agentId = $('rerun-agent').value;
  const agent = state.agents.find((x) => x.agent_id === agentId);
  if (!agent) return;
  Object.assign(run, { phase: 'running', a: run.shown, agentId, agentName: agentLabel(agent), sessionId: null, sent: 0, stop: false, b: null, recording: null, comparison: null, error: null });
  $('rerun-pane').hidden = true;
  const fromRecording = flight.replay !== null;
  // Leave the recording at once (the bar below takes its place in the same frame), not when the session answers.
  flightLeaveReplay();
  fill($('rerun-label'), 'Re-run on ', up(run.agentName), ':');
  $('rerun-bar').hidden = false;
  setBar(progress('starting'));
  $('rerun-cancel').focus();
  $('agent-select').value = agentId;
  if (!(await startSession())) {
    run.phase = 'failed';
    run.error = $('config-status').textContent;
    if (fromRecording) leaveReplayToEmpty();
    setBar('');
    fill($('rerun-state'), 'failed · ', up(run.error)); // the header's words, with the upstream's code
    $('rerun-dismiss').focus();
    return;
  }
  run.sessionId = state.sessionId;
  run.b = clone(buildExport());
  run.recording = flight.session; // its turns, should the session be left mid-turn
  $('message').disabled = true; // the composer is the re-run's until it ends
  $('rerun-cancel').focus(); // startSession gave the composer focus
  let end = 'ended';
  for (const text of run.texts) {
    if (run.stop) { end = 'cancelled'; break; }
    if (state.sessionId !== run.sessionId) { end = 'interrupted'; break; }
    run.sent += 1;
    setBar(progress('running'));
    await sendText(text); // resolves once the turn's stream is over: the next text waits for its terminal
    if (state.sessionId !== run.sessionId) { end = 'interrupted'; break; }
    const last = run.recording.turns[run.recording.turns.length - 1];
    if (last && last.terminal && last.terminal.kind === 'cancelled') { end = 'cancelled'; break; } // an error turn is recorded and the run goes on
  }
  if (run.stop && end === 'ended') end = 'cancelled';
  finish(end);
}

function finish(end) {
  if (state.sessionId === run.sessionId) {
    run.b = clone(buildExport());
    $('message').disabled = false;
  } else {
    run.b.turns = clone(run.recording.turns); // left: every turn sent, the last one as far as it got
  }
  run.phase = end;
  run.comparison = comparisonDocument(run.a, run.b, { state: end, planned: run.texts.length, sent: run.sent }, new Date().toISOString());
  setBar(progress(end));
  showComparison();
}

/**
 * Compare with a file: the recording shown (A) against a run loaded from a file (B: a
 * re-run exported earlier, a session document or an OTLP trace), checked as an import is.
 */
export async function loadRerunFile(file) {
  if (!file || !run.shown || run.phase === 'running' || run.phase === 'cancelling') return;
  $('rerun-error').hidden = true;
  let doc;
  try {
    if (file.size > IMPORT_MAX_BYTES) throw new ImportRefused('import_too_large', 'the file is larger than ' + (IMPORT_MAX_BYTES >> 20) + ' MiB');
    let text;
    try { text = await file.text(); } catch (_) { throw new ImportRefused('import_unreadable', 'the file could not be read'); }
    doc = parseImportText(text);
  } catch (e) {
    if (!(e instanceof ImportRefused)) throw e;
    const node = $('rerun-error');
    node.setAttribute('data-error-code', e.code);
    fill(node, 'File refused: ' + e.code + ' — ' + e.message + '.');
    node.hidden = false;
    return;
  }
  Object.assign(run, { phase: 'file', a: run.shown, b: doc });
  run.comparison = comparisonDocument(run.a, run.b, { state: 'file', planned: run.a.turns.length, sent: run.b.turns.length }, new Date().toISOString());
  $('rerun-show').disabled = false;
  showComparison();
}

/** Cancel re-run: no further text is sent, and the running turn is cancelled (its stream closed). */
export async function cancelRerun() {
  if (run.phase !== 'running') return;
  run.stop = true;
  run.phase = 'cancelling';
  setBar(progress('cancelling'));
  if (state.turnRunning) await cancelTurn();
}

/** The comparison sheet of the last re-run. */
export function showComparison() {
  if (!run.comparison) return;
  $('rerun-error').hidden = true;
  $('rerun-setup').hidden = true;
  $('rerun-result').hidden = false;
  renderRunComparison(run.comparison);
  $('rerun-pane').hidden = false;
  $('rerun-out').focus();
}

/** Hides the progress bar of a re-run that is over. */
export function dismissRerunBar() {
  if (run.phase === 'running' || run.phase === 'cancelling') return;
  $('rerun-bar').hidden = true;
  $('rerun-open').focus();
}

export function exportComparison() {
  const c = run.comparison;
  if (c) downloadJson('ratatoskr-run-comparison-', c.a.session_id + '_vs_' + c.b.session_id, Object.assign({}, c, { exported_at: new Date().toISOString() }));
}

/** Either run as a session document (B is the live session's own export too). */
export function exportRun(which) {
  const doc = which === 'a' ? run.a : run.b;
  if (run.comparison && doc) downloadJson('ratatoskr-session-', doc.session_id, Object.assign({}, doc, { exported_at: new Date().toISOString() }));
}

/** A row's button: that turn of A against the same turn of B in the two-turn Compare. */
export function openRunPair(button) {
  const i = Number(button.getAttribute('data-turn')) - 1;
  if (!run.comparison || !run.a.turns[i] || !run.b.turns[i]) return;
  openComparePair({ key: 'run-a', label: 'A (recording)', doc: run.a }, i, { key: 'run-b', label: 'B (re-run)', doc: run.b }, i, button);
}

/** The test hook's view (main.js). */
export function rerunStatus() {
  return { phase: run.phase, sent: run.sent, planned: run.texts.length, session_id: run.sessionId, agent_id: run.agentId, texts: run.texts.slice(), comparison: run.comparison ? clone(run.comparison) : null };
}
