'use strict';
// A scripted upstream in Node: the Ratatoskr sessions API and the Worldtree affect
// read (docs/upstream.md sections 1-2), with every answer supplied by the test's
// scenario. The host's real outbound HTTP client talks to it over loopback.

const http = require('node:http');
const crypto = require('node:crypto');

function sseFrame(event, data, id) {
  let out = '';
  if (id !== undefined) out += `id: ${id}\n`;
  if (event !== undefined) out += `event: ${event}\n`;
  return out + `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;
}

class MockUpstream {
  /**
   * scenario: {
   *   agents: [{agent_id, display_name}],
   *   tools(session) -> inventory dict | {status},
   *   bifrost(session) -> dispatch dict | {status},
   *   affect(agentId, readIndex) -> snapshot | {status},
   *   turn(ctx) -> async; ctx = {session, text, turnId, index, send(event, data), sleep(ms), cancelled}
   *   adminEvents(session) -> [{type, data}] sent when a stream opens (for the newest session)
   *   adminEnds(session) -> true: that stream then ends (optional)
   *   sessionRefused(agentId) -> true: POST /v1/sessions answers 503 for that agent (optional)
   * }
   */
  constructor(scenario) {
    this.scenario = scenario;
    this.consumerKey = 'mock-consumer-' + crypto.randomBytes(6).toString('hex');
    this.adminKey = 'mock-admin-' + crypto.randomBytes(6).toString('hex');
    this.sessions = new Map();
    this.sessionOrder = [];
    this.turns = new Map();
    this.requests = [];
    this.affectReads = new Map();
    this.admin = { open: 0, total: 0, nextId: 1 };
    // Every turn stream: its session, the text it was sent, when it opened and closed (null: still open).
    this.turnStreams = [];
    this.sockets = new Set();
    this.timers = new Set();
  }

  async start() {
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch((err) => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: String(err) }));
      });
    });
    this.server.on('connection', (s) => { this.sockets.add(s); s.on('close', () => this.sockets.delete(s)); });
    await new Promise((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.origin = `http://127.0.0.1:${this.server.address().port}`;
    return this;
  }

  async stop() {
    for (const t of this.timers) clearInterval(t);
    for (const s of this.sockets) s.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }

  /** The host variables that point the app at this mock. */
  variables() {
    return {
      upstream_url: this.origin,
      upstream_origin: this.origin,
      affect_read_url: this.origin + '/affect',
      affect_origin: this.origin,
      bifrost_consumer_key: this.consumerKey,
      admin_key: this.adminKey,
      sse_keepalive_ms: '1000',
    };
  }

  reads(agentId) { return this.affectReads.get(agentId) || []; }

  json(res, status, body) {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
    res.end(JSON.stringify(body));
  }

  async body(req) {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const text = Buffer.concat(chunks).toString('utf8');
    return text ? JSON.parse(text) : {};
  }

  async handle(req, res) {
    const url = new URL(req.url, 'http://mock');
    const auth = req.headers.authorization || '';
    this.requests.push({ method: req.method, path: url.pathname + url.search, auth, at: Date.now() });
    const consumer = auth === `Bearer ${this.consumerKey}`;
    const admin = auth === `Bearer ${this.adminKey}`;
    const parts = url.pathname.split('/').filter(Boolean);
    const s = this.scenario;

    if (req.method === 'GET' && url.pathname === '/affect') {
      const agentId = url.searchParams.get('agent_id');
      const list = this.affectReads.get(agentId) || [];
      list.push(Date.now());
      this.affectReads.set(agentId, list);
      const snap = s.affect ? s.affect(agentId, list.length - 1) : { status: 404 };
      if (snap && snap.status) return this.json(res, snap.status, { error: 'none' });
      return this.json(res, 200, snap);
    }
    if (parts[0] !== 'v1') return this.json(res, 404, { error: 'not_found' });

    // Admin calls carry the admin key instead of the consumer bearer.
    if (req.method === 'GET' && url.pathname === '/v1/admin/events') {
      if (!admin) return this.json(res, 401, { error: 'unauthorized' });
      return this.adminStream(req, res);
    }
    if (req.method === 'GET' && parts[1] === 'sessions' && parts[3] === 'bifrost') {
      if (!admin) return this.json(res, 401, { error: 'unauthorized' });
      const session = this.sessions.get(parts[2]);
      if (!session) return this.json(res, 404, { error: 'not_bound' });
      const b = s.bifrost(session);
      return b.status ? this.json(res, b.status, { error: 'nope' }) : this.json(res, 200, b);
    }
    if (!consumer) return this.json(res, 401, { error: 'unauthorized' });

    if (req.method === 'GET' && url.pathname === '/v1/agents') return this.json(res, 200, { agents: s.agents });
    if (req.method === 'POST' && url.pathname === '/v1/sessions') {
      const body = await this.body(req);
      if (!s.agents.some((a) => a.agent_id === body.agent_id)) return this.json(res, 404, { error: 'unknown_agent' });
      if (s.sessionRefused && s.sessionRefused(body.agent_id)) return this.json(res, 503, { error: 'agent_unavailable' });
      const id = 's_' + crypto.randomBytes(8).toString('hex');
      const session = { session_id: id, agent_id: body.agent_id, end_user_id: body.end_user_id, turns: 0 };
      this.sessions.set(id, session);
      this.sessionOrder.push(id);
      return this.json(res, 201, { session_id: id, agent_id: body.agent_id, created_at: new Date().toISOString() });
    }
    const session = parts[1] === 'sessions' ? this.sessions.get(parts[2]) : null;
    if (parts[1] === 'sessions' && !session) return this.json(res, 404, { error: 'unknown_session' });
    if (req.method === 'GET' && parts[3] === 'tools' && parts.length === 4) {
      const inv = s.tools(session);
      return inv.status ? this.json(res, inv.status, { error: 'nope' }) : this.json(res, 200, inv);
    }
    if (req.method === 'POST' && parts[3] === 'turns' && parts.length === 4) {
      const body = await this.body(req);
      return this.turn(req, res, session, String(body.text));
    }
    if (req.method === 'POST' && parts[3] === 'turns' && parts[5] === 'cancel') {
      const turn = this.turns.get(parts[4]);
      if (!turn) return this.json(res, 404, { error: 'unknown_turn' });
      turn.cancel();
      return this.json(res, 202, {});
    }
    return this.json(res, 404, { error: 'not_found' });
  }

  async turn(req, res, session, text) {
    session.turns += 1;
    const turnId = 't_' + crypto.randomBytes(6).toString('hex');
    const stream = { session_id: session.session_id, text, opened: Date.now(), closed: null };
    this.turnStreams.push(stream);
    res.on('close', () => { stream.closed = Date.now(); });
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    let ended = false;
    let cancelWake = null;
    const ctx = {
      session, text, turnId, index: session.turns, cancelled: false,
      send(event, data) {
        if (ended) return;
        res.write(sseFrame(event, data));
        if (['done', 'error', 'cancelled'].includes(event)) { ended = true; res.end(); }
      },
      sleep(ms) {
        return new Promise((resolve) => {
          const t = setTimeout(resolve, ms);
          cancelWake = () => { clearTimeout(t); resolve(); };
        });
      },
    };
    this.turns.set(turnId, {
      cancel() {
        if (ended) return;
        ctx.cancelled = true;
        ctx.send('cancelled', { turn_id: turnId });
        if (cancelWake) cancelWake();
      },
    });
    res.on('close', () => { ended = true; if (cancelWake) cancelWake(); });
    ctx.send('turn.started', { turn_id: turnId });
    await this.scenario.turn(ctx);
    if (!ended) { ended = true; res.end(); }
  }

  adminStream(req, res) {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    this.admin.open += 1;
    this.admin.total += 1;
    const newest = this.sessions.get(this.sessionOrder[this.sessionOrder.length - 1]);
    const events = newest && this.scenario.adminEvents ? this.scenario.adminEvents(newest) : [];
    for (const ev of events) res.write(sseFrame(ev.type, ev.data, this.admin.nextId++));
    // adminEnds(session): the stream ends after its events (the proxy's stream_error connection_dropped).
    if (newest && this.scenario.adminEnds && this.scenario.adminEnds(newest)) {
      res.end();
      this.admin.open -= 1;
      return;
    }
    // Heartbeats keep the stream busy; the proxy drops them (system.heartbeat).
    const beat = setInterval(() => res.write(sseFrame('system.heartbeat', {}, this.admin.nextId++)), 500);
    this.timers.add(beat);
    res.on('close', () => {
      clearInterval(beat);
      this.timers.delete(beat);
      this.admin.open -= 1;
    });
  }
}

module.exports = { MockUpstream };
