// The turn comparison's model (pure: no DOM, so Node's test runner imports it too):
// a turn's facts as the recording holds them (user text, tool calls, output, timing,
// the affect change across it, finish reason and usage), a structural JSON diff, a
// word diff, and two turns side by side with signed differences. compare-view.js
// draws it; otlp.js uses the same affect rule for its export.

import { TURN_TERMINALS, isObject, turnTimeline } from './flight-recorder.js';
import { affectMetrics } from './panes.js';

const JSON_DIFF_MAX_ROWS = 2000;
const JSON_DIFF_MAX_DEPTH = 32;
const WORD_DIFF_MAX_CELLS = 4_000_000; // LCS table size; beyond it the middle is one replacement

// ---- structural JSON diff -------------------------------------------------------------

const keyPath = (path, key) => (/^[A-Za-z_$][\w$]*$/.test(key) ? path + '.' + key : path + '[' + JSON.stringify(key) + ']');

/**
 * Leaf-by-leaf difference of two JSON values: rows {path, op, a, b} where op is
 * 'same', 'changed', 'added' (only in b) or 'removed' (only in a). Objects are
 * compared key by key (a's key order, then b's new keys), arrays index by index;
 * a type change is one 'changed' row. At most JSON_DIFF_MAX_ROWS rows (truncated: true).
 */
export function jsonDiff(a, b) {
  const rows = [];
  let truncated = false;
  const push = (row) => { if (rows.length >= JSON_DIFF_MAX_ROWS) truncated = true; else rows.push(row); };
  const walk = (x, y, path, depth) => {
    if (truncated) return;
    const bothObjects = isObject(x) && isObject(y);
    const bothArrays = Array.isArray(x) && Array.isArray(y);
    if (depth < JSON_DIFF_MAX_DEPTH && (bothObjects || bothArrays)) {
      const keys = bothArrays
        ? Array.from({ length: Math.max(x.length, y.length) }, (_, i) => i)
        : [...Object.keys(x), ...Object.keys(y).filter((k) => !Object.prototype.hasOwnProperty.call(x, k))];
      if (keys.length === 0) { push({ path, op: 'same', a: x, b: y }); return; }
      for (const k of keys) {
        const p = bothArrays ? path + '[' + k + ']' : keyPath(path, k);
        const inX = bothArrays ? k < x.length : Object.prototype.hasOwnProperty.call(x, k);
        const inY = bothArrays ? k < y.length : Object.prototype.hasOwnProperty.call(y, k);
        if (inX && inY) walk(x[k], y[k], p, depth + 1);
        else if (inX) push({ path: p, op: 'removed', a: x[k] });
        else push({ path: p, op: 'added', b: y[k] });
      }
      return;
    }
    push({ path, op: JSON.stringify(x) === JSON.stringify(y) ? 'same' : 'changed', a: x, b: y });
  };
  walk(a, b, '$', 0);
  return { rows, truncated, changed: rows.filter((r) => r.op !== 'same').length };
}

// ---- word diff ---------------------------------------------------------------------------

const tokens = (text) => String(text).match(/\s+|[^\s]+/g) || [];

/**
 * Word diff of two texts: runs {op: '=' | '-' | '+', text}, whitespace kept as its
 * own tokens, so joining the '=' and '-' runs gives a and the '=' and '+' runs gives b.
 * Common prefix and suffix first; the middle by longest common subsequence.
 */
