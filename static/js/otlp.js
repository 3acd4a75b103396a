// OTLP/JSON for the flight recorder (docs/otlp.md), pure (no DOM): a session document
// to an ExportTraceServiceRequest following the OpenTelemetry GenAI semantic
// conventions v1.41.0 (Development status), and back; and the one reader of an
// imported file, which takes a session document or an OTLP/JSON trace (ours, or a
// GenAI trace from another tool: chat / invoke_agent and execute_tool spans) and
// returns a validated session document, or refuses it with a typed ImportRefused.

import { ImportRefused, checkSessionDocument, isObject, turnTimeline, validateSessionDocument } from './flight-recorder.js';
import { affectAcross } from './compare.js';

export const SEMCONV_VERSION = '1.41.0';
const OWN_FORMAT = 'ratatoskr-session-otlp';
const SPAN_KIND_INTERNAL = 1;
const SPAN_KIND_CLIENT = 3;
const STATUS_ERROR = 2;
const TURN_OPERATIONS = ['invoke_agent', 'chat', 'text_completion', 'generate_content'];
const MAX_SPANS = 100000;

// ---- ids, times and attribute values ---------------------------------------------------

/** A deterministic id of `bytes` bytes (hex) from a seed: FNV-1a over the seed and a counter. */
function hexId(seed, bytes) {
  let out = '';
  for (let k = 0; out.length < bytes * 2; k += 1) {
    let h = 0x811c9dc5;
    const s = seed + '#' + k;
    for (let i = 0; i < s.length; i += 1) { h ^= s.charCodeAt(i); h = Math.imul(h, 0x01000193) >>> 0; }
    out += h.toString(16).padStart(8, '0');
  }
  out = out.slice(0, bytes * 2);
  return /^0+$/.test(out) ? '1'.padStart(bytes * 2, '0') : out; // an all-zero id is invalid
}

/** Unix nanoseconds (a decimal string) of an ISO time plus ms. */
function nanos(iso, ms) {
  const base = Date.parse(iso);
  return (BigInt(Number.isFinite(base) ? base : 0) * 1000000n + BigInt(Math.round((ms || 0) * 1e6))).toString();
}

const sv = (key, v) => ({ key, value: { stringValue: String(v) } });
const iv = (key, v) => ({ key, value: { intValue: String(Math.trunc(v)) } });
const dv = (key, v) => ({ key, value: { doubleValue: v } });
const bv = (key, v) => ({ key, value: { boolValue: v === true } });
const jv = (key, v) => sv(key, JSON.stringify(v));
const num = (v) => typeof v === 'number' && Number.isFinite(v);

// What a recorded event's data keeps without content: no text, reasoning, arguments or output.
const KEEP_WITHOUT_CONTENT = {
  'turn.started': ['turn_id'], tool_call: ['call_id', 'name'], tool_result: ['call_id', 'name', 'is_error'],
  done: ['turn_id', 'usage', 'finish_reason'], error: ['code', 'message'], cancelled: ['turn_id'],
};
function withoutContent(name, data) {
  const keep = KEEP_WITHOUT_CONTENT[name] || [];
  return Object.fromEntries(Object.entries(data).filter(([k]) => keep.includes(k)));
}

// ---- export ---------------------------------------------------------------------------

/**
 * A session document as an OTLP/JSON ExportTraceServiceRequest: one trace, a
 * `ratatoskr.session` span, an `invoke_agent {agent}` span per turn with an
 * `execute_tool {name}` span per tool call. Prompts, outputs, reasoning and tool
 * arguments / results only when `content` is true.
 */
