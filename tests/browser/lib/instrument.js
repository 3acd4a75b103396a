'use strict';
// The init script every test page gets, before the console's own script runs
// (Playwright injects it over CDP, so the page's CSP does not apply to it).
// It only observes: counts EventSources and intervals, logs fetches, CSP
// violations and the reasoning indicator's life, and arms the XSS canary.

function INSTRUMENT() {
  if (window.__rec) return;
  const perf = performance;
  const rec = {
    cspViolations: [],
    es: [],
    activeIntervals: new Set(),
    intervalsCreated: 0,
    fetches: [],
    samples: [],
    notes: [],
    statusTimes: [],
    lastStatusAt: null,
    xssCalls: 0,
  };
  Object.defineProperty(window, '__rec', { value: rec });

  // Canary: every payload that would run writes window.__xss (or opens a dialog,
  // which the test sees as a Playwright `dialog` event).
  let canary;
  Object.defineProperty(window, '__xss', {
    configurable: false,
    get() { return canary; },
    set(v) { rec.xssCalls += 1; canary = v; },
  });

  document.addEventListener('securitypolicyviolation', (e) => {
    rec.cspViolations.push({
      directive: e.violatedDirective, blocked: e.blockedURI, sample: e.sample,
      source: e.sourceFile, line: e.lineNumber,
    });
  }, true);

  // EventSource: count every instance and every close() the page makes.
  const NativeES = window.EventSource;
  class CountingEventSource extends NativeES {
    constructor(url, init) {
      super(url, init);
      rec.es.push({ url: String(url), es: this, closedByPage: false, openedAt: perf.now() });
    }
    close() {
      const entry = rec.es.find((e) => e.es === this);
      if (entry) entry.closedByPage = true;
      return super.close();
    }
  }
  window.EventSource = CountingEventSource;

  // Intervals: the set of ids created and not yet cleared.
  const nativeSetInterval = window.setInterval;
  const nativeClearInterval = window.clearInterval;
  window.setInterval = function setInterval(fn, ms, ...args) {
    const id = nativeSetInterval.call(window, fn, ms, ...args);
    rec.activeIntervals.add(id);
    rec.intervalsCreated += 1;
    return id;
  };
  window.clearInterval = function clearInterval(id) {
    rec.activeIntervals.delete(id);
    return nativeClearInterval.call(window, id);
  };

  // fetch: URL, method and page-clock time of every call.
  const nativeFetch = window.fetch;
  window.fetch = function fetch(input, init) {
    const url = typeof input === 'string' ? input : (input && input.url) || String(input);
    rec.fetches.push({ url, method: (init && init.method) || 'GET', t: perf.now() });
    return nativeFetch.apply(this, arguments);
  };

  // The reasoning indicator and the terminal lines, sampled at every DOM change.
  const seenNotes = new WeakSet();
  const seenStatus = new WeakSet();
  let lastKey = '';
  function sample() {
    const t = perf.now();
    const msgs = document.querySelectorAll('#transcript .msg.assistant');
    const last = msgs[msgs.length - 1];
    const textNode = last && last.querySelector(':scope > .text');
    const textLen = textNode ? textNode.textContent.length : 0;
    const note = document.querySelector('.thinking-note');
    if (note && !seenNotes.has(note)) {
      seenNotes.add(note);
      rec.notes.push({ text: note.textContent, t, turn: msgs.length, textLen, italic: getComputedStyle(note).fontStyle });
    }
    for (const line of document.querySelectorAll('#transcript .status-line')) {
      if (seenStatus.has(line)) continue;
      seenStatus.add(line);
      rec.statusTimes.push({ kind: line.className, t });
      rec.lastStatusAt = t;
    }
    const key = msgs.length + '|' + !!note + '|' + textLen;
    if (key !== lastKey) {
      lastKey = key;
      rec.samples.push({ t, turn: msgs.length, note: !!note, textLen, notes: document.querySelectorAll('.thinking-note').length });
    }
  }
  document.addEventListener('DOMContentLoaded', () => {
    new MutationObserver(sample).observe(document.body, { childList: true, subtree: true, characterData: true });
  });

  rec.snapshot = () => ({
    cspViolations: rec.cspViolations.slice(),
    es: rec.es.map((e) => ({ url: e.url, readyState: e.es.readyState, closedByPage: e.closedByPage })),
    openES: rec.es.filter((e) => e.es.readyState !== 2).length,
    activeIntervals: rec.activeIntervals.size,
    intervalsCreated: rec.intervalsCreated,
    fetches: rec.fetches.slice(),
    samples: rec.samples.slice(),
    notes: rec.notes.slice(),
    statusTimes: rec.statusTimes.slice(),
    lastStatusAt: rec.lastStatusAt,
    xss: window.__xss,
    xssCalls: rec.xssCalls,
    now: perf.now(),
  });
}

module.exports = { INSTRUMENT };
