'use strict';
// INV-004, statically: static/index.html and the console's modules (static/js/)
// have no HTML-string sink and nothing that evaluates strings as code, so upstream
// text can only reach the DOM as text; the page loads its own modules only. The
// checker is tested against samples first, so it can fail.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { INDEX_HTML, MODULES_DIR, CONSOLE_MODULES } = require('./lib/harness');

/** Every module's source, by its path on the site (/js/name.js). */
const MODULE_SOURCES = CONSOLE_MODULES.map((url) => [url, fs.readFileSync(path.join(MODULES_DIR, path.basename(url)), 'utf8')]);

const FORBIDDEN = [
  ['innerHTML', /\binnerHTML\b/],
  ['outerHTML', /\bouterHTML\b/],
  ['insertAdjacentHTML', /\binsertAdjacentHTML\b/],
  ['document.write', /\bdocument\s*\.\s*write(ln)?\b/],
  ['eval(', /\beval\s*\(/],
  ['new Function', /\bnew\s+Function\b/],
  ['Function(', /(^|[^.\w])Function\s*\(/],
  ['createContextualFragment', /\bcreateContextualFragment\b/],
  ['DOMParser', /\bDOMParser\b/],
  ['srcdoc', /\bsrcdoc\b/i],
  ['string timer', /\bset(Timeout|Interval)\s*\(\s*['"`]/],
  ['javascript: URL', /javascript:/i],
  ['inline event-handler attribute', /<[a-z][^>]*\son[a-z]+\s*=/i],
  ['inline style attribute', /<[a-z][^>]*\sstyle\s*=/i],
  ['event handler set as an attribute', /setAttribute\s*\(\s*['"`]on/i],
  ['event handler passed to el()', /[{,]\s*['"]?on[a-z]+['"]?\s*:/],
];

function sinks(source) {
  return FORBIDDEN.filter(([, re]) => re.test(source)).map(([name]) => name);
}

test('the sink checker finds every forbidden construct in samples', () => {
  const samples = {
    innerHTML: 'node.innerHTML = text;',
    outerHTML: 'node.outerHTML = x',
    insertAdjacentHTML: "node.insertAdjacentHTML('beforeend', x)",
    'document.write': 'document.write(x)',
    'eval(': 'eval (code)',
    'new Function': "new Function('return 1')",
    'Function(': "const f = Function('a', 'return a');",
    createContextualFragment: 'range.createContextualFragment(html)',
    DOMParser: 'new DOMParser().parseFromString(x, "text/html")',
    srcdoc: 'frame.srcdoc = x',
    'string timer': "setTimeout('doIt()', 5)",
    'javascript: URL': 'a.href = "javascript:void 0"',
    'inline event-handler attribute': '<button onclick="go()">',
    'inline style attribute': '<div style="color:red">',
    'event handler set as an attribute': "node.setAttribute('onclick', code)",
    'event handler passed to el()': "el('img', { onerror: code })",
  };
  for (const [name, sample] of Object.entries(samples)) {
    assert.ok(sinks(sample).includes(name), `${name} not detected in ${sample}`);
  }
  assert.deepEqual(sinks("node.textContent = text; el('div', { class: 'x', text }); es.onopen = () => {}; clearTimeout(t);"), []);
});

test('static/index.html and its modules have no HTML-string sink, eval, or inline handler', () => {
  assert.ok(MODULE_SOURCES.length > 0, 'the console has modules in static/js/');
  const found = [['static/index.html', fs.readFileSync(INDEX_HTML, 'utf8')], ...MODULE_SOURCES]
    .map(([name, source]) => [name, sinks(source)]).filter(([, names]) => names.length);
  assert.deepEqual(found, []);
});

test('static/index.html loads nothing from elsewhere: one module script, its own modules only, no inline script', () => {
  const html = fs.readFileSync(INDEX_HTML, 'utf8');
  const scripts = html.match(/<script\b[^>]*>/gi) || [];
  assert.deepEqual(scripts, ['<script type="module" src="/js/main.js" blocking="render">'], 'one module script, no inline script, no type tricks');
  assert.equal((html.match(/<style\b[^>]*>/gi) || []).length, 1, 'one inline <style>');
  assert.doesNotMatch(html, /\b(src|href|action)\s*=\s*["']?(https?:)?\/\//i, 'no external resources');
  assert.doesNotMatch(html, /@import|url\(\s*['"]?https?:/i, 'no external CSS');
  // Every module is preloaded (they load side by side), and nothing else is.
  const preloaded = [...html.matchAll(/<link rel="modulepreload" href="([^"]*)">/g)].map((m) => m[1]);
  assert.equal((html.match(/<link\b[^>]*>/gi) || []).length, preloaded.length + 1, 'the links are the icon and the module preloads');
  assert.deepEqual(preloaded.slice().sort(), CONSOLE_MODULES.slice().sort());
});

test('the modules import each other only: static relative imports of files in static/js/, no cycle', () => {
  const names = new Set(CONSOLE_MODULES.map((url) => path.basename(url)));
  const graph = new Map();
  for (const [url, source] of MODULE_SOURCES) {
    const imports = [...source.matchAll(/^import\b[^;]*;$/gm)].map((m) => m[0]);
    const targets = imports.map((statement) => (/^import \{[\w$,\s]*\} from '\.\/([\w-]+\.js)';$/.exec(statement) || [])[1]);
    assert.ok(targets.every((name) => names.has(name)), `${url}: an import that is not a named import of a module in static/js/: ${imports.join(' ')}`);
    const code = source.replace(/\/\*[\s\S]*?\*\/|^\s*\/\/.*$/gm, ''); // without its comments
    assert.doesNotMatch(code, /\bimport\s*\(|\bimportScripts\b|\bnew\s+(Worker|SharedWorker)\b/, `${url}: no dynamic import or worker`);
    assert.doesNotMatch(source, /['"`](https?:)?\/\//i, `${url}: no absolute or protocol-relative URL`);
    graph.set(path.basename(url), targets);
  }
  // Imports form a DAG: a depth-first walk never meets a module on its own path.
  const done = new Set();
  const visit = (name, trail) => {
    assert.ok(!trail.includes(name), 'an import cycle: ' + [...trail, name].join(' -> '));
    if (done.has(name)) return;
    for (const next of graph.get(name)) visit(next, [...trail, name]);
    done.add(name);
  };
  for (const name of graph.keys()) visit(name, []);
  assert.equal(done.size, names.size);
});