export function sessionToOtlp(doc, { content = false } = {}) {
  const traceId = hexId('trace:' + doc.session_id + ':' + (doc.started_at ?? ''), 16);
  const sessionSpanId = hexId('session:' + doc.session_id, 8);
  const agentName = doc.agent.display_name ?? doc.agent.agent_id;
  const common = [sv('gen_ai.conversation.id', doc.session_id), sv('gen_ai.agent.id', doc.agent.agent_id)];
  if (doc.agent.display_name !== null) common.push(sv('gen_ai.agent.name', doc.agent.display_name));
  const spans = [];
  const started = doc.started_at ?? (doc.turns[0] ? doc.turns[0].started_at : doc.exported_at);
  let sessionEnd = nanos(started, 0);
  const later = (x, y) => (BigInt(x) > BigInt(y) ? x : y);

  doc.turns.forEach((turn, i) => {
    const spanId = hexId('turn:' + doc.session_id + ':' + turn.index + ':' + i, 8);
    const last = turn.events[turn.events.length - 1];
    const endMs = turn.terminal && num(turn.terminal.browser_ms) ? turn.terminal.browser_ms : (last ? last.browser_ms : 0);
    const term = turn.terminal;
    const tdata = term ? term.data : {};
    const attrs = [sv('gen_ai.operation.name', 'invoke_agent'), sv('gen_ai.provider.name', 'ratatoskr'), ...common,
      iv('ratatoskr.turn.index', turn.index), sv('ratatoskr.turn.started_at', turn.started_at)];
    const started0 = turn.events.find((e) => e.event === 'turn.started');
    if (started0 && typeof started0.data.turn_id === 'string') attrs.push(sv('gen_ai.response.id', started0.data.turn_id));
    if (num(turn.first_byte_ms)) attrs.push(dv('gen_ai.response.time_to_first_chunk', turn.first_byte_ms / 1000), dv('ratatoskr.turn.first_byte_ms', turn.first_byte_ms));
    if (num(turn.server_t0)) attrs.push(dv('ratatoskr.turn.server_t0', turn.server_t0));
    if (term && term.kind === 'done' && typeof tdata.finish_reason === 'string') attrs.push({ key: 'gen_ai.response.finish_reasons', value: { arrayValue: { values: [{ stringValue: tdata.finish_reason }] } } });
    if (term && isObject(tdata.usage)) {
      if (num(tdata.usage.input_tokens)) attrs.push(iv('gen_ai.usage.input_tokens', tdata.usage.input_tokens));
      if (num(tdata.usage.output_tokens)) attrs.push(iv('gen_ai.usage.output_tokens', tdata.usage.output_tokens));
    }
    if (term && term.kind === 'error') attrs.push(sv('error.type', typeof tdata.code === 'string' ? tdata.code : '_OTHER'));
    if (term) attrs.push(jv('ratatoskr.turn.terminal', { ...term, data: content ? term.data : withoutContent(term.kind, term.data) }));
    attrs.push(jv('ratatoskr.turn.stalls', turn.stalls));
    if (turn.affect_at_start !== undefined) attrs.push(jv('ratatoskr.turn.affect_at_start', turn.affect_at_start));
    const affect = affectAcross(doc, i);
    if (affect) {
      if (affect.before !== null) attrs.push(sv('ratatoskr.affect.before', affect.before));
      if (affect.after !== null) attrs.push(sv('ratatoskr.affect.after', affect.after));
      for (const m of affect.metrics) if (m.delta !== null) attrs.push(dv('ratatoskr.affect.delta.' + m.key, m.delta));
    }
    const bifrost = doc.bifrost_snapshots.find((b) => b.fetched_at >= turn.started_at && b.ok);
    if (bifrost) attrs.push(jv('ratatoskr.bifrost.state', bifrost.body));
    if (content) {
      attrs.push(jv('gen_ai.input.messages', [{ role: 'user', parts: [{ type: 'text', content: turn.user_text }] }]));
      const text = turn.events.filter((e) => e.event === 'text').map((e) => String(e.data.delta ?? '')).join('');
      const reasoning = turn.events.filter((e) => e.event === 'thinking').map((e) => String(e.data.delta ?? '')).join('');
      const parts = (reasoning ? [{ type: 'reasoning', content: reasoning }] : []).concat([{ type: 'text', content: text }]);
      attrs.push(jv('gen_ai.output.messages', [{ role: 'assistant', parts, finish_reason: term && term.kind === 'done' ? (tdata.finish_reason ?? null) : (term ? term.kind : null) }]));
    }
    attrs.push(bv('ratatoskr.content', content));
    const events = turn.events.map((e) => ({
      timeUnixNano: nanos(turn.started_at, e.browser_ms), name: 'ratatoskr.event',
      attributes: [sv('ratatoskr.event.name', e.event), jv('ratatoskr.event.data', content ? e.data : withoutContent(e.event, e.data)),
        dv('ratatoskr.event.browser_ms', e.browser_ms), ...(num(e.server_ms) ? [dv('ratatoskr.event.server_ms', e.server_ms)] : [])],
    }));
    for (const s of turn.stalls) {
      events.push({ timeUnixNano: nanos(turn.started_at, s.to_ms), name: 'ratatoskr.stall', attributes: [dv('ratatoskr.stall.from_ms', s.from_ms), dv('ratatoskr.stall.to_ms', s.to_ms), dv('ratatoskr.stall.silence_ms', s.to_ms - s.from_ms)] });
    }
    const t = turnTimeline(turn);
    if (t.buffering.buffered) {
      const b = t.buffering;
      events.push({ timeUnixNano: nanos(turn.started_at, endMs), name: 'ratatoskr.response_buffered',
        attributes: [iv('ratatoskr.buffering.bunched', b.bunched), iv('ratatoskr.buffering.stamped', b.stamped), dv('ratatoskr.buffering.window_ms', b.window_ms), dv('ratatoskr.buffering.server_spread_ms', b.server_spread_ms)] });
    }
    events.sort((x, y) => (BigInt(x.timeUnixNano) < BigInt(y.timeUnixNano) ? -1 : BigInt(x.timeUnixNano) > BigInt(y.timeUnixNano) ? 1 : 0));
    const span = {
      traceId, spanId, parentSpanId: sessionSpanId, name: 'invoke_agent ' + agentName, kind: SPAN_KIND_CLIENT,
      startTimeUnixNano: nanos(turn.started_at, 0), endTimeUnixNano: nanos(turn.started_at, endMs), attributes: attrs, events,
    };
    if (term && term.kind === 'error') span.status = { code: STATUS_ERROR, message: String(tdata.code ?? 'error') };
    spans.push(span);
    sessionEnd = later(sessionEnd, span.endTimeUnixNano);
    // One execute_tool span per call, from its tool_call to its tool_result.
    const results = new Map();
    for (const e of turn.events) if (e.event === 'tool_result') results.set(String(e.data.call_id), e);
    turn.events.forEach((e, j) => {
      if (e.event !== 'tool_call') return;
      const res = results.get(String(e.data.call_id));
      const tattrs = [sv('gen_ai.operation.name', 'execute_tool'), sv('gen_ai.tool.name', String(e.data.name ?? '?')), sv('gen_ai.tool.type', 'function'), ...common];
      if (e.data.call_id !== undefined && e.data.call_id !== null) tattrs.push(sv('gen_ai.tool.call.id', String(e.data.call_id)));
      if (content) tattrs.push(jv('gen_ai.tool.call.arguments', e.data.arguments ?? {}));
      const tspan = {
        traceId, spanId: hexId('tool:' + spanId + ':' + j, 8), parentSpanId: spanId, name: 'execute_tool ' + String(e.data.name ?? '?'), kind: SPAN_KIND_INTERNAL,
        startTimeUnixNano: nanos(turn.started_at, e.browser_ms), endTimeUnixNano: nanos(turn.started_at, res ? res.browser_ms : endMs), attributes: tattrs,
      };
      if (res) {
        tattrs.push(iv('ratatoskr.tool.result_size', String(res.data.output ?? '').length));
        if (content) tattrs.push(sv('gen_ai.tool.call.result', String(res.data.output ?? '')));
        if (res.data.is_error === true) { tattrs.push(sv('error.type', 'tool_error')); tspan.status = { code: STATUS_ERROR, message: 'tool_error' }; }
      } else {
        tattrs.push(bv('ratatoskr.tool.no_result', true));
      }
      spans.push(tspan);
    });
  });

  const sattrs = [...common, sv('ratatoskr.session.exported_at', doc.exported_at)];
  if (doc.started_at !== undefined) sattrs.push(sv('ratatoskr.session.started_at', doc.started_at));
  if (doc.stall_ms !== undefined) sattrs.push(dv('ratatoskr.session.stall_ms', doc.stall_ms));
  if (doc.bifrost_visible_host !== undefined && doc.bifrost_visible_host !== null) sattrs.push(sv('ratatoskr.bifrost.visible_host', doc.bifrost_visible_host));
  if (doc.tools !== null) sattrs.push(jv('ratatoskr.session.tools', doc.tools));
  sattrs.push(jv('ratatoskr.bifrost.snapshots', doc.bifrost_snapshots), jv('ratatoskr.admin_events', doc.admin_events), jv('ratatoskr.affect.history', doc.affect_history));
  spans.unshift({
    traceId, spanId: sessionSpanId, name: 'ratatoskr.session', kind: SPAN_KIND_INTERNAL,
    startTimeUnixNano: nanos(started, 0), endTimeUnixNano: sessionEnd, attributes: sattrs,
  });
  return {
    resourceSpans: [{
      resource: { attributes: [sv('service.name', 'ratatoskr-console'), sv('ratatoskr.export.format', OWN_FORMAT), iv('ratatoskr.export.version', 1), sv('ratatoskr.semconv.version', SEMCONV_VERSION), bv('ratatoskr.content', content)] },
      scopeSpans: [{ scope: { name: 'ratatoskr-web.flight-recorder', version: '1' }, spans }],
    }],
  };
}

