// What a tool result says about itself, shown the same way in the chat's
// tool cards and in Try it: the verdict badge (from the boundary
// statement's completion), the boundary statement, the live progress
// line, and the result's rows as a table to filter and page — through
// queryToolResult when the full result is stored.

import { call, seg } from './api.js';
import { errorText, h, id } from './dom.js';

export const COMPLETION_LABEL = {
  complete: 'Complete',
  partial: 'Partial',
  unstable: 'Unstable',
  single_response: 'Single response',
};

// completionOf reads _boundary.completion, falling back to
// _pagingComplete; '' when the result carries neither.
export function completionOf(env) {
  if (!env || typeof env !== 'object') return '';
  const b = env._boundary;
  if (b && typeof b === 'object' && typeof b.completion === 'string') return b.completion;
  if (env._pagingComplete === true) return 'complete';
  if (env._pagingComplete === false) return 'partial';
  return '';
}

// verdictBadge is the pill naming the completion.
export function verdictBadge(env) {
  return completionBadge(completionOf(env));
}

// completionBadge is the pill naming completion c ('' when there is
// none).
export function completionBadge(c) {
  const state = c || 'none';
  const label = COMPLETION_LABEL[c] || (c ? c.replace(/_/g, ' ') : 'No paging verdict');
  return h('span', { class: ['pill', `pill-${state.replace(/[^a-z_]/g, '')}`], dataset: { verdict: state } }, label);
}

