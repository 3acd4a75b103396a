// The run comparison's sheet (docs/rerun.md): run-compare.js's export document drawn
// as a totals table and one row per turn, through the text-only DOM kit. Each row's
// button names its turn (data-turn); rerun.js opens the two-turn Compare for it.

import { $, el, up } from './dom.js';

const ellipsis = (text, n) => (text.length > n ? text.slice(0, n) + '…' : text);
const num = (v, digits = 1) => (v === null || v === undefined ? '—' : String(Math.round(v * 10 ** digits) / 10 ** digits));
const signedText = (v, unit = '') => (v === null || v === undefined ? '—' : (v > 0 ? '+' : v < 0 ? '−' : '±') + Math.abs(Math.round(v * 10) / 10) + unit);
const deltaSpan = (v, unit) => el('span', { class: 'mono delta' + (v > 0 ? ' up' : v < 0 ? ' down' : ''), text: signedText(v, unit) });
const similarity = (v) => (v === null ? '—' : v.toFixed(3));
const json = (v) => up(v === undefined ? '(absent)' : JSON.stringify(v));
const RESULT = { ok: 'ok', error: 'error', no_result: 'no result' };

/** The output cell: the word diff's size and the similarity. */
function outputCell(row) {
  if (!row.output) return 'not run';
  const o = row.output;
  return (o.words_changed === 0 ? 'same words' : '−' + o.words_removed + ' +' + o.words_added + ' words') + ' · ' + similarity(o.similarity);
}

/** The tool cell: one line per call that is not the same, then how many are. */
function toolsCell(row) {
  const list = el('ul', { class: 'json-diff mono run-tools' });
  for (const t of row.tools) {
    if (t.change === 'same' && t.result_change === 'same') continue;
    const result = t.result_change && t.result_change !== 'same' ? [' · ', RESULT[t.a.result], ' → ', RESULT[t.b.result]] : [];
    if (t.change === 'removed') list.append(el('li', { class: 'json-removed' }, '− ', up(t.a.name)));
    else if (t.change === 'added') list.append(el('li', { class: 'json-added' }, '+ ', up(t.b.name)));
    else {
      const name = t.name_changed ? [up(t.a.name), ' → ', up(t.b.name)] : [up(t.a.name)];
      list.append(el('li', { class: t.change === 'changed' ? 'json-changed' : '' }, t.change === 'changed' ? '~ ' : '= ', ...name, ...result));
      for (const r of t.arguments) {
        const parts = r.op === 'changed' ? [json(r.a), ' → ', json(r.b)] : [json(r.op === 'added' ? r.b : r.a)];
        list.append(el('li', { class: 'json-' + r.op }, '  ' + (r.op === 'added' ? '+ ' : r.op === 'removed' ? '− ' : '~ '), up(r.path), ': ', ...parts));
      }
    }
  }
  const same = row.tool_counts.same - row.tools.filter((t) => t.change === 'same' && t.result_change !== 'same').length;
  if (same > 0) list.append(el('li', { class: 'muted', text: same + ' same' }));
  if (!list.children.length) list.append(el('li', { class: 'muted', text: row.pair === 'paired' ? 'none' : '—' }));
  return list;
}

/** The ok → error cell: the turn's end and each tool call whose result went from ok to error (or back). */
function errorsCell(row) {
  if (row.pair !== 'paired') return row.pair === 'not_run' ? 'not run' : 'only in B';
  const parts = [];
  if (row.status.change !== 'same') parts.push(['turn: ' + row.status.a + ' → ' + row.status.b]);
  for (const t of row.tools) {
    if (t.result_change === 'ok_to_error' || t.result_change === 'error_to_ok') parts.push(['tool ', up(t.b.name), ': ' + RESULT[t.a.result] + ' → ' + RESULT[t.b.result]]);
  }
  if (!parts.length) return '—';
  return parts.flatMap((p, i) => (i ? [', ', ...p] : p));
}

function finishCell(f) {
  if (f.same) return f.a === null ? '—' : [up(f.a)];
  return [f.a === null ? '—' : up(f.a), ' → ', f.b === null ? '—' : up(f.b)];
}

const usageCell = (u) => ['in ', deltaSpan(u.input_tokens.delta, ''), ' · out ', deltaSpan(u.output_tokens.delta, '')];
const timeCell = (d) => [deltaSpan(d.delta, ' ms'), ' (' + num(d.a) + ' → ' + num(d.b) + ')'];