// ---- import: check the OTLP/JSON structure, then map it ----------------------------------

const refuse = (code, message) => { throw new ImportRefused(code, message); };
const bad = (path, what) => refuse('import_invalid_otlp', path + ' ' + what);

/** An AnyValue (OTLP JSON mapping) to a plain value; refuses anything else. */
function anyValue(v, path, depth = 0) {
  if (!isObject(v) || depth > 16) bad(path, 'must be an AnyValue object');
  const keys = Object.keys(v);
  if (keys.length === 0) return null;
  if (keys.length !== 1) bad(path, 'must hold one value');
  const [k] = keys;
  const x = v[k];
  if (k === 'stringValue') { if (typeof x !== 'string') bad(path + '.stringValue', 'must be a string'); return x; }
  if (k === 'boolValue') { if (typeof x !== 'boolean') bad(path + '.boolValue', 'must be a boolean'); return x; }
  if (k === 'intValue') { if (!(Number.isInteger(x) || (typeof x === 'string' && /^-?\d{1,19}$/.test(x)))) bad(path + '.intValue', 'must be an integer or its decimal string'); return Number(x); }
  if (k === 'doubleValue') { if (!(num(x) || (typeof x === 'string' && /^(-?\d+(\.\d+)?([eE][+-]?\d+)?|NaN|-?Infinity)$/.test(x)))) bad(path + '.doubleValue', 'must be a number'); return Number(x); }
  if (k === 'arrayValue') {
    if (!isObject(x) || (x.values !== undefined && !Array.isArray(x.values))) bad(path + '.arrayValue', 'must be {values: [...]}');
    return (x.values || []).map((e, i) => anyValue(e, path + '.arrayValue.values[' + i + ']', depth + 1));
  }
  if (k === 'kvlistValue') {
    if (!isObject(x) || (x.values !== undefined && !Array.isArray(x.values))) bad(path + '.kvlistValue', 'must be {values: [...]}');
    return attributeMap(x.values || [], path + '.kvlistValue.values', depth + 1);
  }
  if (k === 'bytesValue') { if (typeof x !== 'string') bad(path + '.bytesValue', 'must be a string'); return x; }
  return bad(path, 'has an unknown value type ' + JSON.stringify(k).slice(0, 40));
}