export function wordDiff(a, b) {
  const x = tokens(a);
  const y = tokens(b);
  let pre = 0;
  while (pre < x.length && pre < y.length && x[pre] === y[pre]) pre += 1;
  let suf = 0;
  while (suf < x.length - pre && suf < y.length - pre && x[x.length - 1 - suf] === y[y.length - 1 - suf]) suf += 1;
  const mx = x.slice(pre, x.length - suf);
  const my = y.slice(pre, y.length - suf);
  const ops = x.slice(0, pre).map((t) => ['=', t]);
  if ((mx.length + 1) * (my.length + 1) > WORD_DIFF_MAX_CELLS) {
    for (const t of mx) ops.push(['-', t]);
    for (const t of my) ops.push(['+', t]);
  } else {
    const w = my.length + 1;
    const lcs = new Uint32Array((mx.length + 1) * w);
    for (let i = mx.length - 1; i >= 0; i -= 1) {
      for (let j = my.length - 1; j >= 0; j -= 1) {
        lcs[i * w + j] = mx[i] === my[j] ? lcs[(i + 1) * w + j + 1] + 1 : Math.max(lcs[(i + 1) * w + j], lcs[i * w + j + 1]);
      }
    }
    let i = 0;
    let j = 0;
    while (i < mx.length || j < my.length) {
      if (i < mx.length && j < my.length && mx[i] === my[j]) { ops.push(['=', mx[i]]); i += 1; j += 1; }
      else if (i < mx.length && (j === my.length || lcs[(i + 1) * w + j] >= lcs[i * w + j + 1])) { ops.push(['-', mx[i]]); i += 1; }
      else { ops.push(['+', my[j]]); j += 1; }
    }
  }
  for (const t of y.slice(y.length - suf)) ops.push(['=', t]);
  const runs = [];
  for (const [op, text] of ops) {
    const last = runs[runs.length - 1];
    if (last && last.op === op) last.text += text;
    else runs.push({ op, text });
  }
  return runs;
}

// ---- a turn's facts --------------------------------------------------------------------

/** The snapshot drawn last with this emitted_at (null when none). */
function snapshotAt(history, emittedAt) {
  if (emittedAt === null || emittedAt === undefined) return null;
  for (let i = history.length - 1; i >= 0; i -= 1) if (isObject(history[i]) && history[i].emitted_at === emittedAt) return history[i];
  return null;
}

/**
 * The affect change across turn i of a session document: from the snapshot drawn when
 * it was sent (its affect_at_start) to the one drawn when the next turn was sent (the
 * last one drawn, for the last turn). null when the recording does not say.
 */
export function affectAcross(doc, i) {
  const turn = doc.turns[i];
  const history = Array.isArray(doc.affect_history) ? doc.affect_history : [];
  if (!turn || turn.affect_at_start === undefined) return null;
  const next = doc.turns[i + 1];
  const before = snapshotAt(history, turn.affect_at_start);
  const after = next && next.affect_at_start !== undefined ? snapshotAt(history, next.affect_at_start)
    : (history.length ? history[history.length - 1] : null);
  const a = new Map(before ? affectMetrics(before) : []);
  const b = new Map(after ? affectMetrics(after) : []);
  const keys = [...a.keys(), ...[...b.keys()].filter((k) => !a.has(k))];
  const metrics = keys.map((key) => ({
    key, before: a.has(key) ? a.get(key) : null, after: b.has(key) ? b.get(key) : null,
    delta: a.has(key) && b.has(key) ? round(b.get(key) - a.get(key), 1e6) : null,
  }));
  return { before: before ? before.emitted_at ?? null : null, after: after ? after.emitted_at ?? null : null, metrics };
}

const round = (v, k = 10) => Math.round(v * k) / k;
const numOrNull = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : null);

