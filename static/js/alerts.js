// Alerts for an operator who is not looking at the tab (docs/alerts.md): while the page
// is hidden, a turn of the shown session that stalls past the stall threshold or ends in
// `error`, or an admin stream that ends with `stream_error`, marks the tab's title and,
// once the operator allowed it, shows a browser notification. Permission is asked once,
// from the Alerts button (a user gesture); until it is granted only the title changes.
// Each alert is raised once per hidden spell; the title is restored when the tab shows.

import { $ } from './dom.js';

const BASE_TITLE = typeof document === 'undefined' ? '' : document.title;

export const alerts = {
  on: false,   // notifications wanted (and permission granted)
  seen: new Set(), // kind:key raised in this hidden spell
  raised: [],  // every alert raised: { kind, title, body, at, notified }
};

function permission() {
  return typeof Notification === 'undefined' ? 'unsupported' : Notification.permission;
}

/** The button says what alerts will do: notify, title only, blocked by the browser. */
export function renderAlertsButton() {
  const button = $('alerts-toggle');
  const p = permission();
  let text;
  if (p === 'unsupported') text = 'Alerts: title only';
  else if (p === 'denied') text = 'Alerts: blocked';
  else text = alerts.on ? 'Alerts: on' : 'Alerts: off';
  button.textContent = text;
  button.setAttribute('aria-pressed', String(alerts.on));
  button.disabled = p === 'unsupported' || p === 'denied';
}

/** The Alerts button: asks for permission the first time (a click is the gesture), then toggles. */
export async function toggleAlerts() {
  if (permission() === 'default') {
    try { await Notification.requestPermission(); } catch (_) { /* treated as not granted */ }
    alerts.on = permission() === 'granted';
  } else if (permission() === 'granted') {
    alerts.on = !alerts.on;
  }
  renderAlertsButton();
}

/**
 * An alert (kind: stall, error, stream_error; key: what it is about, e.g. the turn), raised
 * only while the tab is hidden, once per kind and key per hidden spell.
 */
export function raiseAlert(kind, key, title, body) {
  if (document.visibilityState !== 'hidden') return;
  const id = kind + ':' + key;
  if (alerts.seen.has(id)) return;
  alerts.seen.add(id);
  let notified = false;
  if (alerts.on && permission() === 'granted') {
    try {
      new Notification('ratatoskr: ' + title, { body, tag: 'ratatoskr-' + id });
      notified = true;
    } catch (_) { /* a browser that refuses page notifications still gets the title */ }
  }
  alerts.raised.push({ kind, title, body, at: new Date().toISOString(), notified });
  document.title = '(' + alerts.seen.size + ') ⚠ ' + title + ' · ' + BASE_TITLE;
}

/** The tab shows again: its title is restored and the next hidden spell alerts afresh. */
export function alertsVisibilityChanged() {
  if (document.visibilityState === 'hidden') return;
  alerts.seen.clear();
  document.title = BASE_TITLE;
}