function attributeMap(list, path, depth = 0) {
  if (list === undefined) return new Map();
  if (!Array.isArray(list)) bad(path, 'must be an array');
  const out = new Map();
  list.forEach((a, i) => {
    const p = path + '[' + i + ']';
    if (!isObject(a) || typeof a.key !== 'string') bad(p, 'must be {key, value}');
    out.set(a.key, a.value === undefined ? null : anyValue(a.value, p + '.value', depth));
  });
  return out;
}

const HEX = (n) => new RegExp('^[0-9a-fA-F]{' + n + '}$');
const TIME = (v) => (typeof v === 'string' && /^\d{1,20}$/.test(v)) || (Number.isInteger(v) && v >= 0);

/** Every span of a request, checked against the OTLP JSON mapping, with its attributes decoded. */
function readSpans(req) {
  if (!Array.isArray(req.resourceSpans)) bad('resourceSpans', 'must be an array');
  const spans = [];
  const resources = [];
  req.resourceSpans.forEach((rs, i) => {
    const p = 'resourceSpans[' + i + ']';
    if (!isObject(rs)) bad(p, 'must be an object');
    const resource = attributeMap(rs.resource === undefined ? [] : (isObject(rs.resource) ? rs.resource.attributes : bad(p + '.resource', 'must be an object')), p + '.resource.attributes');
    resources.push(resource);
    if (rs.scopeSpans !== undefined && !Array.isArray(rs.scopeSpans)) bad(p + '.scopeSpans', 'must be an array');
    (rs.scopeSpans || []).forEach((ss, j) => {
      const q = p + '.scopeSpans[' + j + ']';
      if (!isObject(ss) || (ss.spans !== undefined && !Array.isArray(ss.spans))) bad(q, 'must be {spans: [...]}');
      (ss.spans || []).forEach((s, k) => {
        const r = q + '.spans[' + k + ']';
        if (spans.length >= MAX_SPANS) bad('resourceSpans', 'holds more than ' + MAX_SPANS + ' spans');
        if (!isObject(s)) bad(r, 'must be an object');
        if (typeof s.traceId !== 'string' || !HEX(32).test(s.traceId)) bad(r + '.traceId', 'must be 32 hex digits');
        if (typeof s.spanId !== 'string' || !HEX(16).test(s.spanId)) bad(r + '.spanId', 'must be 16 hex digits');
        if (s.parentSpanId !== undefined && s.parentSpanId !== '' && !(typeof s.parentSpanId === 'string' && HEX(16).test(s.parentSpanId))) bad(r + '.parentSpanId', 'must be 16 hex digits or empty');
        if (typeof s.name !== 'string') bad(r + '.name', 'must be a string');
        if (!TIME(s.startTimeUnixNano)) bad(r + '.startTimeUnixNano', 'must be unix nanoseconds');
        if (!TIME(s.endTimeUnixNano)) bad(r + '.endTimeUnixNano', 'must be unix nanoseconds');
        if (s.status !== undefined && (!isObject(s.status) || (s.status.code !== undefined && ![0, 1, 2, 'STATUS_CODE_UNSET', 'STATUS_CODE_OK', 'STATUS_CODE_ERROR'].includes(s.status.code)))) bad(r + '.status', 'must be {code, message}');
        if (s.events !== undefined && !Array.isArray(s.events)) bad(r + '.events', 'must be an array');
        const events = (s.events || []).map((e, m) => {
          if (!isObject(e) || typeof (e.name ?? '') !== 'string' || !TIME(e.timeUnixNano ?? '0')) bad(r + '.events[' + m + ']', 'must be {timeUnixNano, name, attributes}');
          return { name: e.name ?? '', time: BigInt(e.timeUnixNano ?? 0), attrs: attributeMap(e.attributes, r + '.events[' + m + '].attributes') };
        });
        const code = s.status ? s.status.code : 0;
        spans.push({
          traceId: s.traceId.toLowerCase(), spanId: s.spanId.toLowerCase(), parent: (s.parentSpanId || '').toLowerCase(), name: s.name,
          start: BigInt(s.startTimeUnixNano), end: BigInt(s.endTimeUnixNano), attrs: attributeMap(s.attributes, r + '.attributes'),
          events, error: code === 2 || code === 'STATUS_CODE_ERROR', statusMessage: s.status && typeof s.status.message === 'string' ? s.status.message : '', resource,
        });
      });
    });
  });
  return { spans, resources };
}

