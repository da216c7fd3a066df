// Agents: the list of agents, and for the selected one its tool bindings
// expanded to tools, each a card with the binding's switches. Changes are
// optimistic: the control moves at once, the PATCH follows, and a refused
// change rolls the control back and says why.

import { call, seg, tools as loadTools } from './api.js';
import { banner, effectBadge, errorText, frag, h, id, loading, paginationBadge } from './dom.js';
import { mcpPanel } from './mcp.js';

const LOOP_LABEL = 'Allow response looping for this tool';
// A group with more tools than this starts collapsed.
const OPEN_GROUP_MAX = 12;

export function agentsView({ navigate }) {
  const list = h('ul', { class: 'agent-list', role: 'list' });
  const detail = h('section', { class: 'agent-detail', 'aria-label': 'Selected agent' });
  const el = h('div', { class: 'layout-agents' },
    h('nav', { class: 'sidebar', 'aria-labelledby': 'agents-title' },
      h('h1', { class: 'sidebar-title', id: 'agents-title' }, 'Agents'), list),
    detail);
  let agents = null;
  let catalog = null;
  let seq = 0;

  function renderList(selected) {
    list.replaceChildren(...agents.map((a) => h('li', null,
      h('a', {
        class: 'agent-link', href: `#/agents/${encodeURIComponent(a.id)}`,
        'aria-current': a.id === selected ? 'page' : null, dataset: { agentId: a.id },
      },
      h('span', { class: 'agent-name' }, a.name || a.id),
      h('span', { class: 'agent-meta' }, h('code', null, a.id), ` · ${(a.agentTools || []).length} bindings`)))));
    if (!agents.length) list.replaceChildren(h('li', { class: 'muted' }, 'No agents yet.'));
  }

  async function update(arg) {
    const my = ++seq;
    if (!agents) {
      list.replaceChildren(h('li', null, loading('agents')));
      try {
        [agents, catalog] = await Promise.all([call('GET', 'agents').then((r) => r.data.agents || []), loadTools()]);
      } catch (err) {
        if (my !== seq) return;
        list.replaceChildren();
        detail.replaceChildren(banner('error', `Could not load the agents: ${errorText(err)}`));
        return;
      }
      if (my !== seq) return;
    }
    renderList(arg);
    if (!arg) {
      if (agents.length) navigate(`#/agents/${encodeURIComponent(agents[0].id)}`, true);
      else detail.replaceChildren(banner('info', 'No agents are defined. Add one in the config file or with PUT /v1/agents/{id}.'));
      return;
    }
    detail.replaceChildren(loading(`agent ${arg}`));
    let def;
    try {
      def = (await call('GET', `agents/${seg(arg)}`)).data;
    } catch (err) {
      if (my !== seq) return;
      detail.replaceChildren(banner('error', `Could not load agent “${arg}”: ${errorText(err)}`));
      return;
    }
    if (my !== seq) return;
    detail.replaceChildren(frag(agentDetail(def, catalog, (next) => {
      agents = agents.map((a) => (a.id === next.id ? next : a));
    })));
  }

  return { el, update };
}

// expand turns bindings into tool rows: a tool_id binding is one tool, a
// toolkit binding every tool of that toolkit; each tool once.
export function expand(def, catalog) {
  const byId = new Map(catalog.map((t) => [t.id, t]));
  const seen = new Set();
  const rows = [];
  for (const b of def.agentTools || []) {
    if (b.tool_id) {
      if (!seen.has(b.tool_id)) {
        seen.add(b.tool_id);
        rows.push({ id: b.tool_id, tool: byId.get(b.tool_id) || null });
      }
    } else if (b.toolkit) {
      for (const t of catalog) {
        if (t.toolkit === b.toolkit && !seen.has(t.id)) {
          seen.add(t.id);
          rows.push({ id: t.id, tool: t });
        }
      }
    }
  }
  return rows;
}

