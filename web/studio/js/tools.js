// Tools: a searchable table of every tool, and "Try it": run one tool
// through the looping engine (POST /v1/tools/{id}/invoke, no model),
// watch the walk stream its progress, stop it, and read its verdict and
// rows before its payload.

import { call, openStream, readEvents, refreshTools, seg, tools as loadTools } from './api.js';
import { banner, bytes, effectBadge, errorText, frag, h, kindBadge, loading, paginationBadge } from './dom.js';
import { jsonView } from './json.js';
import { aggregateView, boundaryTable, completionOf, fmt, progressView, rowsView, verdictBadge } from './verdict.js';

// The arguments typed per tool, kept while the page lives.
const drafts = new Map();
// Try it's calls keep their stored results under this thread, so their
// rows can be queried back.
const TRY_THREAD = `studio-try-${Math.random().toString(36).slice(2, 10)}`;
let agentsPromise = null;
function agentList() {
  if (!agentsPromise) {
    agentsPromise = call('GET', 'agents').then((r) => r.data.agents || []).catch(() => []);
  }
  return agentsPromise;
}

export function toolsView() {
  const search = h('input', {
    id: 'tool-search', class: 'input', type: 'search', autocomplete: 'off',
    placeholder: 'id, name, path, strategy…', 'aria-controls': 'tool-table',
  });
  const kind = h('select', { id: 'tool-kind', class: 'input', 'aria-controls': 'tool-table' },
    h('option', { value: '' }, 'all kinds'),
    h('option', { value: 'api' }, 'own API'),
    h('option', { value: 'app' }, 'connected app'),
    h('option', { value: 'mcp' }, 'MCP'));
  const count = h('p', { class: 'muted count', role: 'status' });
  const tbody = h('tbody');
  const table = h('div', { class: 'table-wrap' },
    h('table', { class: 'table tools-table', id: 'tool-table' },
      h('caption', { class: 'sr-only' }, 'Tools; follow a tool id to try it'),
      h('thead', null, h('tr', null,
        h('th', { scope: 'col' }, 'Tool'),
        h('th', { scope: 'col' }, 'Kind'),
        h('th', { scope: 'col' }, 'Method and path'),
        h('th', { scope: 'col' }, 'Pagination'))),
      tbody));
  const panel = h('section', { class: 'try', id: 'try', 'aria-labelledby': 'try-title' });
  const reload = h('button', {
    type: 'button', class: 'button small ghost',
    onclick: async () => {
      catalog = null;
      refreshTools();
      await update(selected);
    },
  }, 'Reload');
  const el = h('div', { class: 'layout-tools' },
    h('section', { class: 'tools-list', 'aria-labelledby': 'tools-title' },
      h('div', { class: 'view-head' }, h('h1', { id: 'tools-title' }, 'Tools'), reload),
      h('div', { class: 'toolbar' },
        h('div', { class: 'field grow' }, h('label', { class: 'field-label', for: 'tool-search' }, 'Search'), search),
        h('div', { class: 'field' }, h('label', { class: 'field-label', for: 'tool-kind' }, 'Kind'), kind)),
      count, table),
    panel);

  let catalog = null;
  let rows = [];
  let selected = '';
  let seq = 0;

  function filter() {
    const words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    let n = 0;
    for (const r of rows) {
      const hit = (!kind.value || r.tool.kind === kind.value) && words.every((w) => r.text.includes(w));
      r.tr.hidden = !hit;
      if (hit) n += 1;
    }
    count.textContent = `${n} of ${rows.length} tools`;
  }
  search.addEventListener('input', filter);
  kind.addEventListener('change', filter);

  function renderTable() {
    rows = catalog.map((t) => {
      const link = h('a', { href: `#/tools/${encodeURIComponent(t.id)}`, class: 'tool-link' }, t.id);
      const tr = h('tr', { dataset: { toolId: t.id } },
        h('th', { scope: 'row' }, link),
        h('td', null, kindBadge(t.kind), ' ', effectBadge(t.effect)),
        h('td', { class: 'path' }, t.method ? [h('code', { class: 'method' }, t.method), ' ', h('code', null, t.path)] : h('span', { class: 'muted' }, '—')),
        h('td', null, paginationBadge(t.pagination)));
      const pg = (t.pagination && t.pagination.strategy) || 'none';
      const text = [t.id, t.name, t.kind, t.effect, t.toolkit, t.provider, t.method, t.path, pg, t.description].filter(Boolean).join(' ').toLowerCase();
      return { tool: t, tr, link, text };
    });
    tbody.replaceChildren(...rows.map((r) => r.tr));
    filter();
  }

  async function update(arg) {
    const my = ++seq;
    if (!catalog) {
      tbody.replaceChildren(h('tr', null, h('td', { colspan: '4' }, loading('tools'))));
      try {
        catalog = await loadTools();
      } catch (err) {
        if (my !== seq) return;
        tbody.replaceChildren();
        panel.replaceChildren(banner('error', `Could not load the tools: ${errorText(err)}`));
        return;
      }
      if (my !== seq) return;
      renderTable();
    }
    selected = arg;
    for (const r of rows) {
      const on = r.tool.id === arg;
      r.tr.classList.toggle('selected', on);
      if (on) r.link.setAttribute('aria-current', 'true');
      else r.link.removeAttribute('aria-current');
    }
    const t = catalog.find((x) => x.id === arg);
    if (!arg) {
      panel.replaceChildren(h('h2', { id: 'try-title' }, 'Try it'),
        h('p', { class: 'muted' }, 'Pick a tool in the table to call it here, with the looping engine and no model.'));
    } else if (!t) {
      panel.replaceChildren(h('h2', { id: 'try-title' }, 'Try it'), banner('error', `No tool “${arg}” in the catalog.`));
    } else {
      panel.replaceChildren(frag(tryIt(t)));
    }
  }

  return { el, update };
}

