// The Compare pane of the console view: two turns side by side, from the live session
// or the recording shown, and from a file loaded for comparison (a session document
// or an OTLP/JSON trace) — or one of each. It draws compare.js's model through the
// text-only DOM kit; main.js attaches its listeners.

import { $, clear, el, fill, up } from './dom.js';
import { IMPORT_MAX_BYTES, ImportRefused, buildExport, flight } from './flight-recorder.js';
import { compareTurns, turnFacts } from './compare.js';
import { parseImportText } from './otlp.js';

// runs: the two runs of a run comparison (run-compare-view.js), {key, label, doc};
// opener: what gets focus back when the sheet closes.
const cmp = { file: null, fileName: null, runs: [], opener: null };

/** The documents turns can be picked from: the current one (live or recorded), a loaded file, a run comparison's two runs. */
function sources() {
  const out = [];
  const current = buildExport();
  if (current) out.push({ key: 'current', label: flight.replay ? 'recording' : 'live', doc: current });
  if (cmp.file) out.push({ key: 'file', label: 'file', doc: cmp.file });
  return out.concat(cmp.runs);
}

const ellipsis = (text, n) => (text.length > n ? text.slice(0, n) + '…' : text);

/** Both pickers' options (one per turn of each source); keeps a choice that still exists. */
export function refreshCompareChoices() {
  const all = sources().flatMap((s) => s.doc.turns.map((t, i) => ({ value: s.key + ':' + i, text: s.label + ' · turn ' + t.index + ' · ' + ellipsis(t.user_text, 40) })));
  ['compare-a', 'compare-b'].forEach((id, side) => {
    const select = $(id);
    const keep = select.value;
    clear(select);
    for (const o of all) select.append(el('option', { value: o.value, text: o.text }));
    if (all.some((o) => o.value === keep)) select.value = keep;
    else if (all.length) select.value = all[side === 0 ? Math.max(0, all.length - 2) : all.length - 1].value;
  });
  $('compare-run').disabled = all.length === 0;
  if (!all.length) fill($('compare-out'), el('p', { class: 'muted', text: 'No turns to compare yet: run a turn, import a recording, or load a file.' }));
}

export function openCompare() {
  cmp.opener = null;
  $('compare-pane').hidden = false;
  refreshCompareChoices();
  $('compare-a').focus();
}

export function closeCompare() {
  $('compare-pane').hidden = true;
  const back = cmp.opener && cmp.opener.isConnected ? cmp.opener : $('compare-open');
  cmp.opener = null;
  back.focus();
}

/**
 * A run comparison's row opened here: turn iA of run A against turn iB of run B
 * (runs: [{key, label, doc}] for A and B), compared at once; closing gives `opener` focus back.
 */
export function openComparePair(runA, iA, runB, iB, opener) {
  cmp.runs = [runA, runB];
  $('compare-pane').hidden = false;
  refreshCompareChoices();
  $('compare-a').value = runA.key + ':' + iA;
  $('compare-b').value = runB.key + ':' + iB;
  runCompare();
  cmp.opener = opener;
  $('compare-out').focus();
}

/** A file loaded for comparison only: checked whole first, as an import is; the page stays as it is. */
export async function loadCompareFile(file) {
  if (!file) return;
  const err = $('compare-error');
  err.hidden = true;
  try {
    if (file.size > IMPORT_MAX_BYTES) throw new ImportRefused('import_too_large', 'the file is larger than ' + (IMPORT_MAX_BYTES >> 20) + ' MiB');
    let text;
    try { text = await file.text(); } catch (_) { throw new ImportRefused('import_unreadable', 'the file could not be read'); }
    cmp.file = parseImportText(text);
    cmp.fileName = file.name;
  } catch (e) {
    if (!(e instanceof ImportRefused)) throw e;
    err.setAttribute('data-error-code', e.code);
    fill(err, 'Compare file refused: ' + e.code + ' — ' + e.message + '.');
    err.hidden = false;
    return;
  }
  fill($('compare-file-name'), 'file: ', up(cmp.fileName), ' · ' + cmp.file.turns.length + ' turn' + (cmp.file.turns.length === 1 ? '' : 's'));
  refreshCompareChoices();
}