// effective is the binding that governs a tool: its own entry, else its
// toolkit's.
function effective(def, toolId, tool) {
  const tools = def.agentTools || [];
  const own = tools.find((b) => b.tool_id === toolId);
  if (own) return { binding: own, toolkit: '' };
  const tk = tool && tool.toolkit;
  const kit = tk ? tools.find((b) => b.toolkit === tk) : null;
  return { binding: kit || {}, toolkit: kit ? tk : '' };
}

function settingsOf(b) {
  let discovery = 'auto';
  if (b.discovery === true || b.discovery === 'true') discovery = 'true';
  if (b.discovery === false || b.discovery === 'false') discovery = 'false';
  return { loop: !!b.loop_responses, ttl: b.dataset_ttl_hours || 0, discovery };
}

function groupOf(row) {
  const t = row.tool;
  if (!t) return { key: 'unknown', title: 'Unknown tools', sub: 'not in the catalog' };
  if (t.toolkit) return { key: `toolkit:${t.toolkit}`, title: t.toolkit, sub: 'connected-app toolkit' };
  return { key: `provider:${t.provider}`, title: t.provider, sub: t.kind === 'mcp' ? 'MCP server' : 'own API' };
}

// loopable reports whether looping can change anything for tool t:
// pagination to walk (detected, or a paging parameter the first response
// may confirm), or a list of rows to project and filter.
export function loopable(t) {
  const p = t && t.pagination;
  if (!p) return false;
  return (p.strategy && p.strategy !== 'none') || p.itemsFound === true || !!(p.pageParam || p.offsetParam || p.cursorParam);
}

// groupSwitch flips looping for every loopable tool of a group: each
// card saves its own binding (PATCH), so the result is what the server
// kept, tool by tool.
function groupSwitch(g, cards) {
  const targets = cards.filter((c) => c.dataset.loopable === 'true');
  if (!targets.length) return { el: null, sync() {} };
  const sw = h('input', {
    type: 'checkbox', role: 'switch', class: 'switch', 'aria-label': `Allow response looping for every tool of ${g.title}`,
    dataset: { groupSwitch: g.key },
  });
  const el = h('label', { class: 'group-switch', title: 'Allow response looping for every tool of this group' }, sw, 'loop all');
  const sync = () => {
    const on = targets.filter((c) => c.dataset.looping === 'true').length;
    sw.checked = on === targets.length;
    sw.indeterminate = on > 0 && on < targets.length;
  };
  sw.addEventListener('click', (ev) => ev.stopPropagation());
  sw.addEventListener('change', () => {
    const want = sw.checked; // each card's change re-syncs sw as it goes
    for (const c of targets) {
      const s = c.querySelector('input[role="switch"]');
      if (s && s.checked !== want) {
        s.checked = want;
        s.dispatchEvent(new Event('change', { bubbles: true }));
      }
    }
    sync();
  });
  sync();
  return { el, sync };
}