// params lists a tool's arguments from its input schema.
function params(schema) {
  const props = (schema && schema.properties) || {};
  const required = new Set((schema && schema.required) || []);
  const names = Object.keys(props);
  if (!names.length) return h('p', { class: 'muted' }, 'No arguments.');
  return h('ul', { class: 'params' }, names.map((n) => {
    const p = props[n] || {};
    const type = p.type ? (Array.isArray(p.type) ? p.type.join(' | ') : p.type) : (p.enum ? 'enum' : 'any');
    return h('li', { class: n.startsWith('_') ? 'reserved' : null, title: p.description || null },
      h('code', null, n), ' ', h('span', { class: 'muted' }, type), required.has(n) ? h('span', { class: 'req' }, ' required') : null,
      p.enum ? h('span', { class: 'muted' }, ` · ${p.enum.join(', ')}`) : null);
  }));
}

function tryIt(t) {
  const args = h('textarea', {
    id: 'try-args', class: 'input code-input', rows: '7', spellcheck: 'false', autocomplete: 'off',
    autocapitalize: 'off', 'aria-describedby': 'try-args-hint try-args-error',
    value: drafts.get(t.id) || '{}',
  });
  const argsError = h('p', { id: 'try-args-error', class: 'inline-error', role: 'alert', hidden: true });
  const looping = h('input', { id: 'try-loop', type: 'checkbox', checked: true, 'aria-describedby': 'try-loop-hint' });
  const asAgent = h('select', { id: 'try-agent', class: 'input', 'aria-describedby': 'try-agent-hint' },
    h('option', { value: '' }, 'no agent'));
  agentList().then((list) => {
    for (const a of list) {
      if (binds(a, t)) asAgent.append(h('option', { value: a.id }, a.id));
    }
  });
  const loopCheck = h('div', { class: 'check' }, looping, h('label', { for: 'try-loop' }, 'loop responses'));
  const loopHint = h('span', { class: 'hint', id: 'try-loop-hint' }, 'off: one plain call, reserved arguments ignored');
  asAgent.addEventListener('change', () => {
    loopCheck.hidden = !!asAgent.value;
    loopHint.textContent = asAgent.value ? `the binding of agent “${asAgent.value}” decides looping` : 'off: one plain call, reserved arguments ignored';
  });
  const run = h('button', { type: 'submit', id: 'try-run', class: 'button primary' }, 'Run');
  const stop = h('button', { type: 'button', id: 'try-stop', class: 'button', hidden: true }, 'Stop');
  const curlCopied = h('span', { class: 'hint', role: 'status' });
  const curlBtn = h('button', { type: 'button', id: 'try-curl', class: 'button small ghost' }, 'Copy as curl');
  const result = h('div', { id: 'try-result', class: 'try-result', 'aria-live': 'polite' });
  args.addEventListener('input', () => drafts.set(t.id, args.value));
  args.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });

  const form = h('form', { class: 'try-form', novalidate: true },
    h('label', { class: 'field-label', for: 'try-args' }, 'Arguments (JSON object)'),
    args,
    h('p', { class: 'hint', id: 'try-args-hint' }, 'Reserved arguments such as _all_pages, _fields, _for_each, _filter and _aggregate work when looping is on. Ctrl+Enter runs.'),
    argsError,
    h('div', { class: 'try-actions' },
      h('div', { class: 'as-agent' }, h('label', { class: 'field-label', for: 'try-agent' }, 'as agent'), asAgent),
      h('span', { class: 'sr-only', id: 'try-agent-hint' }, 'Run the tool with that agent’s binding'),
      loopCheck, loopHint,
      h('div', { class: 'try-buttons' }, curlCopied, curlBtn, stop, run)));

  // body is the request the form describes, or null (the error shown).
  const body = () => {
    let value;
    try {
      value = JSON.parse(args.value.trim() || '{}');
    } catch (err) {
      argsError.textContent = `The arguments are not valid JSON: ${err.message}`;
      argsError.hidden = false;
      args.focus();
      return null;
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      argsError.textContent = 'The arguments must be a JSON object, like {"status": "open"}.';
      argsError.hidden = false;
      args.focus();
      return null;
    }
    argsError.hidden = true;
    const b = { args: value, thread_id: TRY_THREAD };
    if (asAgent.value) b.agent_id = asAgent.value;
    else b.loop_responses = looping.checked;
    return b;
  };
  curlBtn.addEventListener('click', async () => {
    const b = body();
    if (!b) return;
    const url = new URL(`../v1/tools/${seg(t.id)}/invoke`, document.baseURI).href;
    const text = `curl -sN -H "Authorization: Bearer $KEY" -H 'Accept: text/event-stream' '${url}' -d '${JSON.stringify(b).replace(/'/g, "'\\''")}'`;
    try {
      await navigator.clipboard.writeText(text);
      curlCopied.textContent = 'Copied (set KEY to the admin key)';
    } catch {
      curlCopied.textContent = text;
    }
  });
  let controller = null;
  stop.addEventListener('click', () => {
    if (controller) controller.abort();
  });

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const req = body();
    if (!req || controller) return;
    controller = new AbortController();
    run.disabled = true;
    run.textContent = 'Running…';
    stop.hidden = false;
    result.setAttribute('aria-busy', 'true');
    const prog = progressView();
    prog.el.id = 'try-progress';
    result.replaceChildren(loading(`${t.id}`), prog.el);
    const started = performance.now();
    let output;
    let failed = null;
    let stopped = false;
    try {
      const res = await openStream('POST', `tools/${seg(t.id)}/invoke`, req, { signal: controller.signal });
      const ended = await readEvents(res, ({ data }) => {
        if (!data || data === '[DONE]') return;
        if (data.type === 'data-tool-loop-progress') {
          result.querySelector('.loading')?.remove();
          prog.update(data.data);
        } else if (data.type === 'tool-output-available') output = data.output;
        else if (data.type === 'tool-output-error') failed = { message: data.errorText };
        else if (data.type === 'abort') stopped = true;
      });
      if (!ended && output === undefined && !failed) failed = { message: 'The stream ended before the result.' };
    } catch (err) {
      if (err.name === 'AbortError') stopped = true;
      else failed = err;
    } finally {
      controller = null;
      run.disabled = false;
      run.textContent = 'Run';
      stop.hidden = true;
      result.removeAttribute('aria-busy');
    }
    prog.done();
    const ms = Math.round(performance.now() - started);
    if (stopped && output === undefined) {
      result.replaceChildren(stoppedView(ms), prog.el);
    } else if (failed) {
      result.replaceChildren(failure(failed), prog.el);
    } else {
      const text = JSON.stringify(output);
      const fields = Array.isArray(req.args._fields) ? req.args._fields : null;
      result.replaceChildren(
        verdict(output, { status: 200, ms, text }),
        prog.el,
        h('div', { class: 'try-out' },
          aggregateView(output),
          rowsView(output, { scope: { thread_id: TRY_THREAD }, fields, callFilter: req.args._filter }),
          jsonView('Response JSON', output)));
    }
  });

  return [
    h('header', { class: 'try-head' },
      h('p', { class: 'eyebrow' }, 'Try it'),
      h('h2', { id: 'try-title' }, t.name),
      h('p', { class: 'card-id' }, h('code', null, t.id),
        t.method ? [' · ', h('code', { class: 'method' }, t.method), ' ', h('code', null, t.path)] : null),
      h('div', { class: 'card-badges' }, effectBadge(t.effect), ' ', paginationBadge(t.pagination), ' ', kindBadge(t.kind))),
    t.description ? h('details', { class: 'desc' }, h('summary', null, 'Description'), h('p', null, t.description)) : null,
    h('details', { class: 'desc' }, h('summary', null, 'Arguments'), params(t.inputSchema)),
    form,
    result,
  ];
}