/** A JSON string attribute, parsed; refused as import_invalid_otlp when it is not JSON. */
function jsonAttr(attrs, key, where, fallback) {
  if (!attrs.has(key)) return fallback;
  const v = attrs.get(key);
  if (typeof v !== 'string') bad(where + ' ' + key, 'must be a JSON string');
  try { return JSON.parse(v); } catch (_) { return bad(where + ' ' + key, 'must be a JSON string'); }
}

const resultText = (v) => (v === undefined || v === null ? '' : typeof v === 'string' ? v : JSON.stringify(v));
const msBetween = (from, to) => Math.max(0, Number(to - from) / 1e6);
const iso = (ns) => new Date(Number(ns / 1000000n)).toISOString();

/** The user's text in gen_ai.input.messages (the last user message's text parts), else ''. */
function userText(attrs, where) {
  const msgs = jsonAttr(attrs, 'gen_ai.input.messages', where, []);
  const users = Array.isArray(msgs) ? msgs.filter((m) => isObject(m) && m.role === 'user') : [];
  const last = users[users.length - 1];
  return last && Array.isArray(last.parts) ? last.parts.filter((p) => isObject(p) && p.type === 'text').map((p) => String(p.content ?? '')).join('') : '';
}

/** Our own export back to the session document it was made from. */
function ownToSession(spans) {
  const session = spans.find((s) => s.name === 'ratatoskr.session');
  if (!session) bad('resourceSpans', 'has no ratatoskr.session span');
  const a = session.attrs;
  const str = (key) => (typeof a.get(key) === 'string' ? a.get(key) : bad('ratatoskr.session ' + key, 'must be a string'));
  const doc = {
    format: 'ratatoskr-session', version: 1, exported_at: str('ratatoskr.session.exported_at'),
    agent: { agent_id: str('gen_ai.agent.id'), display_name: a.has('gen_ai.agent.name') ? str('gen_ai.agent.name') : null },
    session_id: str('gen_ai.conversation.id'),
  };
  if (a.has('ratatoskr.bifrost.visible_host')) doc.bifrost_visible_host = str('ratatoskr.bifrost.visible_host');
  else doc.bifrost_visible_host = null;
  if (a.has('ratatoskr.session.started_at')) doc.started_at = str('ratatoskr.session.started_at');
  if (a.has('ratatoskr.session.stall_ms')) doc.stall_ms = a.get('ratatoskr.session.stall_ms');
  const turnSpans = spans.filter((s) => s.parent === session.spanId && s.attrs.get('gen_ai.operation.name') === 'invoke_agent')
    .sort((x, y) => x.attrs.get('ratatoskr.turn.index') - y.attrs.get('ratatoskr.turn.index') || (x.start < y.start ? -1 : 1));
  doc.turns = turnSpans.map((s) => {
    const where = 'span ' + s.spanId;
    const t = s.attrs;
    const turn = {
      index: t.get('ratatoskr.turn.index'), user_text: userText(t, where), started_at: t.get('ratatoskr.turn.started_at'),
      server_t0: t.has('ratatoskr.turn.server_t0') ? t.get('ratatoskr.turn.server_t0') : null,
      first_byte_ms: t.has('ratatoskr.turn.first_byte_ms') ? t.get('ratatoskr.turn.first_byte_ms') : null,
      events: s.events.filter((e) => e.name === 'ratatoskr.event').map((e) => ({
        event: e.attrs.get('ratatoskr.event.name'), data: jsonAttr(e.attrs, 'ratatoskr.event.data', where, {}),
        server_ms: e.attrs.has('ratatoskr.event.server_ms') ? e.attrs.get('ratatoskr.event.server_ms') : null,
        browser_ms: e.attrs.get('ratatoskr.event.browser_ms'),
      })),
      terminal: jsonAttr(t, 'ratatoskr.turn.terminal', where, null),
      stalls: jsonAttr(t, 'ratatoskr.turn.stalls', where, []),
    };
    if (t.has('ratatoskr.turn.affect_at_start')) turn.affect_at_start = jsonAttr(t, 'ratatoskr.turn.affect_at_start', where, null);
    return turn;
  });
  doc.tools = jsonAttr(a, 'ratatoskr.session.tools', 'ratatoskr.session', null);
  doc.bifrost_snapshots = jsonAttr(a, 'ratatoskr.bifrost.snapshots', 'ratatoskr.session', []);
  doc.admin_events = jsonAttr(a, 'ratatoskr.admin_events', 'ratatoskr.session', []);
  doc.affect_history = jsonAttr(a, 'ratatoskr.affect.history', 'ratatoskr.session', []);
  return doc;
}

