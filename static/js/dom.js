// The DOM kit: the only way the console puts text on the page. Everything
// upstream-derived reaches the DOM as text: el()/setText()/textContent only,
// and wrapped in up() so it is a bidi isolate (see up()). No module of the
// console has an HTML-string sink at all (the browser tests check that).

export const $ = (id) => document.getElementById(id);

/** Upstream-derived text, as opposed to the console's own words: see up(). */
export class Upstream {
  constructor(value) { this.text = String(value); }
}

/**
 * Marks a value as upstream text. el() and setText() render it as an isolated
 * run (class "up": CSS unicode-bidi: isolate), so bidi controls in it (U+202A-E,
 * U+2066-9, U+200E/F) cannot reorder the console's labels on the same line.
 */
export const up = (value) => new Upstream(value);

// An isolate (CSS or <bdi>) is not enough for every text: Chromium pairs a PDI
// in the text with the isolate's own start, its own end with an isolate
// initiator in the text, and a paragraph separator ends every isolate; each
// lets a following RLO reach past the run. Such a run is "sealed" (see .sealed).
const ESCAPES_ISOLATE = /[\u2066-\u2069\n\r\u001C-\u001E\u0085\u2029]/;

/** Sets a node's content: console text as is, an up() value as an isolated run. */
export function setText(node, value) {
  if (!(value instanceof Upstream)) { node.textContent = String(value); return; }
  node.classList.add('up');
  node.classList.toggle('sealed', ESCAPES_ISOLATE.test(value.text));
  node.textContent = value.text;
}

/** A child for el()/fill(): a Node as is, up() text as an isolated <span>, else text. */
function toNode(child) {
  if (child instanceof Node) return child;
  if (child instanceof Upstream) return el('span', { text: child });
  return document.createTextNode(String(child));
}

/** Builds an element; children are Nodes, plain text or up() text (never parsed as HTML). */
export function el(tag, props, ...children) {
  const node = document.createElement(tag);
  let text;
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key === 'text') text = value;
    else node.setAttribute(key, String(value));
  }
  if (text !== undefined) setText(node, text); // after the class, which it may extend
  for (const child of children) {
    if (child !== undefined && child !== null) node.append(toNode(child));
  }
  return node;
}

/** Replaces a node's content with the parts, as el() builds its children. */
export function fill(node, ...parts) {
  node.replaceChildren(...parts.filter((p) => p !== undefined && p !== null).map(toNode));
}

export function clear(node) { node.replaceChildren(); }
