// The console's entry point (index.html loads only this module): the two views and
// the URL fragment that picks one, every DOM listener of both, the read-only test
// hook window.ratatoskrConsole, and the first config read.

import { $ } from './dom.js';
import { sseParser } from './sse.js';
import { state } from './console-state.js';
import { buildExport, detectBuffering, exportSession, flight, parseSessionDocument, turnTimeline } from './flight-recorder.js';
import { adminEventMatches, loadBifrost, sparkline, toggleAdminPause, trendDelta } from './panes.js';
import { cancelTurn, loadConfig, sendTurn, startSession } from './transcript.js';
import { alerts, alertsVisibilityChanged, renderAlertsButton, toggleAlerts } from './alerts.js';
import { watchSession } from './watch.js';
import {
  exportOtlp, importFile, leaveReplayToEmpty, replayLog, replayRestart, replaySetSpeed, replayStatus, replayStep, replayToggle, replayedTurns,
} from './replay.js';
import { closeCompare, loadCompareFile, openCompare, refreshCompareChoices, runCompare } from './compare-view.js';
import { compareTurns, jsonDiff, turnFacts, wordDiff } from './compare.js';
import { otlpToSession, parseImportText, sessionToOtlp } from './otlp.js';
import {
  cancelRerun, closeRerun, dismissRerunBar, exportComparison, exportRun, loadRerunFile, openRerun, openRunPair, rerunAgain, rerunStatus, showComparison, startRerun,
} from './rerun.js';
import { compareRuns, rerunPlan, tokenJaccard } from './run-compare.js';
import {
  dropToken, mintToken, pg, pgLoadMe, pgOpenTrace, pgSearch, pgSendChat, pgSignIn, pgSignOut, renderAuth,
} from './playground.js';

// The view lives in the URL fragment (#console, #playground): a reload stays on
// it, and back/forward move between views (hashchange).
const VIEWS = ['console', 'playground'];

function viewFromHash() {
  const name = location.hash.slice(1);
  return VIEWS.includes(name) ? name : 'console';
}

/** A tab's action: a new history entry; the hashchange shows the view. */
function selectView(name) {
  if (location.hash === '#' + name) showView(name);
  else location.hash = name;
}

function showView(name) {
  const playground = name === 'playground';
  $('console-view').hidden = playground;
  // The header shows each view's own controls only; hidden ones leave the tab order.
  $('console-bar').hidden = playground;
  $('playground-view').hidden = !playground;
  $('tab-console').setAttribute('aria-pressed', String(!playground));
  $('tab-playground').setAttribute('aria-pressed', String(playground));
  if (playground && !pg.started) { pg.started = true; pgLoadMe(); }
}

// ---- wiring -------------------------------------------------------------------
// Every DOM listener of both views, attached once, here. Buttons made later (per
// chat turn, the replay banner's) are handled by delegation on their container.
// Each admin EventSource's own listeners stay in openAdminEvents (panes.js): they
// live and die with that stream.