function table(caption, head, rows, cls) {
  const t = el('table', { class: 'compare-table ' + cls }, el('caption', { text: caption }));
  t.append(el('thead', {}, el('tr', {}, ...head.map(([h, hidden]) => el('th', { scope: 'col' }, hidden ? el('span', { class: 'sr-only', text: h }) : h)))));
  const body = el('tbody');
  for (const { cells, attrs } of rows) {
    body.append(el('tr', attrs || {}, el('th', { scope: 'row' }, ...[].concat(cells[0])),
      ...cells.slice(1).map((c) => (c instanceof Node ? el('td', {}, c) : el('td', { class: 'mono' }, ...[].concat(c))))));
  }
  t.append(body);
  return t;
}

const sideText = (s, label) => label + ': ' + (s.role === 'recording' ? 'recording ' : 're-run ');

/** The comparison document (run-compare.js comparisonDocument) drawn into the sheet's result region. */
export function renderRunComparison(doc) {
  const { a, b, run, totals: t } = doc;
  const out = [
    el('p', { class: 'mono compare-head' }, sideText(a, 'A'), up(a.session_id), ' · agent ', up(a.agent.display_name ?? a.agent.agent_id), ' · ' + a.turns + ' turns'),
    el('p', { class: 'mono compare-head' }, sideText(b, 'B'), up(b.session_id), ' · agent ', up(b.agent.display_name ?? b.agent.agent_id),
      ' · ' + run.state + ', ' + run.sent + ' of ' + run.planned + ' sent'),
    el('p', { class: 'muted', text: 'Similarity: token Jaccard of the two outputs (their sets of words — runs of letters and digits, lowercased — shared over all), 1.000 = the same words. Deltas are B − A.' }),
  ];
  const agg = (m, unit) => [num(m.a) + unit, num(m.b) + unit, deltaSpan(m.delta, unit)];
  out.push(table('Totals over the run', [['measure', true], ['A'], ['B'], ['B − A']], [
    { cells: ['turns', String(t.turns_a), String(t.turns_b), t.paired + ' paired' + (t.not_run ? ' · ' + t.not_run + ' not run' : '') + (t.extra ? ' · ' + t.extra + ' only in B' : '')] },
    { cells: ['changed turns', '', '', String(t.changed_turns)] },
    { cells: ['output words changed', '', '', String(t.words_changed)] },
    { cells: ['mean similarity', '', '', similarity(t.similarity_mean)] },
    { cells: ['tool calls', '', '', t.tools.same + ' same · ' + t.tools.changed + ' changed · ' + t.tools.added + ' added · ' + t.tools.removed + ' removed'] },
    { cells: ['ok → error', '', '', String(t.ok_to_error) + (t.error_to_ok ? ' (error → ok: ' + t.error_to_ok + ')' : '')] },
    { cells: ['finish changed', '', '', String(t.finish_changed)] },
    { cells: ['input tokens', ...agg(t.usage.input_tokens, '')] },
    { cells: ['output tokens', ...agg(t.usage.output_tokens, '')] },
    { cells: ['total time', ...agg(t.timing.total_ms, ' ms')] },
    { cells: ['first text (mean)', ...agg(t.timing.first_text_ms_mean, ' ms')] },
  ], 'run-totals'));
  out.push(table('Turns, B against A', [['turn'], ['user text'], ['output: words · similarity'], ['tool calls'], ['ok → error'], ['finish'], ['usage'], ['first text'], ['total'], ['open in Compare', true]], doc.rows.map((r) => ({
    attrs: { class: r.changed ? 'run-row changed' : 'run-row', 'data-turn': r.turn },
    cells: [String(r.turn), up(ellipsis(r.user_text, 60)), outputCell(r), toolsCell(r), errorsCell(r), finishCell(r.finish), usageCell(r.usage), timeCell(r.timing.first_text_ms), timeCell(r.timing.total_ms),
      r.pair === 'paired' ? el('button', { type: 'button', class: 'run-pair', 'data-turn': r.turn, text: 'Compare turn ' + r.turn }) : '—'],
  })), 'run-rows'));
  $('rerun-out').replaceChildren(...out);
}