function agentDetail(initial, catalog, onChange) {
  let def = initial;
  const rows = expand(def, catalog);
  const looping = () => rows.filter((r) => settingsOf(effective(def, r.id, r.tool).binding).loop).length;
  const loopCount = h('span', null, String(looping()));
  const setDef = (next) => {
    def = next;
    loopCount.textContent = String(looping());
    onChange(next);
  };

  const groups = new Map();
  for (const row of rows) {
    const g = groupOf(row);
    if (!groups.has(g.key)) groups.set(g.key, { ...g, rows: [] });
    groups.get(g.key).rows.push(row);
  }
  const sections = [...groups.values()].map((g) => {
    const cards = g.rows.map((row) => toolCard(() => def, setDef, row));
    const count = h('span', { class: 'group-count' });
    const bulk = groupSwitch(g, cards);
    const recount = () => {
      const on = cards.filter((c) => c.dataset.looping === 'true').length;
      count.textContent = `${g.sub} · ${cards.length} ${cards.length === 1 ? 'tool' : 'tools'} · ${on} looping`;
      bulk.sync();
    };
    recount();
    const section = h('details', {
      class: 'group', open: cards.length <= OPEN_GROUP_MAX || groups.size === 1,
      dataset: { group: g.key }, onchange: recount,
    },
    h('summary', null, h('span', { class: 'group-title' }, g.title), count, bulk.el),
    h('div', { class: 'cards' }, cards));
    return { section, cards, defaultOpen: section.open };
  });

  const empty = h('p', { class: 'muted', hidden: true }, 'No tool of this agent matches the filter.');
  const filterId = id('tool-filter');
  const filter = h('input', {
    id: filterId, class: 'input', type: 'search', placeholder: 'name, id, description…', autocomplete: 'off',
    oninput: () => {
      const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
      let shown = 0;
      for (const s of sections) {
        let n = 0;
        for (const c of s.cards) {
          const hit = words.every((w) => c.dataset.search.includes(w));
          c.hidden = !hit;
          if (hit) n += 1;
        }
        s.section.hidden = n === 0;
        s.section.open = words.length ? n > 0 : s.defaultOpen;
        shown += n;
      }
      empty.hidden = shown > 0;
    },
  });

  const bindings = (def.agentTools || []).length;
  return [
    h('header', { class: 'detail-head' },
      h('h2', { class: 'detail-title' }, def.name || def.id),
      h('p', { class: 'detail-meta' },
        h('code', null, def.id), ` · ${bindings} ${bindings === 1 ? 'binding' : 'bindings'} · ${rows.length} tools · `,
        loopCount, ' looping · ', `max ${def.max_steps || 12} steps`),
      def.system ? h('details', { class: 'system' }, h('summary', null, 'System prompt'), h('p', null, def.system)) : null,
      mcpPanel(def.id)),
    h('div', { class: 'toolbar' },
      h('label', { class: 'field-label', for: filterId }, 'Filter tools'), filter),
    rows.length ? null : banner('info', 'This agent has no tool bindings.'),
    empty,
    sections.map((s) => s.section),
  ];
}