function pickedFacts(value) {
  const [key, i] = String(value).split(':');
  const src = sources().find((s) => s.key === key);
  const index = Number(i);
  if (!src || !src.doc.turns[index]) return null;
  return { label: src.label + ' · turn ' + src.doc.turns[index].index, facts: turnFacts(src.doc, index) };
}

// ---- drawing ------------------------------------------------------------------------

const fmt = (v, unit = ' ms') => (v === null || v === undefined ? '—' : (Math.round(v * 10) / 10) + unit);
const fmtSigned = (v, unit = ' ms') => (v === null || v === undefined ? '—' : (v > 0 ? '+' : v < 0 ? '−' : '±') + Math.abs(Math.round(v * 10) / 10) + unit);
const deltaClass = (v) => 'mono delta' + (v > 0 ? ' up' : v < 0 ? ' down' : '');

/** Word-diff runs as text: kept runs plain, removed in <del>, added in <ins>. */
function diffText(runs, label) {
  const box = el('div', { class: 'diff-text', role: 'group', 'aria-label': label });
  for (const r of runs) {
    if (r.op === '=') box.append(el('span', { text: up(r.text) }));
    else box.append(el(r.op === '-' ? 'del' : 'ins', { title: r.op === '-' ? 'only in A' : 'only in B' }, up(r.text)));
  }
  if (!runs.length) box.append(el('span', { class: 'muted', text: '(both empty)' }));
  return box;
}

function table(caption, head, rows) {
  const t = el('table', { class: 'compare-table' }, el('caption', { text: caption }));
  // An empty head cell still names its column for a screen reader.
  t.append(el('thead', {}, el('tr', {}, ...head.map((h) => el('th', { scope: 'col' }, h === '' ? el('span', { class: 'sr-only', text: 'field' }) : h)))));
  const body = el('tbody');
  for (const cells of rows) body.append(el('tr', {}, el('th', { scope: 'row' }, ...[].concat(cells[0])), ...cells.slice(1).map((c) => (c instanceof Node ? el('td', {}, c) : el('td', { class: 'mono' }, ...[].concat(c))))));
  t.append(body);
  return t;
}

const jsonText = (v) => up(v === undefined ? '(absent)' : JSON.stringify(v));

function argsDiff(diff) {
  const list = el('ul', { class: 'json-diff mono' });
  for (const r of diff.rows) {
    if (r.op === 'same') continue;
    const sign = r.op === 'added' ? '+ ' : r.op === 'removed' ? '− ' : '~ ';
    const parts = r.op === 'changed' ? [jsonText(r.a), ' → ', jsonText(r.b)] : [jsonText(r.op === 'added' ? r.b : r.a)];
    list.append(el('li', { class: 'json-' + r.op }, sign, up(r.path), ': ', ...parts));
  }
  const same = diff.rows.length - diff.changed;
  list.append(el('li', { class: 'muted', text: diff.changed === 0 ? 'arguments identical' : same + ' unchanged' + (diff.truncated ? ' · truncated' : '') }));
  return list;
}

function affectBlock(side, affect) {
  if (!affect) return el('p', { class: 'muted', text: side + ': the recording does not say which affect the turn saw' });
  const moved = affect.metrics.filter((m) => m.delta !== null && m.delta !== 0);
  return el('div', { class: 'compare-affect' },
    el('div', { class: 'mono' }, side + ': ', up(affect.before ?? 'none'), ' → ', up(affect.after ?? 'none')),
    el('ul', { class: 'mono' }, ...(moved.length ? moved.map((m) => el('li', {}, up(m.key), ' ', fmt(m.before, ''), ' → ', fmt(m.after, ''), ' ',
      el('span', { class: deltaClass(m.delta), text: fmtSigned(m.delta, '') }))) : [el('li', { class: 'muted', text: 'no change' })])));
}

