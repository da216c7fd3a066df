// DOM helpers. Every piece of data reaches the page as a text node or an
// attribute value, never as HTML, and nothing sets a style attribute (the
// Content-Security-Policy forbids inline styles).

// Properties set as DOM properties rather than attributes.
const PROPS = new Set(['value', 'checked', 'disabled', 'hidden', 'selected', 'open', 'indeterminate']);

// h builds an element: h('a', {href: '#/x', class: 'link'}, 'text', child).
// Attributes whose value is null, undefined or false are left out; onX
// functions become event listeners; children may be strings, numbers,
// nodes, arrays of them, or null.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.className = Array.isArray(v) ? v.filter(Boolean).join(' ') : v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (PROPS.has(k)) el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.append(c);
    else el.append(document.createTextNode(String(c)));
  }
}

// frag is a DocumentFragment of children (as h takes them), for
// replaceChildren and append.
export function frag(...children) {
  const f = document.createDocumentFragment();
  append(f, children);
  return f;
}

let uid = 0;
// id returns a document-unique id for label/aria wiring.
export function id(prefix) {
  uid += 1;
  return `${prefix}-${uid}`;
}

// srOnly is text for screen readers only.
export function srOnly(text) {
  return h('span', { class: 'sr-only' }, text);
}

// bytes formats a byte count: 512 B, 37.6 KB, 2.1 MB.
export function bytes(n) {
  if (typeof n !== 'number' || !Number.isFinite(n)) return '';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

// errorText is the message of an error for a person: the API's message
// with its code, or the error's own message.
export function errorText(err) {
  if (err && err.code && err.message) return `${err.message} (${err.code})`;
  return (err && err.message) || String(err);
}

// banner is a view-level message.
export function banner(kind, ...children) {
  return h('div', { class: ['banner', kind], role: kind === 'error' ? 'alert' : 'status' }, ...children);
}

// loading is a placeholder while a view fetches.
export function loading(what) {
  return h('p', { class: 'loading', role: 'status' }, h('span', { class: 'spinner', 'aria-hidden': 'true' }), `Loading ${what}…`);
}

// paginationBadge shows a detected pagination strategy.
export function paginationBadge(plan) {
  const strategy = (plan && plan.strategy) || 'none';
  const bits = [`Pagination: ${strategy}`];
  if (plan && plan.continuation) bits.push(`continuation: ${plan.continuation}`);
  if (plan && plan.provenance) bits.push(`detected from: ${plan.provenance}`);
  return h('span', { class: ['badge', 'pg', `pg-${strategy.replace(/[^a-z_]/g, '')}`], title: bits.join(' · ') },
    srOnly('Pagination: '), strategy);
}

// effectBadge shows what a call may do to the data: read, write, destructive.
export function effectBadge(effect) {
  const e = effect || 'write';
  return h('span', { class: ['badge', 'effect', `effect-${e.replace(/[^a-z]/g, '')}`], title: `Effect: ${e}` },
    srOnly('Effect: '), e);
}

// kindBadge shows where a tool comes from.
export function kindBadge(kind) {
  const label = { api: 'own API', app: 'connected app', mcp: 'MCP' }[kind] || kind;
  return h('span', { class: ['badge', 'kind', `kind-${kind}`] }, label);
}

// clock is a time for lists: 14:05:09 today, else 3 Mar 14:05 (with the
// year when not this one); '' for no time.
export function clock(iso) {
  const d = new Date(iso);
  if (!iso || Number.isNaN(d.getTime()) || d.getFullYear() < 2000) return '';
  const now = new Date();
  const hm = d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });
  if (d.toDateString() === now.toDateString()) return d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });
  const day = d.toLocaleDateString(undefined, { day: 'numeric', month: 'short', year: d.getFullYear() === now.getFullYear() ? undefined : 'numeric' });
  return `${day} ${hm}`;
}
