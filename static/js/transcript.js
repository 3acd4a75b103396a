// The console view's session bar and transcript: the config and agent list, a new
// session, and the turn stream (reasoning, text, tool calls, the terminal line).

import { $, clear, el, fill, setText, up } from './dom.js';
import { api, describeError, readResult, tryApi } from './api.js';
import { readSse } from './sse.js';
import { state } from './console-state.js';
import { raiseAlert } from './alerts.js';
import { leaveWatch } from './watch.js';
import {
  TURN_TERMINALS, flight, flightEvent, flightSessionStart, flightSseHooks, flightStopStall, flightTurnCut, flightTurnEnd, flightTurnStart,
} from './flight-recorder.js';
import {
  addToolEvent, clearPadPolls, loadAffect, loadBifrost, loadTools, openAdminEvents, schedulePadPoll, seedAffectHistory,
} from './panes.js';

const THINKING_PHRASES = ['is thinking', 'is weighing it', 'is reasoning', 'is considering', 'is working it out'];

function agentName() {
  if (flight.replay) return String(flight.replay.agent.display_name ?? flight.replay.agent.agent_id); // an imported session
  const agent = state.agents.find((a) => a && a.agent_id === state.agentId);
  return String((agent && agent.display_name) || state.agentId || 'Agent');
}

// ---- session bar ------------------------------------------------------------

export async function loadConfig() {
  const status = $('config-status');
  let result;
  try { result = await api('/api/config'); } catch (_) { status.textContent = 'server unreachable'; return; }
  if (!result.ok || !result.body) {
    const why = describeError(result);
    // console_access = signed-in: the Playground view's sign-in opens the console too.
    const hint = ['console_sign_in_required', 'console_role_required'].includes(why.envelopeCode)
      ? ' (sign in under Playground with a session that may use the console, then reload)' : undefined;
    fill(status, 'config unavailable: ', ...why.parts, hint);
    return;
  }
  const config = result.body;
  setText($('bifrost-host'), up(config.bifrost_visible_host ?? ''));
  state.adminConfigured = config.admin_configured === true;
  const badge = $('admin-badge');
  badge.hidden = state.adminConfigured;
  badge.textContent = 'admin key not configured';
  badge.classList.toggle('bad', !state.adminConfigured);
  state.agents = Array.isArray(config.agents) ? config.agents.filter((a) => a && typeof a.agent_id === 'string') : [];
  const select = $('agent-select');
  clear(select);
  // An <option> is drawn in a box of its own: its text needs no isolate.
  for (const agent of state.agents) {
    select.append(el('option', { value: agent.agent_id, text: agent.display_name ?? agent.agent_id }));
  }
  // The config answer embeds the agents call's own error envelope.
  if (config.agents_error) fill(status, 'agents unavailable: ', up(describeError({ body: config.agents_error }).envelopeCode ?? 'unknown'));
  $('start-session').disabled = state.agents.length === 0;
}

/** A new live session on the agent picked; true once it is live (rerun.js waits for it). */
export async function startSession() {
  const agentId = $('agent-select').value;
  if (!agentId) return false;
  if (state.turnRunning) await cancelTurn();
  $('start-session').disabled = true;
  const result = await tryApi('/api/sessions', {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ agent_id: agentId }),
  });
  $('start-session').disabled = false;
  if (!result.ok || !result.body || typeof result.body.session_id !== 'string') {
    fill($('config-status'), 'could not start a session: ', ...describeError(result).parts);
    return false;
  }
  $('config-status').textContent = '';
  state.sessionId = result.body.session_id;
  state.agentId = agentId;
  leaveWatch();
  flightSessionStart(); // the flight recorder's new recording (it leaves an imported one)
  state.lastAffectAt = null;
  clearPadPolls();
  state.affectHist.clear();
  state.lastHistAt = null;
  setText($('session-id'), up(state.sessionId));
  clear($('transcript'));
  clear($('tool-events'));
  clear($('admin-events'));
  state.adminPending = [];
  $('affect').replaceChildren(el('p', { class: 'muted', text: 'No snapshot yet.' }));
  $('message').disabled = false;
  $('send').disabled = false;
  $('bifrost-refresh').disabled = false;
  $('message').focus();
  openAdminEvents(state.sessionId);
  loadTools(state.sessionId);
  loadBifrost(state.sessionId);
  seedAffectHistory(agentId).then(loadAffect); // the durable history first, then the current snapshot
  return true;
}

// ---- transcript and the turn stream ------------------------------------------

export function appendMessage(role, text) {
  const who = role === 'user' ? 'you' : up(agentName());
  const textNode = el('div', { class: 'text', text: up(text) });
  const node = el('div', { class: 'msg ' + role }, el('div', { class: 'who', text: who }), textNode);
  $('transcript').append(node);
  scrollTranscript();
  return { node, textNode };
}

