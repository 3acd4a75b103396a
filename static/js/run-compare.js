// The run comparison's model (docs/rerun.md), pure: no DOM, so Node's test runner
// imports it too. What a re-run sends (the recorded user texts, or a typed refusal),
// and a recording (A) against its re-run (B), turn by turn: the output's word-diff
// size and token Jaccard similarity, tool calls added / removed / changed (name and
// arguments by path), ok→error changes, finish reason, usage and timing deltas, totals
// over the run; and the versioned export (docs/rerun-comparison.schema.json).
// run-compare-view.js draws it; rerun.js drives the re-run.

import { jsonDiff, signed, turnFacts, wordDiff } from './compare.js';

export const COMPARISON_FORMAT = 'ratatoskr-run-comparison';
export const COMPARISON_VERSION = 1;
export const SIMILARITY = 'token_jaccard';

export class RerunRefused extends Error {
  constructor(code, message) { super(message); this.code = code; }
}

/**
 * What a re-run of `doc` sends: its turns' user texts, in order (rerun_pre_001). A
 * recording without turns, or with a turn whose user text is empty (an OTLP export
 * made without content, a foreign trace without input messages), is refused: a re-run
 * that skipped a turn would not be the same conversation.
 */
export function rerunPlan(doc) {
  const turns = doc && Array.isArray(doc.turns) ? doc.turns : [];
  if (!turns.length) throw new RerunRefused('rerun_no_turns', 'the recording has no turns to send');
  const missing = turns.filter((t) => typeof t.user_text !== 'string' || t.user_text.trim() === '').map((t) => t.index);
  if (missing.length === turns.length) {
    throw new RerunRefused('rerun_no_user_text', 'the recording holds no user text (an OTLP export made without content carries none): nothing to send');
  }
  if (missing.length) {
    throw new RerunRefused('rerun_missing_user_text', 'turn' + (missing.length === 1 ? ' ' : 's ') + missing.join(', ') + ' of the recording ' + (missing.length === 1 ? 'has' : 'have') + ' no user text');
  }
  return { agent_id: doc.agent.agent_id, texts: turns.map((t) => t.user_text) };
}

// ---- per-turn measures -------------------------------------------------------------

const WORD = /[\p{L}\p{N}]+/gu;
const round4 = (v) => Math.round(v * 1e4) / 1e4;

/**
 * Token Jaccard similarity of two texts: the sets of their tokens (maximal runs of
 * Unicode letters and digits, lowercased), |A ∩ B| / |A ∪ B|; 1 when both are empty.
 * Rounded to 4 decimals.
 */
export function tokenJaccard(a, b) {
  const x = new Set((String(a).toLowerCase().match(WORD) || []));
  const y = new Set((String(b).toLowerCase().match(WORD) || []));
  if (x.size === 0 && y.size === 0) return 1;
  let common = 0;
  for (const t of x) if (y.has(t)) common += 1;
  return round4(common / (x.size + y.size - common));
}

/** The word diff's size: the words (non-space tokens) only in A, only in B, and both counts summed. */
export function wordDiffSize(a, b) {
  let removed = 0;
  let added = 0;
  for (const run of wordDiff(a, b)) {
    const words = (run.text.match(/\S+/g) || []).length;
    if (run.op === '-') removed += words;
    else if (run.op === '+') added += words;
  }
  return { words_removed: removed, words_added: added, words_changed: removed + added };
}

const resultOf = (call) => (call.is_error === null ? 'no_result' : call.is_error ? 'error' : 'ok');

/** ok → error, error → ok, same, or changed (anything else, e.g. a result that never came). */
function okChange(a, b) {
  if (a === b) return 'same';
  if (a === 'ok' && b === 'error') return 'ok_to_error';
  if (a === 'error' && b === 'ok') return 'error_to_ok';
  return 'changed';
}

/** Longest common subsequence of two name lists: the matched index pairs, in order. */
function lcsPairs(x, y) {
  const w = y.length + 1;
  const t = new Uint32Array((x.length + 1) * w);
  for (let i = x.length - 1; i >= 0; i -= 1) {
    for (let j = y.length - 1; j >= 0; j -= 1) t[i * w + j] = x[i] === y[j] ? t[(i + 1) * w + j + 1] + 1 : Math.max(t[(i + 1) * w + j], t[i * w + j + 1]);
  }
  const pairs = [];
  for (let i = 0, j = 0; i < x.length && j < y.length;) {
    if (x[i] === y[j]) { pairs.push([i, j]); i += 1; j += 1; } else if (t[(i + 1) * w + j] >= t[i * w + j + 1]) i += 1; else j += 1;
  }
  return pairs;
}

