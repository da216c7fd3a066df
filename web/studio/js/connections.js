// Connections: one user's connected apps — GET /v1/connections?user_id=
// (the Studio holds the admin key, which names the user) — with their
// kind, scopes, expiry, last refresh and broken state, never a token; and
// Disconnect (DELETE /v1/connections/{toolkit}?user_id=), which revokes an
// OAuth connection at the provider and forgets its tokens.
// #/connections/<user> shows that user's.

import { call, seg } from './api.js';
import { banner, errorText, h, loading } from './dom.js';

function stamp(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

export function connectionsView({ navigate }) {
  const user = h('input', { id: 'connections-user', class: 'input', type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'user id', required: true });
  const show = h('button', { type: 'submit', class: 'button small primary', id: 'connections-show' }, 'Show');
  const form = h('form', { class: 'toolbar', novalidate: true },
    h('div', { class: 'field' }, h('label', { class: 'field-label', for: 'connections-user' }, 'User'), user), show);
  const count = h('p', { class: 'muted count', role: 'status', id: 'connections-count' });
  const msg = h('div', { id: 'connections-msg' });
  const body = h('tbody');
  const table = h('div', { class: 'table-wrap', hidden: true },
    h('table', { class: 'table', id: 'connections-table' },
      h('thead', null, h('tr', null, ['App', 'Kind', 'Status', 'Scopes', 'Token expires', 'Last refresh', 'Connected', ''].map((c) => h('th', { scope: 'col' }, c)))),
      body));
  const el = h('section', { class: 'connections', 'aria-labelledby': 'connections-title' },
    h('div', { class: 'view-head' }, h('h1', { id: 'connections-title' }, 'Connections'),
      h('p', { class: 'muted' }, 'The apps a user connected: pasted tokens and OAuth connections, with their scopes, when the access token expires and when it was last refreshed. Disconnect revokes an OAuth connection at the provider and forgets its tokens; the user connects again through a new link.')),
    form, count, msg, table);

  let who = '';

  function row(c) {
    const note = h('span', { class: 'inline-error', role: 'alert', hidden: true });
    const off = h('button', { type: 'button', class: 'button small', dataset: { disconnect: c.toolkit }, 'aria-label': `Disconnect ${c.toolkit}` }, 'Disconnect');
    off.addEventListener('click', async () => {
      off.disabled = true;
      note.hidden = true;
      try {
        const r = await call('DELETE', `connections/${seg(c.toolkit)}?user_id=${encodeURIComponent(who)}`);
        const d = r.data || {};
        msg.replaceChildren(banner(d.revoke_error ? 'error' : 'info', `Disconnected ${c.toolkit}`,
          d.revoked ? ' (revoked at the provider).' : d.revoke_error ? ` — the provider did not revoke: ${d.revoke_error}` : '.'));
        load(false);
      } catch (err) {
        note.textContent = `Could not disconnect: ${errorText(err)}`;
        note.hidden = false;
        off.disabled = false;
      }
    });
    const broken = c.status === 'broken';
    return h('tr', { dataset: { toolkit: c.toolkit, status: c.status } },
      h('th', { scope: 'row' }, c.toolkit),
      h('td', null, c.kind === 'oauth2' ? 'OAuth 2.0' : 'token'),
      h('td', null, h('span', { class: ['pill', broken ? 'pill-failed' : 'pill-complete'] }, broken ? 'broken' : 'connected'),
        broken && c.broken ? h('p', { class: 'muted small connection-broken' }, c.broken) : null),
      h('td', { class: 'connection-scopes' }, (c.scopes || []).length ? (c.scopes || []).map((s) => h('code', null, s, ' ')) : '—'),
      h('td', { class: 'connection-expires' }, stamp(c.expires_at)),
      h('td', { class: 'connection-refresh' }, c.last_refresh ? stamp(c.last_refresh) : c.kind === 'oauth2' ? 'never' : '—'),
      h('td', null, stamp(c.connected_at)),
      h('td', null, off, note));
  }

  async function load(clear) {
    if (clear) msg.replaceChildren();
    if (!who) {
      table.hidden = true;
      count.textContent = 'Name a user to see their connections.';
      return;
    }
    show.disabled = true;
    if (clear) msg.replaceChildren(loading('connections'));
    try {
      const r = await call('GET', `connections?user_id=${encodeURIComponent(who)}`);
      if (clear) msg.replaceChildren();
      const list = (r.data && r.data.connections) || [];
      count.textContent = list.length === 1 ? `1 connection of ${who}` : `${list.length} connections of ${who}`;
      body.replaceChildren(...list.map(row));
      table.hidden = !list.length;
    } catch (err) {
      msg.replaceChildren(banner('error', `Could not load the connections: ${errorText(err)}`));
    } finally {
      show.disabled = false;
    }
  }

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const u = user.value.trim();
    if (u) navigate(`#/connections/${encodeURIComponent(u)}`);
  });

  return {
    el,
    update(arg) {
      who = arg || '';
      user.value = who;
      return load(true);
    },
  };
}