function scrollTranscript() {
  const t = $('transcript');
  t.scrollTop = t.scrollHeight;
}

/** "awaiting first token · N s", counted on the turn's clock (the replay clock in a replay). */
function showAwaiting(parent, clock) {
  hideAwaiting();
  const started = clock.now();
  const node = el('div', { class: 'awaiting', role: 'status' });
  const tick = () => { node.textContent = 'awaiting first token · ' + ((clock.now() - started) / 1000).toFixed(1) + ' s'; };
  tick();
  parent.append(node);
  state.awaiting = { node, interval: setInterval(tick, 250) };
}

export function hideAwaiting() {
  if (!state.awaiting) return;
  clearInterval(state.awaiting.interval);
  state.awaiting.node.remove();
  state.awaiting = null;
}

/** Reasoning indicator: clearly not engine output; one per turn; its phrase moves every 1.2 s of the turn's clock. */
function showThinkingNote(clock) {
  if (state.thinking || !state.turnNodes) return;
  hideAwaiting();
  const started = clock.now();
  let shown = -1;
  const node = el('div', { class: 'thinking-note', role: 'status' });
  const render = () => {
    const i = Math.floor((clock.now() - started) / 1200);
    if (i === shown) return;
    shown = i;
    fill(node, '✦ ', up(agentName()), ' ' + THINKING_PHRASES[i % THINKING_PHRASES.length]);
  };
  render();
  state.turnNodes.node.insertBefore(node, state.turnNodes.textNode);
  state.thinking = { node, interval: setInterval(render, 250) };
}

export function hideThinkingNote() {
  if (!state.thinking) return;
  clearInterval(state.thinking.interval);
  state.thinking.node.remove();
  state.thinking = null;
}

function setTurnControls(running) {
  state.turnRunning = running;
  $('send').disabled = running || !state.sessionId;
  $('cancel').disabled = !running;
}

// ---- one turn, live or replayed -------------------------------------------------------
// A live turn (sendTurn: its stream) and a replayed one (replay.js: the recording on
// the replay clock) take the same path: turnBegin, then turnEvent per event, then
// terminal() through the event or turnEndByConsole. A replayed turn makes no request
// and leaves the composer alone.

/** A turn starts being shown; its view ({ ended, replayed, clock }) is the token its events carry. */
export function turnBegin(text, replayOf = null, clock = performance) {
  clearPadPolls();
  state.turnId = 'pending';
  appendMessage('user', text);
  const nodes = appendMessage('assistant', '');
  nodes.reasoning = null;
  state.turnNodes = nodes;
  const view = { ended: false, replayed: replayOf !== null, clock };
  state.turnView = view;
  flightTurnStart(text, nodes, replayOf, clock);
  showAwaiting(nodes.node, clock);
  if (!view.replayed) setTurnControls(true);
  return view;
}

/** The one function every turn event goes through: recorded, then drawn (a terminal ends the turn). */
export function turnEvent(view, name, data) {
  if (view.ended || state.turnView !== view) return; // after its terminal, or a turn no longer shown
  flightEvent(name, data);
  if (TURN_TERMINALS.includes(name)) terminal(name, data);
  else handleTurnEvent(name, data, view.clock);
}

/** The console ends a turn its stream did not (stopped early, network, refused, aborted). */
export function turnEndByConsole(view, kind, data) {
  if (view.ended || state.turnView !== view) return;
  terminal(kind, data);
}

/** A replayed turn left without a terminal (the recording ends there, or the replay is restarted or left). */
export function turnDrop(view, withTimeline) {
  if (state.turnView !== view) return;
  view.ended = true;
  hideThinkingNote();
  hideAwaiting();
  if (withTimeline) flightTurnCut(state.turnNodes);
  else { flightStopStall(); flight.live = null; }
  state.turnNodes = null;
  state.turnView = null;
  state.turnId = null;
}

const canSend = (text) => Boolean(state.sessionId) && !state.turnRunning && text.trim() !== '';

/** The composer's message as a turn. */
export async function sendTurn() {
  const input = $('message');
  const text = input.value;
  if (!canSend(text)) return;
  input.value = '';
  await sendText(text);
}

/**
 * One turn of `text` on the live session, through the live path (the composer's, and a
 * re-run's: rerun.js); resolves once its stream is over and the turn has ended.
 */