/** Compares the two picked turns and draws the result. */
export function runCompare() {
  const A = pickedFacts($('compare-a').value);
  const B = pickedFacts($('compare-b').value);
  if (!A || !B) { refreshCompareChoices(); return; }
  const m = compareTurns(A.facts, B.facts);
  const out = [el('p', { class: 'mono compare-head' }, 'A: ' + A.label + '  ·  B: ' + B.label)];

  out.push(el('h3', { text: 'User text' }), diffText(m.user_text, 'User text, A to B'));
  out.push(el('h3', { text: 'Output text' }), diffText(m.output, 'Output text, A to B'));

  out.push(el('h3', { text: 'Tool calls (' + A.facts.tools.length + ' / ' + B.facts.tools.length + ')' }));
  if (!m.tools.length) out.push(el('p', { class: 'muted', text: 'No tool calls in either turn.' }));
  m.tools.forEach((t, k) => {
    const side = (x, f) => (x ? f(x) : '—');
    const ok = (x) => (x.is_error === null ? 'no result' : x.is_error ? 'error' : 'ok');
    out.push(table('tool call ' + (k + 1) + (t.a && t.b && !t.same_name ? ' · different tools' : ''), ['', 'A', 'B', 'B − A'], [
      ['name', side(t.a, (x) => up(x.name)), side(t.b, (x) => up(x.name)), t.same_name ? 'same' : 'differs'],
      ['call id', side(t.a, (x) => up(x.call_id ?? '?')), side(t.b, (x) => up(x.call_id ?? '?')), ''],
      ['result size', side(t.a, (x) => fmt(x.result_size, ' chars')), side(t.b, (x) => fmt(x.result_size, ' chars')), el('span', { class: deltaClass(t.result_size_delta), text: fmtSigned(t.result_size_delta, ' chars') })],
      ['ok / error', side(t.a, ok), side(t.b, ok), t.ok_changed ? 'changed' : 'same'],
      ['duration', side(t.a, (x) => fmt(x.duration_ms)), side(t.b, (x) => fmt(x.duration_ms)), el('span', { class: deltaClass(t.duration_delta_ms), text: fmtSigned(t.duration_delta_ms) })],
    ]));
    out.push(el('div', { class: 'muted', text: 'arguments, A → B' }), argsDiff(t.arguments));
  });

  out.push(table('Timing (ms from sending the turn)', ['', 'A', 'B', 'B − A'], m.timing.map((r) => {
    const unit = r.key === 'deltas_per_s' ? ' /s' : ' ms';
    return [r.label, fmt(r.a, unit), fmt(r.b, unit), el('span', { class: deltaClass(r.delta), text: fmtSigned(r.delta, unit) })];
  })));

  out.push(el('h3', { text: 'Affect across the turn' }), affectBlock('A', m.affect.a), affectBlock('B', m.affect.b));

  const fin = (kind, reason) => (kind === null ? 'still running' : kind + (reason === null ? '' : ' · '));
  out.push(table('Finish and usage', ['', 'A', 'B', 'B − A'], [
    ['finish', [fin(m.finish.a_kind, m.finish.a), m.finish.a === null ? '' : up(m.finish.a)], [fin(m.finish.b_kind, m.finish.b), m.finish.b === null ? '' : up(m.finish.b)], m.finish.same ? 'same' : 'differs'],
    ...m.usage.map((u) => [u.key.replace('_', ' '), fmt(u.a, ''), fmt(u.b, ''), el('span', { class: deltaClass(u.delta), text: fmtSigned(u.delta, '') })]),
  ]));
  $('compare-out').replaceChildren(...out);
}