// toolCard is one tool of the agent with its binding's controls.
function toolCard(getDef, setDef, row) {
  const t = row.tool;
  const tid = row.id;
  const base = id('tool');
  const eff = effective(getDef(), tid, t);
  let confirmed = settingsOf(eff.binding);
  let pending = 0;
  let chain = Promise.resolve();

  const status = h('span', { class: 'card-status', id: `${base}-status`, role: 'status' });
  const error = h('p', { class: 'inline-error', id: `${base}-error`, role: 'alert', hidden: true });
  const source = h('p', { class: 'card-source' });
  const describeSource = (e) => {
    source.textContent = e.toolkit
      ? `Inherited from toolkit “${e.toolkit}”; a change here binds this tool on its own.`
      : 'Bound on its own.';
  };
  describeSource(eff);

  const sw = h('input', {
    type: 'checkbox', role: 'switch', class: 'switch', id: `${base}-loop`, checked: confirmed.loop,
    'aria-describedby': `${base}-error ${base}-status`,
  });
  const ttl = h('input', {
    type: 'number', class: 'input input-num', id: `${base}-ttl`, min: '0', step: 'any', inputmode: 'decimal',
    placeholder: 'default', value: confirmed.ttl ? String(confirmed.ttl) : '',
    'aria-describedby': `${base}-ttl-hint ${base}-error`,
  });
  const app = t && t.kind === 'app';
  const disc = h('select', {
    class: 'input', id: `${base}-disc`, disabled: !app, 'aria-describedby': `${base}-disc-hint ${base}-error`,
  },
  h('option', { value: 'auto', selected: confirmed.discovery === 'auto' }, 'auto'),
  h('option', { value: 'true', selected: confirmed.discovery === 'true' }, 'true · pooled'),
  h('option', { value: 'false', selected: confirmed.discovery === 'false' }, 'false · direct'));

  const canLoop = loopable(t);
  const card = h('article', {
    class: 'tool-card', 'aria-labelledby': `${base}-name`,
    dataset: {
      toolId: tid, state: 'idle', looping: String(confirmed.loop), loopable: String(canLoop),
      search: [tid, t && t.name, t && t.description, t && t.path].filter(Boolean).join(' ').toLowerCase(),
    },
  },
  h('header', { class: 'card-head' },
    h('div', { class: 'card-titles' },
      h('h3', { class: 'card-name', id: `${base}-name` }, t ? t.name : tid),
      h('p', { class: 'card-id' }, h('code', null, tid),
        t && t.method ? [' · ', h('code', { class: 'method' }, t.method), ' ', h('code', null, t.path)] : null)),
    h('div', { class: 'card-badges' }, t ? [effectBadge(t.effect), ' ', paginationBadge(t.pagination)] : null)),
  t && t.description ? h('p', { class: 'card-desc', title: t.description }, t.description) : null,
  t ? null : h('p', { class: 'inline-error' }, 'This tool is not in the catalog.'),
  // A write never walks, caches or filters: no looping switch on it.
  canLoop && (!t || t.effect === 'read')
    ? h('div', { class: 'switch-row' }, sw, h('label', { for: `${base}-loop` }, LOOP_LABEL))
    : h('p', { class: 'switch-none muted' }, t && t.effect !== 'read'
      ? 'Changes data: writes never loop.'
      : 'Nothing to loop: no pagination or paging parameter was detected and the response has no list of rows.'),
  h('div', { class: 'settings' },
    h('div', { class: 'setting' },
      h('label', { class: 'field-label', for: `${base}-ttl` }, 'Dataset TTL (hours)'), ttl,
      h('span', { class: 'hint', id: `${base}-ttl-hint` }, 'empty: 24 h (org) or 1 h (runtime)')),
    h('div', { class: 'setting' },
      h('label', { class: 'field-label', for: `${base}-disc` }, 'Discovery'), disc,
      h('span', { class: 'hint', id: `${base}-disc-hint` }, app ? 'true: behind search_tools' : 'own API tools stay direct'))),
  h('footer', { class: 'card-foot' }, source, status),
  error);

  const show = (s) => {
    sw.checked = s.loop;
    card.dataset.looping = String(s.loop);
    ttl.value = s.ttl ? String(s.ttl) : '';
    disc.value = s.discovery;
  };

  function save(field, value, rollback) {
    pending += 1;
    card.dataset.state = 'saving';
    card.setAttribute('aria-busy', 'true');
    status.textContent = 'Saving…';
    chain = chain.then(async () => {
      try {
        const r = await call('PATCH', `agents/${seg(getDef().id)}/tools/${seg(tid)}`, { [field]: value });
        setDef(r.data);
        const e = effective(r.data, tid, t);
        confirmed = settingsOf(e.binding);
        describeSource(e);
        if (pending === 1) {
          show(confirmed);
          card.dataset.state = 'saved';
          status.textContent = 'Saved';
          error.hidden = true;
        }
      } catch (err) {
        rollback(confirmed);
        card.dataset.looping = String(sw.checked);
        card.dataset.state = 'error';
        status.textContent = '';
        error.textContent = `Not saved: ${errorText(err)}`;
        error.hidden = false;
      } finally {
        pending -= 1;
        if (pending === 0) card.removeAttribute('aria-busy');
        card.closest('details')?.dispatchEvent(new Event('change'));
      }
    });
  }

  sw.addEventListener('change', () => {
    card.dataset.looping = String(sw.checked);
    save('loop_responses', sw.checked, (s) => { sw.checked = s.loop; });
  });
  ttl.addEventListener('change', () => {
    const v = ttl.value.trim() === '' ? 0 : Number(ttl.value);
    if (!Number.isFinite(v)) {
      ttl.value = confirmed.ttl ? String(confirmed.ttl) : '';
      error.textContent = 'Not saved: the TTL must be a number of hours.';
      error.hidden = false;
      return;
    }
    save('dataset_ttl_hours', v, (s) => { ttl.value = s.ttl ? String(s.ttl) : ''; });
  });
  disc.addEventListener('change', () => {
    save('discovery', disc.value, (s) => { disc.value = s.discovery; });
  });
  return card;
}