function wire() {
  const onSubmit = (id, fn) => $(id).addEventListener('submit', (e) => { e.preventDefault(); fn(); });
  const onEnter = (id, fn) => $(id).addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); fn(); }
  });

  // Console view.
  $('start-session').addEventListener('click', startSession);
  onSubmit('watch-form', async () => { if (state.turnRunning) await cancelTurn(); watchSession($('watch-id').value); });
  onSubmit('composer', sendTurn);
  onEnter('message', sendTurn);
  $('cancel').addEventListener('click', cancelTurn);
  document.addEventListener('keydown', (e) => { if (e.key === 'Escape' && state.turnRunning) { e.preventDefault(); cancelTurn(); } });
  $('bifrost-refresh').addEventListener('click', () => { if (state.sessionId) loadBifrost(state.sessionId); });
  $('admin-pause').addEventListener('click', toggleAdminPause);
  $('admin-filter').addEventListener('input', (e) => {
    state.adminFilter = e.target.value;
    for (const li of $('admin-events').children) li.hidden = !adminEventMatches(li);
  });
  window.addEventListener('pagehide', () => { if (state.adminES) state.adminES.close(); });
  // Alerts while the tab is hidden (alerts.js): the button asks for permission once.
  $('alerts-toggle').addEventListener('click', toggleAlerts);
  document.addEventListener('visibilitychange', alertsVisibilityChanged);

  // Playground view.
  $('tab-console').addEventListener('click', () => selectView('console'));
  $('tab-playground').addEventListener('click', () => selectView('playground'));
  window.addEventListener('hashchange', () => showView(viewFromHash()));
  onSubmit('pg-login-form', pgSignIn);
  $('pg-signout').addEventListener('click', pgSignOut);
  $('pg-mint').addEventListener('click', () => { const id = $('pg-gateway').value; if (id) mintToken(id); });
  $('pg-gateway').addEventListener('change', dropToken);
  onSubmit('pg-chat-form', pgSendChat);
  onEnter('pg-draft', pgSendChat);
  onSubmit('pg-search-form', pgSearch);
  onSubmit('pg-trace-form', () => pgOpenTrace($('pg-trace-id').value));
  $('pg-chat').addEventListener('click', (e) => {
    const button = e.target instanceof Element ? e.target.closest('button') : null;
    if (!button) return;
    if (button.classList.contains('pg-signin-again')) { renderAuth(); $('pg-email').focus(); return; }
    const traceId = pg.traceButtons.get(button);
    if (traceId !== undefined) { $('pg-trace-id').value = traceId; pgOpenTrace(traceId); }
  });

  // The console view's flight recorder: export, import (button or a dropped file), leaving a recording.
  $('export-session').addEventListener('click', exportSession);
  $('export-otlp').addEventListener('click', exportOtlp);
  $('import-session').addEventListener('click', () => $('import-file').click());
  $('import-file').addEventListener('change', (e) => {
    const file = e.target.files && e.target.files[0];
    e.target.value = '';
    importFile(file);
  });
  $('replay-banner').addEventListener('click', (e) => {
    if (e.target instanceof Element && e.target.id === 'replay-close') leaveReplayToEmpty();
  });
  // The replay bar (replay.js): play / pause / replay, step, restart, speed.
  $('replay-play').addEventListener('click', replayToggle);
  $('replay-step').addEventListener('click', replayStep);
  $('replay-restart').addEventListener('click', replayRestart);
  $('replay-speed').addEventListener('change', (e) => replaySetSpeed(e.target.value));
  // The Compare pane: two turns side by side (compare-view.js).
  $('compare-open').addEventListener('click', openCompare);
  $('compare-close').addEventListener('click', closeCompare);
  $('compare-run').addEventListener('click', runCompare);
  $('compare-refresh').addEventListener('click', refreshCompareChoices);
  $('compare-load').addEventListener('click', () => $('compare-file').click());
  $('compare-file').addEventListener('change', (e) => {
    const file = e.target.files && e.target.files[0];
    e.target.value = '';
    loadCompareFile(file);
  });
  $('compare-pane').addEventListener('keydown', (e) => { if (e.key === 'Escape') { e.preventDefault(); e.stopPropagation(); closeCompare(); } });
  // Re-run a recording on a live agent, and the run comparison (rerun.js).
  $('rerun-open').addEventListener('click', openRerun);
  $('rerun-close').addEventListener('click', closeRerun);
  $('rerun-start').addEventListener('click', startRerun);
  $('rerun-cancel').addEventListener('click', cancelRerun);
  $('rerun-show').addEventListener('click', showComparison);
  $('rerun-dismiss').addEventListener('click', dismissRerunBar);
  $('rerun-export').addEventListener('click', exportComparison);
  $('rerun-export-a').addEventListener('click', () => exportRun('a'));
  $('rerun-export-b').addEventListener('click', () => exportRun('b'));
  $('rerun-again').addEventListener('click', rerunAgain);
  $('rerun-load').addEventListener('click', () => $('rerun-file').click());
  $('rerun-file').addEventListener('change', (e) => {
    const file = e.target.files && e.target.files[0];
    e.target.value = '';
    loadRerunFile(file);
  });
  $('rerun-out').addEventListener('click', (e) => {
    const button = e.target instanceof Element ? e.target.closest('button.run-pair') : null;
    if (button) openRunPair(button);
  });
  $('rerun-pane').addEventListener('keydown', (e) => { if (e.key === 'Escape') { e.preventDefault(); e.stopPropagation(); closeRerun(); } });
  const view = $('console-view');
  const hasFiles = (e) => e.dataTransfer && [...e.dataTransfer.types].includes('Files');
  view.addEventListener('dragover', (e) => { if (hasFiles(e)) { e.preventDefault(); e.dataTransfer.dropEffect = 'copy'; } });
  view.addEventListener('drop', (e) => {
    if (!hasFiles(e) || $('compare-pane').contains(e.target) || $('rerun-pane').contains(e.target)) return;
    e.preventDefault();
    importFile(e.dataTransfer.files[0]);
  });
}

// Read-only handles for the browser tests and for operators in devtools.
window.ratatoskrConsole = Object.freeze({
  state, sparkline, trendDelta, sseParser,
  flight: Object.freeze({ detectBuffering, turnTimeline, parseSessionDocument, buildExport, get stallMs() { return flight.stallMs; }, get replaying() { return flight.replay !== null; } }),
  compare: Object.freeze({ jsonDiff, wordDiff, turnFacts, compareTurns }),
  otlp: Object.freeze({ sessionToOtlp, otlpToSession, parseImportText }),
  // The replay: its state, each applied step's recorded time and wall times (performance.now()), the turns it recorded again.
  replay: Object.freeze({ status: replayStatus, log: replayLog, turns: replayedTurns }),
  // The alerts raised while hidden, and whether notifications are on.
  alerts: Object.freeze({ get on() { return alerts.on; }, get raised() { return alerts.raised.map((a) => ({ ...a })); } }),
  // The re-run: its phase, progress, the texts it sends and its comparison; the pure model.
  rerun: Object.freeze({ status: rerunStatus, compareRuns, rerunPlan, tokenJaccard }),
});

wire();
renderAlertsButton();
showView(viewFromHash());
loadConfig();