export function fmt(v) {
  if (v === null || v === undefined) return '';
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

// boundaryTable is the boundary statement, one row per key.
export function boundaryTable(b) {
  if (!b || typeof b !== 'object') return null;
  return h('table', { class: 'table kv boundary' },
    h('caption', null, 'Boundary'),
    h('tbody', null, Object.entries(b).map(([k, v]) => h('tr', null, h('th', { scope: 'row' }, k), h('td', null, fmt(v))))));
}

// aggregateView shows an _aggregate: its verdict badge and its one
// verdict sentence (as the server words it: this page never words a
// verdict itself), then the groups × metrics table, what was skipped,
// and what was left out. null when env holds no aggregate.
export function aggregateView(env) {
  const a = env && typeof env === 'object' ? env._aggregate : null;
  if (!a || typeof a !== 'object' || !Array.isArray(a.groups)) return null;
  const by = Array.isArray(a.groupBy) ? a.groupBy : [];
  const metrics = [];
  for (const g of a.groups) {
    for (const k of Object.keys(g)) {
      if (k !== '_skipped' && !by.includes(k) && !metrics.includes(k)) metrics.push(k);
    }
  }
  if (!metrics.length && a.skipped) metrics.push(...Object.keys(a.skipped));
  const cell = (v) => (v === null || v === undefined ? h('span', { class: 'muted' }, 'null') : fmt(v));
  const head = h('tr', null,
    by.map((p) => h('th', { scope: 'col', class: 'agg-key' }, p)),
    metrics.map((m) => h('th', { scope: 'col', class: 'agg-metric' }, m)));
  const body = a.groups.length
    ? a.groups.map((g) => h('tr', null,
      by.map((p) => h('th', { scope: 'row', class: 'agg-key' }, cell(g[p]))),
      metrics.map((m) => h('td', { class: 'agg-metric' }, cell(g[m])))))
    : [h('tr', null, h('td', { colspan: String(Math.max(by.length + metrics.length, 1)), class: 'empty' }, 'No group.'))];
  const skipped = [];
  for (const [m, s] of Object.entries(a.skipped || {})) {
    const parts = [['null', s.null], ['missing', s.missing], ['not a number', s.not_a_number], ['out of range', s.out_of_range]]
      .filter(([, n]) => n > 0).map(([what, n]) => `${n} ${what}`);
    if (parts.length) skipped.push(h('li', null, h('code', null, m), ` skipped ${parts.join(', ')}`));
  }
  for (const [m, n] of Object.entries(a.numericStrings || {})) {
    skipped.push(h('li', null, h('code', null, m), ` read ${plural(n, 'number', 'numbers')} written as strings`));
  }
  const shown = a.groupsShown ?? a.groups.length;
  const counts = `${plural(a.rows ?? 0, 'row', 'rows')} · ${shown < (a.groupCount ?? shown) ? `${shown} of ${a.groupCount} groups` : plural(a.groupCount ?? shown, 'group', 'groups')}`;
  return h('section', { class: ['aggregate', `aggregate-${a.completion || 'none'}`], 'aria-label': 'Aggregate', dataset: { completion: a.completion || 'none' } },
    h('div', { class: 'rows-head' },
      h('h4', { class: 'rows-title' }, 'Aggregate'),
      completionBadge(a.completion || ''),
      h('span', { class: 'muted agg-counts' }, counts)),
    a.verdict ? h('p', { class: 'note aggregate-verdict' }, a.verdict) : null,
    h('div', { class: 'table-wrap' }, h('table', { class: 'table aggregate-table' }, h('thead', null, head), h('tbody', null, body))),
    skipped.length ? h('ul', { class: 'agg-skipped muted' }, skipped) : null,
    Array.isArray(a.unmatched) && a.unmatched.length ? h('p', { class: 'inline-error' }, 'Unmatched: ', a.unmatched.map((p, i) => [i ? ', ' : '', h('code', null, p)])) : null,
    a.note ? h('p', { class: 'muted agg-note' }, a.note) : null);
}

function plural(n, one, many) {
  return `${n} ${n === 1 ? one : many}`;
}

// progressText is a data-tool-loop-progress chunk's data in words.
export function progressText(p) {
  const up = p.upstream ? upstreamText(p.upstream) : [];
  if (up.length && !p.page && !p.items) return [...up, `${((p.elapsedMs || 0) / 1000).toFixed(1)} s`].join(' · ');
  const items = p.total > 0 && !p.forEach ? `${p.items} of ${p.total} items` : plural(p.items, 'item', 'items');
  const bits = [`page ${p.page}`, items, plural(p.requests, 'request', 'requests')];
  if (p.forEach) bits.push(`${p.forEach.key} ${p.forEach.index + 1}/${p.forEach.total} (${fmt(p.forEach.value)})`);
  if (p.inFlight > 1) bits.push(`${p.inFlight} requests in flight`);
  bits.push(`${((p.elapsedMs || 0) / 1000).toFixed(1)} s`);
  if (p.rateLimit) {
    const w = p.rateLimit;
    const secs = w.waitMs > 0 ? ` (${Math.max(1, Math.round(w.waitMs / 1000))} s)` : '';
    bits.unshift(`waiting for ${w.provider}'s rate limit${secs}`);
  }
  return [...up, ...bits].join(' · ');
}

// upstreamText is what an upstream MCP server reported of the request
// under way (its notifications/progress, relayed): its message, then its
// progress of total.
function upstreamText(u) {
  const bits = [];
  if (u.message) bits.push(u.message);
  bits.push(`upstream ${u.progress}${u.total > 0 ? ` of ${u.total}` : ''}`);
  return bits;
}

// progressView is the live progress line: a bar that fills by the
// fan-out values done, else by the items of the total the server
// reported (without either it shows activity, not a level — the budget
// is a ceiling, not progress) and the words.
export function progressView() {
  const bar = h('progress', { class: 'tc-bar', max: '1' });
  const text = h('span', { class: 'tc-progress-text' });
  const el = h('p', { class: 'tc-progress', 'data-tool-loop-progress': '', role: 'status', hidden: true }, bar, text);
  return {
    el,
    update(p) {
      el.hidden = false;
      text.textContent = progressText(p);
      if (p.forEach && p.forEach.total > 0) bar.value = p.forEach.index / p.forEach.total;
      else if (p.total > 0) bar.value = Math.min(1, p.items / p.total);
      else if (p.upstream && p.upstream.total > 0) bar.value = Math.min(1, p.upstream.progress / p.upstream.total);
      else bar.removeAttribute('value');
    },
    // done ends the line; with the call's final figures (finalText), a
    // line that was shown says them instead of the last, stale, update.
    done(final) {
      el.classList.add('tc-progress-done');
      bar.hidden = true;
      if (final && !el.hidden) {
        text.textContent = final;
        el.dataset.final = '';
      }
    },
  };
}

// finalText is a finished call's figures, from its boundary statement:
// "4 pages · 364 items · 4 requests" ('' without one).
export function finalText(env) {
  const b = env && typeof env === 'object' ? env._boundary : null;
  if (!b || typeof b !== 'object') return '';
  const bits = [];
  if (typeof b.pages === 'number') bits.push(plural(b.pages, 'page', 'pages'));
  if (typeof b.records === 'number') bits.push(plural(b.records, 'item', 'items'));
  if (typeof b.requests === 'number') bits.push(plural(b.requests, 'request', 'requests'));
  return bits.length ? `done: ${bits.join(' · ')}` : '';
}

// queryChips shows a queryToolResult call's query — its filter clauses,
// fields, offset and limit — as chips.
export function queryChips(input) {
  const q = input && typeof input === 'object' ? input : {};
  const chips = [];
  for (const c of Array.isArray(q.filter) ? q.filter : []) {
    chips.push(h('span', { class: 'chip chip-filter' }, `${c.field} ${c.op}${c.value !== undefined ? ` ${fmt(c.value)}` : ''}`));
  }
  if (Array.isArray(q.fields) && q.fields.length) chips.push(h('span', { class: 'chip chip-fields' }, `fields: ${q.fields.join(', ')}`));
  if (typeof q.offset === 'number' && q.offset > 0) chips.push(h('span', { class: 'chip' }, `offset ${q.offset}`));
  if (typeof q.limit === 'number') chips.push(h('span', { class: 'chip' }, `limit ${q.limit}`));
  if (!chips.length) chips.push(h('span', { class: 'chip' }, 'every row'));
  return h('p', { class: 'chips', 'aria-label': 'Query' }, h('span', { class: 'muted' }, 'Query: '), chips);
}

// isQueryAnswer reports whether env is a queryToolResult answer: the
// rows that matched (items), with matched and total counts.
export function isQueryAnswer(env) {
  return !!env && typeof env === 'object' && Array.isArray(env.items) && typeof env.matched === 'number' && typeof env.total === 'number';
}

// primaryRows is a result's list of rows: items, or the first array of
// objects among its own (non-underscore) keys.
export function primaryRows(env) {
  if (Array.isArray(env)) return env;
  if (!env || typeof env !== 'object') return null;
  if (Array.isArray(env.items)) return env.items;
  for (const [k, v] of Object.entries(env)) {
    if (!k.startsWith('_') && Array.isArray(v) && v.length && v.every((x) => x && typeof x === 'object')) return v;
  }
  return null;
}

// flat turns a row into columns: nested objects one level deep become
// dot-paths (customer.name).
function flat(row) {
  const out = {};
  if (!row || typeof row !== 'object' || Array.isArray(row)) return { value: row };
  for (const [k, v] of Object.entries(row)) {
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      for (const [k2, v2] of Object.entries(v)) out[`${k}.${k2}`] = v2;
    } else out[k] = v;
  }
  return out;
}