/** Turn i of a session document as the comparison reads it. */
export function turnFacts(doc, i) {
  const turn = doc.turns[i];
  const t = turnTimeline(turn);
  const calls = [];
  const byId = new Map();
  let output = '';
  let reasoning = '';
  for (const e of turn.events) {
    const d = isObject(e.data) ? e.data : {};
    if (e.event === 'text') output += String(d.delta ?? '');
    else if (e.event === 'thinking') reasoning += String(d.delta ?? '');
    else if (e.event === 'tool_call') {
      const call = { call_id: d.call_id ?? null, name: String(d.name ?? '?'), arguments: d.arguments ?? null, result_size: null, is_error: null, duration_ms: null };
      calls.push(call);
      byId.set(String(d.call_id), call);
    } else if (e.event === 'tool_result') {
      const call = byId.get(String(d.call_id));
      const size = String(d.output ?? '').length;
      if (call && call.result_size === null) { call.result_size = size; call.is_error = d.is_error === true; byId.delete(String(d.call_id)); }
      else calls.push({ call_id: d.call_id ?? null, name: String(d.name ?? '?'), arguments: null, result_size: size, is_error: d.is_error === true, duration_ms: null });
    }
  }
  for (const call of calls) {
    const match = t.tools.find((x) => x.call_id === call.call_id && x.duration_ms !== null);
    if (match) call.duration_ms = match.duration_ms;
  }
  const term = turn.terminal;
  const data = term && isObject(term.data) ? term.data : {};
  const usage = isObject(data.usage) ? data.usage : {};
  return {
    index: turn.index,
    user_text: turn.user_text,
    tools: calls,
    output,
    reasoning,
    timing: {
      first_byte_ms: t.first_byte_ms, first_thinking_ms: t.first_thinking_ms, first_text_ms: t.first_text_ms,
      total_ms: t.total_ms, max_gap_ms: t.max_gap ? t.max_gap.ms : null, deltas_per_s: t.deltas_per_s,
    },
    affect: affectAcross(doc, i),
    terminal: term ? term.kind : null,
    finish_reason: term && term.kind === 'done' ? (data.finish_reason ?? null) : (term && term.kind === 'error' ? (data.code ?? null) : null),
    usage: { input_tokens: numOrNull(usage.input_tokens), output_tokens: numOrNull(usage.output_tokens) },
    events: turn.events.filter((e) => !TURN_TERMINALS.includes(e.event)).length,
  };
}

export const TIMING_ROWS = [
  ['first_byte_ms', 'first byte'], ['first_thinking_ms', 'first thinking'], ['first_text_ms', 'first text'],
  ['total_ms', 'total'], ['max_gap_ms', 'largest gap'], ['deltas_per_s', 'deltas / s'],
];

/** b − a, or null when either side has no number. */
export const signed = (a, b, k = 10) => (numOrNull(a) === null || numOrNull(b) === null ? null : round(b - a, k));

/**
 * Two turns' facts side by side: word diffs of the user text and the output, the tool
 * calls paired in order (name, structural diff of the arguments, result size,
 * ok / error, duration, each with its signed difference), the timing and usage with
 * signed differences (b − a), both affect changes, and the finish reasons.
 */
export function compareTurns(a, b) {
  const tools = [];
  for (let k = 0; k < Math.max(a.tools.length, b.tools.length); k += 1) {
    const x = a.tools[k] || null;
    const y = b.tools[k] || null;
    tools.push({
      a: x, b: y,
      same_name: !!(x && y && x.name === y.name),
      arguments: jsonDiff(x ? x.arguments : null, y ? y.arguments : null),
      result_size_delta: signed(x && x.result_size, y && y.result_size, 1),
      ok_changed: !!(x && y && x.is_error !== y.is_error),
      duration_delta_ms: signed(x && x.duration_ms, y && y.duration_ms),
    });
  }
  return {
    user_text: wordDiff(a.user_text, b.user_text),
    output: wordDiff(a.output, b.output),
    tools,
    timing: TIMING_ROWS.map(([key, label]) => ({ key, label, a: a.timing[key], b: b.timing[key], delta: signed(a.timing[key], b.timing[key]) })),
    affect: { a: a.affect, b: b.affect },
    finish: { a: a.finish_reason, b: b.finish_reason, a_kind: a.terminal, b_kind: b.terminal, same: a.finish_reason === b.finish_reason && a.terminal === b.terminal },
    usage: ['input_tokens', 'output_tokens'].map((key) => ({ key, a: a.usage[key], b: b.usage[key], delta: signed(a.usage[key], b.usage[key], 1) })),
  };
}