// verdict states a result's completeness first: the boundary statement's
// completion (else _pagingComplete), _stoppedBy, _note, _boundary,
// _truncated and _resultId.
export function verdict(data, meta) {
  const env = data && typeof data === 'object' && !Array.isArray(data) ? data : {};
  const state = completionOf(env) || 'none';
  const facts = [];
  const fact = (k, ...v) => facts.push(h('div', { class: 'fact' }, h('dt', null, k), h('dd', null, ...v)));
  if ('_likelyMoreRows' in env) fact('Likely more rows', env._likelyMoreRows ? 'yes' : 'no');
  if (env._truncated) fact('Truncated', `showing ${env._shownItems ?? '?'} of ${env._totalItems ?? '?'} items`);
  if (env._resultId) fact('Result id', h('code', { class: 'result-id' }, env._resultId));
  if (env._cache) fact('Cache', env._cache.hit ? 'hit' : 'miss', env._cache.cachedAt ? ` · cached ${env._cache.cachedAt}` : '', env._cache.expiresAt ? ` · expires ${env._cache.expiresAt}` : '');
  if (env._unmatchedFields) fact('Unmatched _fields', h('code', null, fmt(env._unmatchedFields.paths)), ' · available: ', h('code', null, fmt(env._unmatchedFields.availableKeys)));
  if (env._unmatchedFilter) fact('Unmatched _filter', h('code', null, fmt(env._unmatchedFilter.fields)), ' · available: ', h('code', null, fmt(env._unmatchedFilter.availableKeys)));
  if (Array.isArray(env._forEachErrors) && env._forEachErrors.length) {
    fact('_for_each errors', h('ul', null, env._forEachErrors.map((e) => h('li', null, h('code', null, fmt(e.value)), ` ${e.error}`, e.retryable ? ' (retryable)' : ''))));
  }
  if (Array.isArray(env._forEachSkipped) && env._forEachSkipped.length) {
    fact('_for_each skipped', h('ul', null, env._forEachSkipped.map((e) => h('li', null, h('code', null, fmt(e.value)), ` ${e.reason}`))));
  }
  return h('section', { class: ['verdict', `verdict-${state}`], id: 'verdict', dataset: { complete: state }, 'aria-label': 'Verdict' },
    h('div', { class: 'verdict-head' },
      verdictBadge(env),
      env._stoppedBy ? h('span', { class: 'stopped' }, 'stopped by ', h('code', null, env._stoppedBy)) : null,
      h('span', { class: 'muted verdict-meta' }, `HTTP ${meta.status} · ${meta.ms} ms · ${bytes(meta.text.length)}`)),
    env._note ? h('p', { class: 'note' }, env._note) : null,
    state === 'none' ? h('p', { class: 'muted' }, 'The payload carries no looping keys: looping was off for this call, or the tool returned its payload as it came.') : null,
    facts.length ? h('dl', { class: 'facts' }, facts) : null,
    boundaryTable(env._boundary));
}