/**
 * A GenAI trace from another tool: each invoke_agent span is a turn (else each chat /
 * completion span), execute_tool spans its tool calls (under it, else the latest turn
 * of the trace started before them), the times from the spans.
 */
function foreignToSession(spans, resources) {
  const op = (s) => s.attrs.get('gen_ai.operation.name');
  const agents = spans.filter((s) => op(s) === 'invoke_agent');
  const turnsFrom = (agents.length ? agents : spans.filter((s) => TURN_OPERATIONS.includes(op(s)))).sort((x, y) => (x.start < y.start ? -1 : x.start > y.start ? 1 : 0));
  const tools = spans.filter((s) => op(s) === 'execute_tool');
  if (!turnsFrom.length) refuse('import_no_genai_spans', 'an OTLP trace without GenAI spans (no span has gen_ai.operation.name ' + TURN_OPERATIONS.join(', ') + ')');
  const byId = new Map(spans.map((s) => [s.traceId + s.spanId, s]));
  const turnOf = (tool) => {
    for (let p = byId.get(tool.traceId + tool.parent), hops = 0; p && hops < 64; p = byId.get(p.traceId + p.parent), hops += 1) if (turnsFrom.includes(p)) return p;
    const before = turnsFrom.filter((t) => t.traceId === tool.traceId && t.start <= tool.start);
    return before[before.length - 1] || turnsFrom.find((t) => t.traceId === tool.traceId) || null;
  };
  const first = turnsFrom[0];
  const pick = (key) => { for (const s of turnsFrom) if (typeof s.attrs.get(key) === 'string') return s.attrs.get(key); return null; };
  const service = resources.map((r) => r.get('service.name')).find((v) => typeof v === 'string');
  const turns = turnsFrom.map((s, i) => {
    const where = 'span ' + s.spanId;
    const events = [{ event: 'turn.started', data: { turn_id: typeof s.attrs.get('gen_ai.response.id') === 'string' ? s.attrs.get('gen_ai.response.id') : s.spanId }, server_ms: null, browser_ms: 0 }];
    for (const tool of tools.filter((x) => turnOf(x) === s)) {
      const name = String(tool.attrs.get('gen_ai.tool.name') ?? tool.name.replace(/^execute_tool /, ''));
      const callId = String(tool.attrs.get('gen_ai.tool.call.id') ?? tool.spanId);
      const args = tool.attrs.has('gen_ai.tool.call.arguments') ? tool.attrs.get('gen_ai.tool.call.arguments') : {};
      let parsed = args;
      if (typeof args === 'string') { try { parsed = JSON.parse(args); } catch (_) { parsed = args; } }
      events.push({ event: 'tool_call', data: { call_id: callId, name, arguments: parsed }, server_ms: null, browser_ms: msBetween(s.start, tool.start) });
      events.push({ event: 'tool_result', data: { call_id: callId, name, output: resultText(tool.attrs.get('gen_ai.tool.call.result')), is_error: tool.error || tool.attrs.has('error.type') }, server_ms: null, browser_ms: msBetween(s.start, tool.end) });
    }
    const toolEnd = events.reduce((m, e) => Math.max(m, e.browser_ms), 0);
    const ttfc = s.attrs.get('gen_ai.response.time_to_first_chunk');
    const out = jsonAttr(s.attrs, 'gen_ai.output.messages', where, []);
    const text = (Array.isArray(out) ? out : []).filter((m) => isObject(m) && Array.isArray(m.parts))
      .flatMap((m) => m.parts.filter((p) => isObject(p) && p.type === 'text').map((p) => String(p.content ?? ''))).join('');
    const endMs = Math.max(msBetween(s.start, s.end), toolEnd); // a tool after its chat span ends the turn later
    if (text) events.push({ event: 'text', data: { delta: text }, server_ms: null, browser_ms: endMs });
    events.sort((x, y) => x.browser_ms - y.browser_ms);
    const reasons = s.attrs.get('gen_ai.response.finish_reasons');
    const usage = {};
    for (const k of ['input_tokens', 'output_tokens']) if (num(s.attrs.get('gen_ai.usage.' + k))) usage[k] = s.attrs.get('gen_ai.usage.' + k);
    const data = s.error
      ? { code: String(s.attrs.get('error.type') ?? 'error'), message: s.statusMessage }
      : { usage, finish_reason: Array.isArray(reasons) && reasons.length ? String(reasons[0]) : null };
    const kind = s.error ? 'error' : 'done';
    events.push({ event: kind, data, server_ms: null, browser_ms: endMs });
    return {
      index: i + 1, user_text: userText(s.attrs, where), started_at: iso(s.start), server_t0: null,
      first_byte_ms: num(ttfc) && ttfc >= 0 ? Math.round(ttfc * 1e4) / 10 : null,
      events, terminal: { kind, origin: 'stream', data, browser_ms: endMs }, stalls: [],
    };
  });
  const agentId = pick('gen_ai.agent.id') ?? pick('gen_ai.agent.name') ?? service ?? 'unknown';
  return {
    format: 'ratatoskr-session', version: 1, exported_at: iso(first.start),
    agent: { agent_id: agentId, display_name: pick('gen_ai.agent.name') ?? service ?? null },
    session_id: pick('gen_ai.conversation.id') ?? first.traceId, bifrost_visible_host: null, started_at: iso(first.start),
    turns, tools: null, bifrost_snapshots: [], admin_events: [], affect_history: [],
  };
}

/** An OTLP/JSON request (parsed) to a validated session document. */
export function otlpToSession(req) {
  const { spans, resources } = readSpans(req);
  const own = resources.some((r) => r.get('ratatoskr.export.format') === OWN_FORMAT);
  const doc = own ? ownToSession(spans) : foreignToSession(spans, resources);
  validateSessionDocument(doc); // the mapped document passes the same check as a session file
  return doc;
}

/** The one reader of an imported file: a session document or an OTLP/JSON trace. */
export function parseImportText(text) {
  let value;
  try { value = JSON.parse(text); } catch (_) { throw new ImportRefused('import_invalid_json', 'the file is not JSON'); }
  if (isObject(value) && 'resourceSpans' in value) return otlpToSession(value);
  if (isObject(value) && 'format' in value) return checkSessionDocument(value);
  throw new ImportRefused('import_wrong_format', 'neither a ratatoskr session document (its "format" must be "ratatoskr-session") nor an OTLP/JSON trace (resourceSpans)');
}