export async function sendText(text) {
  if (!canSend(text)) return;
  const view = turnBegin(text);
  const controller = new AbortController();
  state.turnAbort = controller;
  const onEvent = (name, raw) => {
    let data = {};
    try { data = JSON.parse(raw); } catch (_) { data = { raw }; }
    if (data === null || typeof data !== 'object') data = { value: data };
    turnEvent(view, name, data);
  };
  // A stream that stops without done/error/cancelled still ends the turn, once.
  const unfinished = (bodyEnded) => {
    if (bodyEnded) turnEndByConsole(view, 'error', { code: 'stream_ended', message: 'the stream ended before the turn finished' });
    else if (controller.signal.aborted) turnEndByConsole(view, 'cancelled', {});
    else turnEndByConsole(view, 'error', { code: 'network_error', message: 'the connection to the server failed' });
  };
  try {
    const response = await fetch('/api/sessions/' + encodeURIComponent(state.sessionId) + '/turns', {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text, agent_id: state.agentId }), signal: controller.signal,
    });
    if (!response.ok) {
      const refused = describeError(await readResult(response));
      turnEndByConsole(view, 'error', { code: refused.code, message: 'the turn was refused (HTTP ' + refused.status + ')' });
      return;
    }
    unfinished(await readSse(response, onEvent, { dispatchTail: true, ...flightSseHooks() }));
  } catch (_) {
    unfinished(false);
  }
}

function handleTurnEvent(name, data, clock) {
  const nodes = state.turnNodes;
  if (!nodes) return;
  switch (name) {
    case 'turn.started':
      if (typeof data.turn_id === 'string') state.turnId = data.turn_id;
      break;
    case 'thinking': {
      showThinkingNote(clock);
      if (!nodes.reasoning) {
        nodes.reasoningText = el('pre', { class: 'muted', text: up('') });
        nodes.reasoning = el('details', { class: 'reasoning' }, el('summary', { text: 'reasoning' }), nodes.reasoningText);
        nodes.node.insertBefore(nodes.reasoning, nodes.textNode);
      }
      nodes.reasoningText.textContent += String(data.delta ?? '');
      break;
    }
    case 'text':
      hideThinkingNote();
      hideAwaiting();
      nodes.textNode.textContent += String(data.delta ?? '');
      break;
    case 'tool_call':
    case 'tool_result': {
      hideAwaiting();
      const isResult = name === 'tool_result';
      const body = isResult ? String(data.output ?? '') : JSON.stringify(data.arguments ?? {}, null, 2);
      const label = [isResult ? 'result · ' : 'call · ', up(data.name ?? '?'), data.is_error === true ? ' · error' : null];
      const details = el('details', { class: 'tool' + (data.is_error === true ? ' is-error' : '') },
        el('summary', { class: 'mono' }, ...label), el('pre', { text: up(body) }));
      nodes.node.insertBefore(details, nodes.textNode);
      addToolEvent(label, body);
      break;
    }
    default:
      break; // unknown event types are ignored, never rendered raw
  }
  scrollTranscript();
}

/** A terminal status line's words (upstream text in up()). */
export function terminalParts(kind, data) {
  let parts;
  if (kind === 'done') {
    const usage = data.usage || {};
    parts = ['done · ', up(usage.input_tokens ?? '?'), ' in / ', up(usage.output_tokens ?? '?'), ' out · ', up(data.finish_reason ?? '')];
  } else if (kind === 'cancelled') {
    parts = ['cancelled'];
  } else {
    parts = ['error · ', up(data.code ?? 'unknown')];
    if (data.message) parts.push(' — ', up(data.message));
  }
  return parts;
}

function terminal(kind, data) {
  const view = state.turnView;
  if (kind === 'error' && view && !view.replayed) {
    const key = state.sessionId + ':' + (flight.live ? flight.live.turn.index : '?');
    raiseAlert('error', key, 'turn ended in error', 'error ' + String(data.code ?? 'unknown') + ' · session ' + state.sessionId);
  }
  if (view) view.ended = true;
  hideThinkingNote();
  hideAwaiting();
  const nodes = state.turnNodes;
  if (nodes) nodes.node.append(el('div', { class: 'status-line ' + kind, role: 'status' }, ...terminalParts(kind, data)));
  flightTurnEnd(kind, data, nodes); // the turn's timeline, under its status line
  state.turnNodes = null;
  state.turnView = null;
  state.turnAbort = null;
  state.turnId = null;
  scrollTranscript();
  if (view && view.replayed) return; // a replay makes no request and leaves the composer disabled
  setTurnControls(false);
  if (kind === 'done') schedulePadPoll();
  if (state.sessionId) loadBifrost(state.sessionId);
}

export async function cancelTurn() {
  if (!state.turnRunning) return;
  const turnId = state.turnId;
  const controller = state.turnAbort;
  $('cancel').disabled = true;
  if (turnId && turnId !== 'pending') {
    try {
      await fetch('/api/sessions/' + encodeURIComponent(state.sessionId) + '/turns/' + encodeURIComponent(turnId) + '/cancel', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    } catch (_) { /* the abort below still ends the turn */ }
    // The upstream's `cancelled` event normally ends the turn; abort if it never comes.
    setTimeout(() => { if (state.turnAbort === controller && controller) controller.abort(); }, 3000);
  } else if (controller) {
    controller.abort();
  }
}
