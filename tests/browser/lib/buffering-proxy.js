'use strict';
// A reverse proxy that buffers, the way nginx does with `proxy_buffering on` and a
// large enough buffer: each response (status, headers and body) is held until the
// app has sent all of it, then sent in one piece with a Content-Length. It stands
// between the browser and the app in the flight-recorder tests: a turn stream
// relayed through it reaches the browser in one burst at the end of the turn.

const http = require('node:http');

const HOP_BY_HOP = ['connection', 'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'proxy-connection'];

class BufferingProxy {
  /** target: the app's base URL (http://127.0.0.1:PORT). */
  constructor(target) {
    this.target = new URL(target);
    this.sockets = new Set();
    this.upstreams = new Set();
    // One entry per response passed on: path, status, bytes, how long it was held.
    this.held = [];
  }

  async start() {
    this.server = http.createServer((req, res) => this.handle(req, res));
    this.server.on('connection', (s) => { this.sockets.add(s); s.on('close', () => this.sockets.delete(s)); });
    await new Promise((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${this.server.address().port}`;
    return this;
  }

  handle(req, res) {
    const headers = { ...req.headers, host: this.target.host };
    for (const h of HOP_BY_HOP) delete headers[h];
    const opened = Date.now();
    const upstream = http.request({
      hostname: this.target.hostname, port: this.target.port, method: req.method, path: req.url, headers,
    }, (answer) => {
      const chunks = [];
      answer.on('data', (c) => chunks.push(c));
      answer.on('end', () => {
        this.upstreams.delete(upstream);
        if (res.destroyed) return;
        const body = Buffer.concat(chunks);
        const out = { ...answer.headers };
        for (const h of HOP_BY_HOP) delete out[h];
        out['content-length'] = String(body.length);
        this.held.push({ path: req.url, status: answer.statusCode, bytes: body.length, heldMs: Date.now() - opened });
        res.writeHead(answer.statusCode, out);
        res.end(req.method === 'HEAD' ? undefined : body);
      });
      answer.on('error', () => res.destroy());
    });
    this.upstreams.add(upstream);
    upstream.on('error', () => {
      this.upstreams.delete(upstream);
      if (!res.headersSent && !res.destroyed) {
        res.writeHead(502, { 'content-type': 'text/plain' });
        res.end('bad gateway');
      } else {
        res.destroy();
      }
    });
    // The browser left (an EventSource closed, a fetch aborted): drop the upstream request.
    res.on('close', () => { if (!res.writableFinished) upstream.destroy(); });
    req.pipe(upstream);
  }

  async stop() {
    for (const u of this.upstreams) u.destroy();
    for (const s of this.sockets) s.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

module.exports = { BufferingProxy };