const callSide = (c) => ({ name: c.name, call_id: c.call_id === null ? null : String(c.call_id), result: resultOf(c) });

/**
 * Tool calls of A against B. Calls of the same name are matched in order (longest
 * common subsequence of the names); between two matches, the calls left on both sides
 * are paired in order as a changed call (its name changed), and what is left over is
 * removed (only in A) or added (only in B). A matched pair is changed when its
 * arguments differ (the structural diff's rows, by path); its result (ok / error /
 * no_result) change is reported beside.
 */
export function toolChanges(aCalls, bCalls) {
  const out = [];
  const pair = (x, y) => {
    const diff = jsonDiff(x.arguments, y.arguments);
    const nameChanged = x.name !== y.name;
    out.push({
      change: nameChanged || diff.changed > 0 ? 'changed' : 'same', a: callSide(x), b: callSide(y), name_changed: nameChanged,
      arguments: diff.rows.filter((r) => r.op !== 'same').map((r) => ({ path: r.path, op: r.op, ...('a' in r ? { a: r.a ?? null } : {}), ...('b' in r ? { b: r.b ?? null } : {}) })),
      result_change: okChange(resultOf(x), resultOf(y)),
    });
  };
  const lone = (change, c) => out.push({ change, a: change === 'removed' ? callSide(c) : null, b: change === 'added' ? callSide(c) : null, name_changed: false, arguments: [], result_change: null });
  const anchors = lcsPairs(aCalls.map((c) => c.name), bCalls.map((c) => c.name)).concat([[aCalls.length, bCalls.length]]);
  let i = 0;
  let j = 0;
  for (const [ai, bj] of anchors) {
    while (i < ai && j < bj) { pair(aCalls[i], bCalls[j]); i += 1; j += 1; }
    for (; i < ai; i += 1) lone('removed', aCalls[i]);
    for (; j < bj; j += 1) lone('added', bCalls[j]);
    if (ai < aCalls.length) { pair(aCalls[ai], bCalls[bj]); i = ai + 1; j = bj + 1; }
  }
  return out;
}

const ofKind = (list, kind) => list.filter((t) => t.change === kind).length;
const turnStatus = (f) => (f === null ? null : f.terminal === null ? 'running' : f.terminal);
const side = (a, b, k = 10) => ({ a, b, delta: signed(a, b, k) });

/** One row: turn position `i` of A and B (either may be missing). */
function compareRow(A, B, i) {
  const a = i < A.turns.length ? turnFacts(A, i) : null;
  const b = i < B.turns.length ? turnFacts(B, i) : null;
  const both = a !== null && b !== null;
  const tools = both ? toolChanges(a.tools, b.tools) : [];
  const sa = turnStatus(a);
  const sb = turnStatus(b);
  const statusChange = !both ? (a ? 'not_run' : 'extra') : sa === sb ? 'same' : sa === 'done' && sb === 'error' ? 'ok_to_error' : sa === 'error' && sb === 'done' ? 'error_to_ok' : 'changed';
  const output = both ? { ...wordDiffSize(a.output, b.output), similarity: tokenJaccard(a.output, b.output) } : null;
  const okToError = (statusChange === 'ok_to_error' ? 1 : 0) + tools.filter((t) => t.result_change === 'ok_to_error').length;
  const errorToOk = (statusChange === 'error_to_ok' ? 1 : 0) + tools.filter((t) => t.result_change === 'error_to_ok').length;
  const finish = { a: a ? a.finish_reason : null, b: b ? b.finish_reason : null, same: both && a.finish_reason === b.finish_reason };
  const counts = { same: ofKind(tools, 'same'), changed: ofKind(tools, 'changed'), added: ofKind(tools, 'added'), removed: ofKind(tools, 'removed') };
  const num = (f, get) => (f ? get(f) : null);
  return {
    turn: i + 1,
    pair: both ? 'paired' : a ? 'not_run' : 'extra',
    a_index: a ? a.index : null,
    b_index: b ? b.index : null,
    user_text: (a || b).user_text,
    user_text_same: both && a.user_text === b.user_text,
    output,
    tools,
    tool_counts: counts,
    status: { a: sa, b: sb, change: statusChange },
    ok_to_error: okToError,
    error_to_ok: errorToOk,
    finish,
    usage: {
      input_tokens: side(num(a, (f) => f.usage.input_tokens), num(b, (f) => f.usage.input_tokens), 1),
      output_tokens: side(num(a, (f) => f.usage.output_tokens), num(b, (f) => f.usage.output_tokens), 1),
    },
    timing: {
      first_text_ms: side(num(a, (f) => f.timing.first_text_ms), num(b, (f) => f.timing.first_text_ms)),
      total_ms: side(num(a, (f) => f.timing.total_ms), num(b, (f) => f.timing.total_ms)),
    },
    changed: both ? output.words_changed > 0 || counts.changed + counts.added + counts.removed > 0 || statusChange !== 'same' || !finish.same || !(a.user_text === b.user_text) : true,
  };
}

