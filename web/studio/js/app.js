// trawl Studio: the console's entry point — the admin-key dialog and the
// hash router (#/chat[/agent[/chat]], #/agents[/id], #/tools[/tool_id],
// #/activity[/filter], #/approvals[/status], #/connections[/user],
// #/evals[/id]).

import { call, clearKey, getKey, onUnauthorized, setKey } from './api.js';
import { errorText } from './dom.js';
import { agentsView } from './agents.js';
import { toolsView } from './tools.js';
import { activityView } from './activity.js';
import { chatView } from './chat.js';
import { approvalsView } from './approvals.js';
import { connectionsView } from './connections.js';
import { evalsView } from './evals.js';

const VIEWS = { chat: chatView, agents: agentsView, tools: toolsView, activity: activityView, approvals: approvalsView, connections: connectionsView, evals: evalsView };
const TITLES = { chat: 'Chat', agents: 'Agents', tools: 'Tools', activity: 'Activity', approvals: 'Approvals', connections: 'Connections', evals: 'Evals' };

const main = document.getElementById('main');
const dialog = document.getElementById('key-dialog');
const form = document.getElementById('key-form');
const input = document.getElementById('key-input');
const keyError = document.getElementById('key-error');
const submit = document.getElementById('key-submit');
const forget = document.getElementById('forget-key');

let current = null; // {name, view}

function navigate(hash, replace) {
  if (replace) location.replace(hash);
  else location.hash = hash;
}

// The console opens on Chat, where README sends a new user.
function parse() {
  const hash = location.hash.startsWith('#/') ? location.hash : '#/chat';
  const [first, ...rest] = hash.slice(2).split('/');
  const name = VIEWS[first] ? first : 'chat';
  let arg = '';
  try {
    arg = rest.length ? decodeURIComponent(rest.join('/')) : '';
  } catch {
    arg = '';
  }
  return { name, arg };
}

// route shows the view the hash names; fresh rebuilds it from the server
// (after the key was entered again).
function route(fresh) {
  const { name, arg } = parse();
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.dataset.nav === name) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  document.title = `${TITLES[name]} · trawl Studio`;
  document.body.dataset.view = name; // the chat fills the screen
  if (!getKey()) {
    askKey('');
    return;
  }
  if (fresh || !current || current.name !== name) {
    if (current && current.view.destroy) current.view.destroy();
    const view = VIEWS[name]({ navigate });
    main.replaceChildren(view.el);
    current = { name, view };
  }
  current.view.update(arg);
}

function askKey(message) {
  forget.hidden = true;
  keyError.hidden = !message;
  keyError.textContent = message;
  if (!dialog.open) dialog.showModal();
  input.focus();
}

onUnauthorized((err) => {
  askKey(err.code === 'no_key' ? '' : 'The server refused the admin key (401 unauthorized). Paste it again.');
});

form.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const key = input.value.trim();
  if (!key) {
    askKey('Paste the admin key first.');
    return;
  }
  setKey(key);
  submit.disabled = true;
  submit.textContent = 'Checking…';
  try {
    await call('GET', 'agents');
  } catch (err) {
    // A 401 has already asked again, with its message.
    if (err.status !== 401) {
      clearKey();
      askKey(`Could not check the key: ${errorText(err)}`);
    }
    return;
  } finally {
    submit.disabled = false;
    submit.textContent = 'Connect';
  }
  input.value = '';
  keyError.hidden = true;
  dialog.close();
  forget.hidden = false;
  route(true);
  main.focus();
});

// Without a key the console can do nothing: Escape does not dismiss the
// dialog then.
dialog.addEventListener('cancel', (ev) => {
  if (!getKey()) ev.preventDefault();
});

forget.addEventListener('click', () => {
  clearKey();
  if (current && current.view.destroy) current.view.destroy();
  current = null;
  main.replaceChildren();
  askKey('');
});

// The skip link moves focus without touching the route.
document.querySelector('.skip-link').addEventListener('click', (ev) => {
  ev.preventDefault();
  main.focus();
});

window.addEventListener('hashchange', () => route(false));
forget.hidden = !getKey();
route(false);