function get(row, path) {
  let v = row;
  for (const p of path.split('.')) {
    if (!v || typeof v !== 'object') return undefined;
    v = v[p];
  }
  return v;
}

function parseValue(s) {
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
}

// match is the queryToolResult filter on one row, for rows held here.
function match(row, { field, op, value }) {
  const v = get(row, field);
  switch (op) {
    case 'eq': return v === value || String(v) === String(value);
    case 'neq': return !(v === value || String(v) === String(value));
    case 'gt': return v > value;
    case 'gte': return v >= value;
    case 'lt': return v < value;
    case 'lte': return v <= value;
    case 'contains': return String(v ?? '').toLowerCase().includes(String(value).toLowerCase());
    case 'exists': return v !== undefined && v !== null;
    default: return true;
  }
}

const PAGE = 20;
const OPS = ['contains', 'eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'exists'];

// rowsView shows a result's rows as a table with a filter and pages.
// With a _resultId it reads the stored result through queryToolResult
// (scope: {thread_id} or {agent_id, chat_id}, the scope it was stored
// under; fields: the call's _fields; callFilter: the call's _filter,
// applied again because the stored result holds every row the walk
// fetched); otherwise it pages the rows the result holds. A
// queryToolResult answer (isQueryAnswer) shows exactly the rows it
// returned, never the stored result they came from.
export function rowsView(env, { scope, fields, callFilter } = {}) {
  const local = primaryRows(env);
  const answer = isQueryAnswer(env);
  const resultId = env && typeof env === 'object' && !answer ? env._resultId : '';
  if (!resultId && !(local && local.length)) return null;
  const base = id('rows');
  const fieldSel = h('select', { class: 'input', id: `${base}-field`, 'aria-label': 'Filter field' });
  const opSel = h('select', { class: 'input', id: `${base}-op`, 'aria-label': 'Filter operator' }, OPS.map((o) => h('option', { value: o }, o)));
  const valueIn = h('input', { class: 'input', id: `${base}-value`, type: 'search', placeholder: 'value', autocomplete: 'off', 'aria-label': 'Filter value' });
  const apply = h('button', { type: 'submit', class: 'button small' }, 'Filter');
  const clear = h('button', { type: 'button', class: 'button small ghost' }, 'Clear');
  const prev = h('button', { type: 'button', class: 'button small', disabled: true }, '‹ Prev');
  const next = h('button', { type: 'button', class: 'button small', disabled: true }, 'Next ›');
  const status = h('span', { class: 'muted rows-status', role: 'status' });
  const error = h('p', { class: 'inline-error', role: 'alert', hidden: true });
  const thead = h('thead');
  const tbody = h('tbody');
  const form = h('form', { class: 'rows-filter', novalidate: true }, fieldSel, opSel, valueIn, apply, clear);
  const baseFilter = resultId && Array.isArray(callFilter) && callFilter.length ? callFilter : null;
  const baseNote = baseFilter
    ? h('p', { class: 'muted rows-base' }, 'The call’s _filter applies: ',
      baseFilter.map((c, i) => [i ? ' and ' : '', h('code', null, `${c.field} ${c.op}${c.value !== undefined ? ` ${fmt(c.value)}` : ''}`)]))
    : null;
  const el = h('section', { class: 'rows', 'aria-label': 'Rows', dataset: { source: resultId ? 'stored' : 'inline' } },
    h('div', { class: 'rows-head' },
      h('h4', { class: 'rows-title' }, resultId ? 'Rows (stored result)' : answer ? 'Rows this call returned' : 'Rows'),
      resultId ? h('code', { class: 'result-id muted', title: 'queryToolResult reads it' }, resultId) : null),
    baseNote,
    form,
    error,
    h('div', { class: 'table-wrap' }, h('table', { class: 'table rows-table' }, thead, tbody)),
    h('div', { class: 'rows-pager' }, prev, next, status));

  let offset = 0;
  let filter = null;
  let cols = null;
  let seq = 0;

  function setColumns(rows) {
    if (cols) return;
    const seen = new Set();
    for (const r of rows.slice(0, PAGE)) for (const k of Object.keys(flat(r))) seen.add(k);
    cols = [...seen].slice(0, 12);
    fieldSel.replaceChildren(...cols.map((c) => h('option', { value: c }, c)));
    thead.replaceChildren(h('tr', null, cols.map((c) => h('th', { scope: 'col' }, c))));
  }

  function show(rows, from, matched, total) {
    setColumns(rows);
    tbody.replaceChildren(...rows.map((r) => {
      const f = flat(r);
      return h('tr', null, cols.map((c) => h('td', null, fmt(f[c]))));
    }));
    if (!rows.length) tbody.replaceChildren(h('tr', null, h('td', { colspan: String(Math.max(cols.length, 1)), class: 'empty' }, 'No row matches.')));
    const to = from + rows.length;
    status.textContent = `rows ${rows.length ? from + 1 : 0}–${to} of ${matched}${matched !== total ? ` matched (${total} in all)` : ''}`;
    if (answer && !filter) {
      // What the call returned, out of what its query matched.
      const start = env.offset || 0;
      status.textContent = `rows ${rows.length ? from + 1 : 0}–${to} of the ${plural(local.length, 'row', 'rows')} this call returned`
        + ` (matches ${local.length ? start + 1 : 0}–${start + local.length} of ${env.matched} matched, ${env.total} stored)`;
    }
    prev.disabled = from === 0;
    next.disabled = to >= matched;
  }

  async function load() {
    const my = ++seq;
    error.hidden = true;
    if (!resultId) {
      const rows = filter ? local.filter((r) => match(r, filter)) : local;
      show(rows.slice(offset, offset + PAGE), offset, rows.length, local.length);
      return;
    }
    el.setAttribute('aria-busy', 'true');
    const args = { resultId, offset, limit: PAGE };
    if (fields && fields.length) args.fields = fields;
    const clauses = [...(baseFilter || [])];
    if (filter) clauses.push(filter.op === 'exists' ? { field: filter.field, op: 'exists' } : filter);
    if (clauses.length) args.filter = clauses;
    try {
      const r = await call('POST', `tools/${seg('queryToolResult')}/invoke`, { args, ...(scope || {}) });
      if (my !== seq) return;
      show(r.data.items || [], r.data.offset ?? offset, r.data.matched ?? 0, r.data.total ?? 0);
    } catch (err) {
      if (my !== seq) return;
      error.textContent = `Could not read the stored rows: ${errorText(err)}`;
      error.hidden = false;
      if (!cols && local) show(local.slice(0, PAGE), 0, local.length, local.length);
    } finally {
      el.removeAttribute('aria-busy');
    }
  }

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    filter = fieldSel.value ? { field: fieldSel.value, op: opSel.value, value: parseValue(valueIn.value.trim()) } : null;
    offset = 0;
    load();
  });
  clear.addEventListener('click', () => {
    filter = null;
    valueIn.value = '';
    offset = 0;
    load();
  });
  prev.addEventListener('click', () => {
    offset = Math.max(0, offset - PAGE);
    load();
  });
  next.addEventListener('click', () => {
    offset += PAGE;
    load();
  });
  load();
  return el;
}