const round1 = (v) => Math.round(v * 10) / 10;

/** Sums of a measure over the rows where both sides have it: {a, b, delta}. */
function sumBoth(rows, get, k = 10) {
  const have = rows.map(get).filter((m) => m.a !== null && m.b !== null);
  const a = have.reduce((s, m) => s + m.a, 0);
  const b = have.reduce((s, m) => s + m.b, 0);
  return { turns: have.length, a: Math.round(a * k) / k, b: Math.round(b * k) / k, delta: Math.round((b - a) * k) / k };
}

/** The mean of a measure over the rows where both sides have it: {turns, a, b, delta}, nulls when none. */
function meanBoth(rows, get) {
  const s = sumBoth(rows, get, 1e6);
  if (!s.turns) return { turns: 0, a: null, b: null, delta: null };
  return { turns: s.turns, a: round1(s.a / s.turns), b: round1(s.b / s.turns), delta: round1(s.delta / s.turns) };
}

/**
 * A recording (A) against its re-run (B), turn by turn (paired by position: B's turn
 * k sent A's turn k's text), with totals over the run.
 */
export function compareRuns(A, B) {
  const rows = Array.from({ length: Math.max(A.turns.length, B.turns.length) }, (_, i) => compareRow(A, B, i));
  const paired = rows.filter((r) => r.pair === 'paired');
  const count = (f) => rows.reduce((s, r) => s + f(r), 0);
  return {
    rows,
    totals: {
      turns_a: A.turns.length,
      turns_b: B.turns.length,
      paired: paired.length,
      not_run: rows.filter((r) => r.pair === 'not_run').length,
      extra: rows.filter((r) => r.pair === 'extra').length,
      changed_turns: rows.filter((r) => r.changed).length,
      words_changed: count((r) => (r.output ? r.output.words_changed : 0)),
      similarity_mean: paired.length ? round4(paired.reduce((s, r) => s + r.output.similarity, 0) / paired.length) : null,
      tools: { same: count((r) => r.tool_counts.same), changed: count((r) => r.tool_counts.changed), added: count((r) => r.tool_counts.added), removed: count((r) => r.tool_counts.removed) },
      ok_to_error: count((r) => r.ok_to_error),
      error_to_ok: count((r) => r.error_to_ok),
      finish_changed: paired.filter((r) => !r.finish.same).length,
      usage: {
        input_tokens: sumBoth(paired, (r) => r.usage.input_tokens, 1),
        output_tokens: sumBoth(paired, (r) => r.usage.output_tokens, 1),
      },
      timing: {
        total_ms: sumBoth(paired, (r) => r.timing.total_ms),
        first_text_ms_mean: meanBoth(paired, (r) => r.timing.first_text_ms),
      },
    },
  };
}

const runSide = (doc, role) => ({
  role, session_id: doc.session_id, agent: { agent_id: doc.agent.agent_id, display_name: doc.agent.display_name ?? null },
  started_at: doc.started_at ?? null, turns: doc.turns.length,
});

/**
 * The comparison as its export document (docs/rerun-comparison.schema.json). `run`:
 * how the re-run went, {state, planned, sent}; `exportedAt`: an ISO time.
 */
export function comparisonDocument(A, B, run, exportedAt) {
  const model = compareRuns(A, B);
  return {
    format: COMPARISON_FORMAT, version: COMPARISON_VERSION, exported_at: exportedAt, similarity: SIMILARITY,
    a: runSide(A, 'recording'), b: runSide(B, 'rerun'),
    run: { state: run.state, planned: run.planned, sent: run.sent },
    rows: model.rows, totals: model.totals,
  };
}
