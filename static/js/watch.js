// "Watch session…": a live session the console did not start, by its id (an operator
// has the id of a user's misbehaving session, not a session of their own). The id is
// checked with the server's rule for every session id before anything is asked; then
// its BifrostState and the admin event pane for it (admin-scoped, filtered to it by the
// server: INV-FILTER) are shown and recorded by the flight recorder, so the export and
// OTLP export hold what was shown. Its transcript is not available: a turn's stream
// reaches only the console that sent it, which the banner says.

import { $, clear, el, fill, up } from './dom.js';
import { describeError } from './api.js';
import { state } from './console-state.js';
import { flight, flightSessionStart } from './flight-recorder.js';
import { clearPadPolls, loadAffect, loadBifrost, openAdminEvents, seedAffectHistory } from './panes.js';

// The server's rule (crates/console-api/src/routes.rs): 1-128 of A-Z a-z 0-9 _ -.
const SESSION_ID = /^[A-Za-z0-9_-]{1,128}$/;

function banner(kind, ...parts) {
  const node = $('watch-banner');
  node.dataset.state = kind;
  node.classList.toggle('bad', kind !== 'watching');
  fill(node, ...parts);
  node.hidden = false;
}

/** Starts watching `raw` (the field's text), or shows why not; the running turn was ended by the caller. */
export async function watchSession(raw) {
  const id = String(raw).trim();
  if (!SESSION_ID.test(id)) {
    banner('invalid', 'Not a session id (invalid_session_id): session ids are 1-128 characters of A-Z a-z 0-9 _ -. Nothing was asked.');
    $('watch-banner').setAttribute('data-error-code', 'invalid_session_id');
    return false;
  }
  $('watch-banner').removeAttribute('data-error-code');
  state.sessionId = id;
  state.agentId = null; // learnt from its BifrostState, if it is bound
  state.watching = id;
  flightSessionStart(); // a new recording: what is shown of this session
  flight.session.agent = { agent_id: '', display_name: null };
  state.lastAffectAt = null;
  clearPadPolls();
  state.affectHist.clear();
  state.lastHistAt = null;
  fill($('session-id'), up(id));
  clear($('transcript'));
  clear($('tool-events'));
  clear($('admin-events'));
  state.adminPending = [];
  $('message').disabled = true;
  $('send').disabled = true;
  $('bifrost-refresh').disabled = false;
  $('tools').querySelector('.tools-inventory').replaceWith(el('div', { class: 'tools-inventory muted', text: 'Not read for a watched session (the inventory is its owner\'s).' }));
  $('affect').replaceChildren(el('p', { class: 'muted', text: 'No snapshot yet.' }));
  banner('watching', 'Watching session ', up(id), ', which this console did not start: its transcript is not available here (a turn\'s stream reaches only the console that sent it). ',
    'BifrostState and its admin events are live, and the flight recorder records them.');
  openAdminEvents(id);
  const result = await loadBifrost(id);
  if (!result || state.watching !== id) return true;
  if (result.ok && result.body && typeof result.body.agent_id === 'string') {
    flight.session.agent.agent_id = result.body.agent_id;
    state.agentId = result.body.agent_id;
    seedAffectHistory(state.agentId).then(loadAffect);
  } else if (result.status === 404) {
    banner('unknown', 'No live session ', up(id), ' upstream (', ...describeError(result).parts, '): the id is unknown or not bound to a Bifrost endpoint. ',
      'Admin events for it are still shown if any arrive.');
  } else if (!result.ok) {
    banner('unavailable', 'Session ', up(id), ': BifrostState unavailable (', ...describeError(result).parts, '). Admin events for it are still shown if any arrive.');
  }
  return true;
}

/** A session of this console's own starts: the watch ends. */
export function leaveWatch() {
  state.watching = null;
  const node = $('watch-banner');
  node.hidden = true;
  node.removeAttribute('data-error-code');
  clear(node);
}