function stoppedView(ms) {
  return h('section', { class: ['verdict', 'verdict-stopped'], id: 'verdict', dataset: { complete: 'stopped' }, 'aria-label': 'Verdict' },
    h('div', { class: 'verdict-head' },
      h('span', { class: ['pill', 'pill-none'] }, 'Stopped'),
      h('span', { class: 'muted verdict-meta' }, `after ${ms} ms`)),
    h('p', { class: 'note' }, 'The walk was stopped: trawl ended the call and made no further upstream requests.'));
}

// binds reports whether agent def binds tool t (its own entry or its
// toolkit's), for the "as agent" choice.
function binds(def, t) {
  return (def.agentTools || []).some((b) => b.tool_id === t.id || (t.toolkit && b.toolkit === t.toolkit));
}

function failure(err) {
  return h('section', { class: ['verdict', 'verdict-failed'], id: 'verdict', dataset: { complete: 'failed' }, 'aria-label': 'Verdict' },
    h('div', { class: 'verdict-head' },
      h('span', { class: ['pill', 'pill-failed'] }, 'Failed'),
      err.code ? h('span', { class: 'stopped' }, h('code', null, err.code)) : null,
      err.status ? h('span', { class: 'muted verdict-meta' }, `HTTP ${err.status}`) : null),
    h('p', { class: 'note' }, err.message || String(err)));
}
