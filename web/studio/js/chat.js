// Chat: talk to an agent on trawl's own stream (POST
// /v1/agents/{id}/chat, the AI SDK UI message stream). Text streams in;
// every tool call is a card with its arguments, the live progress line,
// then the verdict, the boundary statement and the result's rows. The
// thread list resumes a running turn (GET …/chat/{chatId}/stream, with
// Last-Event-ID after a broken connection) and Stop ends it. The log
// follows the stream unless the user scrolled up (then "↓ new activity"
// brings it back). Messages have the actions of chat UIs, with the AI
// SDK's semantics: retry the last answer (trigger regenerate-message with
// its messageId), edit a question and rerun from it (a user message sent
// with its messageId: the thread is replaced from there on), copy an
// answer.

import { call, openStream, readEvents, seg, tools } from './api.js';
import { banner, clock, effectBadge, errorText, h, loading } from './dom.js';
import { jsonView } from './json.js';
import { markdown } from './markdown.js';
import { aggregateView, boundaryTable, completionOf, finalText, isQueryAnswer, progressView, queryChips, rowsView, verdictBadge } from './verdict.js';

const PENDING = 'trawl.studio.pending.';
// A broken connection is resumed this many times within one turn.
const RESUMES = 5;

function newChatId() {
  const b = new Uint8Array(6);
  crypto.getRandomValues(b);
  return `studio-${[...b].map((x) => x.toString(16).padStart(2, '0')).join('')}`;
}

function pendingKey(agent, chat) {
  return `${PENDING}${agent}/${chat}`;
}

export function chatView({ navigate }) {
  const agentSel = h('select', { id: 'chat-agent', class: 'input' });
  const newChat = h('button', { type: 'button', id: 'chat-new', class: 'button small' }, 'New chat');
  const threads = h('ul', { id: 'chat-threads', class: 'thread-list', role: 'list' });
  const title = h('h1', { id: 'chat-title', class: 'chat-title' }, 'Chat');
  const modelNote = h('div', { id: 'chat-model' });
  const log = h('ol', { id: 'chat-log', class: 'chat-log', 'aria-live': 'polite', 'aria-label': 'Conversation', tabindex: '0' });
  const newer = h('button', { type: 'button', id: 'chat-newer', class: 'new-activity', hidden: true }, '↓ new activity');
  const input = h('textarea', {
    id: 'chat-input', class: 'input chat-input', rows: '2', placeholder: 'Ask the agent…', 'aria-label': 'Message',
  });
  const send = h('button', { type: 'submit', id: 'chat-send', class: 'button primary' }, 'Send');
  const stop = h('button', { type: 'button', id: 'chat-stop', class: 'button', hidden: true }, 'Stop');
  const state = h('span', { id: 'chat-state', class: 'muted', role: 'status' });
  const form = h('form', { id: 'chat-form', class: 'chat-form', novalidate: true }, newer, input, h('div', { class: 'chat-actions' }, state, stop, send));
  // On a phone the threads fold away, so the conversation has the screen.
  const side = h('details', { class: 'chat-threads', open: !matchMedia('(max-width: 760px)').matches },
    h('summary', { class: 'sidebar-title' }, 'Threads'),
    h('div', { class: 'thread-head' }, newChat), threads);
  const el = h('div', { class: 'layout-chat' },
    h('nav', { class: 'sidebar chat-side', 'aria-label': 'Chats' },
      h('label', { class: 'field-label', for: 'chat-agent' }, 'Agent'), agentSel,
      side),
    h('section', { class: 'chat-main', 'aria-labelledby': 'chat-title' },
      h('header', { class: 'chat-head' }, title, modelNote),
      log, form));

  let agents = null;
  let info = null;
  let agent = '';
  let chat = '';
  let seq = 0;
  let turn = null; // {controller, msg} while a turn streams here

  // The log sticks to its bottom while it grows, unless the user
  // scrolled up: then the pill says there is more below.
  let stick = true;
  const atBottom = () => log.scrollHeight - log.scrollTop - log.clientHeight <= 24;
  const toBottom = () => {
    stick = true;
    newer.hidden = true;
    log.scrollTop = log.scrollHeight;
  };
  log.addEventListener('scroll', () => {
    stick = atBottom();
    if (stick) newer.hidden = true;
  });
  newer.addEventListener('click', toBottom);
  const grew = () => {
    if (stick) log.scrollTop = log.scrollHeight;
    else if (turn) newer.hidden = false;
  };
  new MutationObserver(grew).observe(log, { childList: true, subtree: true, characterData: true });
  new ResizeObserver(grew).observe(log);

  agentSel.addEventListener('change', () => navigate(`#/chat/${encodeURIComponent(agentSel.value)}`));
  newChat.addEventListener('click', () => navigate(`#/chat/${encodeURIComponent(agent)}/${encodeURIComponent(newChatId())}`));
  input.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });

  function setRunning(on, words) {
    send.disabled = on;
    stop.hidden = !on;
    state.textContent = words || '';
    el.dataset.running = String(on);
  }

  async function loadThreads() {
    try {
      const r = await call('GET', `agents/${seg(agent)}/chats`);
      const chats = r.data.chats || [];
      // Each thread by its first question and when it last changed, so
      // two chats that began alike are told apart.
      threads.replaceChildren(...chats.map((c) => h('li', null,
        h('a', {
          class: 'thread-link', href: `#/chat/${encodeURIComponent(agent)}/${encodeURIComponent(c.chatId)}`,
          'aria-current': c.chatId === chat ? 'page' : null, dataset: { chatId: c.chatId }, title: c.title || c.chatId,
        },
        h('span', { class: 'thread-title' }, c.title || c.chatId),
        h('span', { class: 'thread-meta' }, c.active ? h('span', { class: 'badge running' }, 'running') : null,
          c.updated ? h('time', { datetime: c.updated }, clock(c.updated)) : null,
          c.messages ? `${c.updated ? ' · ' : ''}${c.messages} messages` : '')))));
      if (!chats.length) threads.replaceChildren(h('li', { class: 'muted' }, 'No threads yet.'));
    } catch (err) {
      threads.replaceChildren(h('li', { class: 'inline-error' }, errorText(err)));
    }
  }

  function showModel() {
    const m = info && info.model;
    if (m && m.provider === 'replay') {
      modelNote.replaceChildren(banner('info', h('strong', null, 'Replay model. '),
        `The answers are recorded${m.transcript ? ` (“${m.transcript}”)` : ''}; the tool calls run live. `,
        'When a binding changes what a recorded call does, the answer says so.'));
    } else if (m && m.provider === '') {
      modelNote.replaceChildren(banner('error', 'No model is configured: chat is unavailable (set model in the config, or OPENAI_API_KEY).'));
    } else modelNote.replaceChildren(m ? h('p', { class: 'muted' }, `Model: ${m.name || m.provider}`) : null);
  }

  // update shows the chat arg names; a message sent meanwhile waits for
  // it (loaded), so it goes to the chat on screen.
  let loaded = Promise.resolve();
  function update(arg) {
    loaded = show(arg);
    return loaded;
  }

  async function show(arg) {
    const my = ++seq;
    if (!agents) {
      log.replaceChildren(h('li', null, loading('agents')));
      try {
        [agents, info] = await Promise.all([call('GET', 'agents').then((r) => r.data.agents || []), call('GET', 'info').then((r) => r.data)]);
      } catch (err) {
        if (my !== seq) return;
        log.replaceChildren(h('li', null, banner('error', `Could not load the agents: ${errorText(err)}`)));
        return;
      }
      if (my !== seq) return;
      agentSel.replaceChildren(...agents.map((a) => h('option', { value: a.id }, a.name ? `${a.name} (${a.id})` : a.id)));
      showModel();
    }
    const [a, c] = (arg || '').split('/');
    if (!a || !agents.some((x) => x.id === a)) {
      if (agents.length) navigate(`#/chat/${encodeURIComponent(agents[0].id)}`, true);
      else log.replaceChildren(h('li', null, banner('info', 'No agents are defined.')));
      return;
    }
    if (!c) {
      navigate(`#/chat/${encodeURIComponent(a)}/${encodeURIComponent(newChatId())}`, true);
      return;
    }
    if (turn) turn.controller.abort(); // leave the old chat's stream (its turn goes on)
    turn = null;
    agent = a;
    chat = c;
    agentSel.value = a;
    const def = agents.find((x) => x.id === a);
    title.textContent = def.name || def.id;
    setRunning(false);
    loadThreads();
    log.replaceChildren();
    let msgs = [];
    try {
      msgs = (await call('GET', `agents/${seg(agent)}/chats/${seg(chat)}`)).data || [];
    } catch (err) {
      if (err.status !== 404) log.append(h('li', null, banner('error', `Could not load the thread: ${errorText(err)}`)));
    }
    if (my !== seq) return;
    const shown = msgs.map((m) => ({ role: m.role, text: textOf(m), el: m.role === 'user' ? userMessage(textOf(m), m.id) : assistantFromParts(m).el }));
    for (const s of shown) log.append(s.el);
    if (!msgs.length) log.append(h('li', { class: 'chat-empty muted' }, 'Ask the agent something. Tool calls show their progress, verdict and rows here.'));
    markLast();
    toBottom();
    resume(my, shown);
  }

  function textOf(m) {
    return (m.parts || []).filter((p) => p.type === 'text').map((p) => p.text).join('');
  }

  // resume reattaches to a turn running on the server, if any. The
  // stream replays the running turn from its start, so what the saved
  // thread already holds of it (the server saves the user message and
  // each step as the turn goes) is taken off the page first.
  async function resume(my, shown) {
    const controller = new AbortController();
    let res;
    try {
      res = await openStream('GET', `agents/${seg(agent)}/chat/${seg(chat)}/stream`, undefined, { signal: controller.signal });
    } catch (err) {
      if (err.name !== 'AbortError') state.textContent = `Could not check for a running turn: ${errorText(err)}`;
      return;
    }
    if (my !== seq) {
      controller.abort();
      return;
    }
    if (res.status === 204) {
      sessionStorage.removeItem(pendingKey(agent, chat));
      return;
    }
    const pending = sessionStorage.getItem(pendingKey(agent, chat));
    log.querySelector('.chat-empty')?.remove();
    let lastUser = -1;
    shown.forEach((s, i) => {
      if (s.role === 'user') lastUser = i;
    });
    if (pending && (lastUser < 0 || shown[lastUser].text !== pending)) {
      log.append(userMessage(pending)); // a store that saves at the turn's end
    } else {
      for (const s of shown.slice(lastUser + 1)) s.el.remove();
    }
    follow(res, controller, 'Resumed a running turn…');
  }

  // follow reads a turn's stream into a new assistant message, resuming
  // after a broken connection with Last-Event-ID.
  async function follow(res, controller, words, into) {
    const msg = into || assistantMessage();
    if (into) msg.reopen();
    else log.append(msg.el);
    turn = { controller, msg };
    setRunning(true, words);
    let lastId = '';
    let ended = false;
    let tries = 0;
    const a = agent;
    const c = chat;
    try {
      for (;;) {
        ended = await readEvents(res, (ev) => {
          if (ev.id) lastId = ev.id;
          if (ev.data !== '[DONE]') msg.chunk(ev.data);
        });
        if (ended || controller.signal.aborted) break;
        if (++tries > RESUMES) {
          msg.note('error', 'The connection broke and could not be resumed.');
          break;
        }
        state.textContent = 'Connection lost; resuming…';
        res = await openStream('GET', `agents/${seg(a)}/chat/${seg(c)}/stream`, undefined, { signal: controller.signal, lastEventId: lastId });
        if (res.status === 204) {
          msg.note('info', 'The turn ended while the connection was down; reload the thread to see all of it.');
          break;
        }
      }
    } catch (err) {
      if (err.name !== 'AbortError') msg.note('error', errorText(err));
    }
    if (turn && turn.controller === controller) {
      turn = null;
      setRunning(false, ended ? '' : state.textContent);
      if (ended) sessionStorage.removeItem(pendingKey(a, c));
      msg.finish();
      markLast();
      if (a === agent && c === chat) loadThreads();
    }
  }

  // markLast offers Retry on the last answer only, as chat UIs do.
  function markLast() {
    const answers = log.querySelectorAll('.msg-assistant');
    answers.forEach((m, i) => {
      m.dataset.last = String(i === answers.length - 1 && !m.nextElementSibling);
    });
  }

  // send starts a turn: body is the AI SDK request's own part (trigger,
  // messageId, messages); the page from `from` on is replaced by what
  // streams (an edit, a retry).
  async function start(body, words, pendingText) {
    const controller = new AbortController();
    setRunning(true, words);
    if (pendingText) sessionStorage.setItem(pendingKey(agent, chat), pendingText);
    toBottom();
    let res;
    try {
      res = await openStream('POST', `agents/${seg(agent)}/chat`, { id: chat, ...body }, { signal: controller.signal });
    } catch (err) {
      setRunning(false);
      sessionStorage.removeItem(pendingKey(agent, chat));
      log.append(h('li', null, banner('error', `Not sent: ${errorText(err)}`)));
      return;
    }
    follow(res, controller, 'Streaming…');
  }

  // dropFrom takes el and every message after it off the page.
  function dropFrom(el) {
    while (el) {
      const next = el.nextElementSibling;
      el.remove();
      el = next;
    }
  }

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    await loaded;
    const text = input.value.trim();
    if (!text || turn || !agent || !chat) return;
    input.value = '';
    log.querySelector('.chat-empty')?.remove();
    const mid = `msg-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
    log.append(userMessage(text, mid));
    start({ trigger: 'submit-message', messages: [{ id: mid, role: 'user', parts: [{ type: 'text', text }] }] }, 'Sending…', text);
  });

  // retry regenerates the answer msgEl shows (regenerate() in the AI
  // SDK): the thread drops it, and the agent answers the question again.
  function retry(msgEl) {
    if (turn) return;
    const messageId = msgEl.dataset.messageId;
    dropFrom(msgEl);
    start({ trigger: 'regenerate-message', messageId, messages: [] }, 'Retrying…');
  }

  // edit reruns the conversation from a question, reworded (sendMessage
  // with its messageId in the AI SDK): what came after it is replaced.
  function edit(userEl, text) {
    if (turn) return;
    const messageId = userEl.dataset.messageId;
    userEl.querySelector('.msg-text-user').textContent = text;
    dropFrom(userEl.nextElementSibling);
    start({ trigger: 'submit-message', messageId, messages: [{ id: messageId, role: 'user', parts: [{ type: 'text', text }] }] }, 'Sending…', text);
  }

  // answer sends the human's answers to a message's approval requests
  // the way the AI SDK does: the saved assistant message, its waiting
  // tool parts in state approval-responded with {id, approved}, as the
  // next message of the chat; the continuation streams into msg.
  async function answer(msg, answers) {
    if (turn) {
      msg.note('error', 'A turn is running in this chat; answer once it ends.');
      msg.unanswer();
      return;
    }
    const controller = new AbortController();
    setRunning(true, 'Sending the answer…');
    let res;
    try {
      const saved = (await call('GET', `agents/${seg(agent)}/chats/${seg(chat)}`)).data || [];
      const last = saved[saved.length - 1];
      if (!last || last.role !== 'assistant') throw new Error('the thread does not wait for an approval');
      const parts = (last.parts || []).map((p) => {
        const a = p.approval && answers.get(p.approval.id);
        if (p.state !== 'approval-requested' || !a) return p;
        const approval = { id: p.approval.id, approved: a.approved };
        if (a.reason) approval.reason = a.reason;
        return { ...p, state: 'approval-responded', approval };
      });
      res = await openStream('POST', `agents/${seg(agent)}/chat`, {
        id: chat, trigger: 'submit-message', messages: [{ ...last, parts }],
      }, { signal: controller.signal });
    } catch (err) {
      setRunning(false);
      msg.note('error', `The answer was not sent: ${errorText(err)}`);
      msg.unanswer();
      return;
    }
    follow(res, controller, 'Streaming…', msg);
  }

  stop.addEventListener('click', async () => {
    stop.disabled = true;
    state.textContent = 'Stopping…';
    try {
      await call('POST', `agents/${seg(agent)}/chat/${seg(chat)}/stop`);
    } catch (err) {
      state.textContent = `Could not stop: ${errorText(err)}`;
    } finally {
      stop.disabled = false;
    }
  });

  // userMessage is a question, with Edit: the question reworded in
  // place, and the conversation rerun from it.
  function userMessage(text, messageId) {
    const body = h('div', { class: 'msg-body' }, h('span', { class: 'msg-text-user' }, text));
    const editBtn = h('button', { type: 'button', class: 'button ghost small msg-edit', 'aria-label': 'Edit this question and rerun from it' }, 'Edit');
    const el = h('li', { class: 'msg msg-user', dataset: { messageId: messageId || '' } },
      h('div', { class: 'msg-head' }, h('p', { class: 'msg-role' }, 'You'), h('div', { class: 'msg-actions' }, editBtn)), body);
    editBtn.addEventListener('click', () => {
      if (turn || el.querySelector('.msg-editor')) return;
      const area = h('textarea', { class: 'input chat-input', rows: '2', 'aria-label': 'Edit the question' });
      area.value = body.querySelector('.msg-text-user').textContent;
      const save = h('button', { type: 'submit', class: 'button primary small' }, 'Send');
      const cancel = h('button', { type: 'button', class: 'button small' }, 'Cancel');
      const editor = h('form', { class: 'msg-editor', novalidate: true }, area,
        h('p', { class: 'muted msg-editor-note' }, 'Sending reruns the conversation from this question; what came after it is replaced.'),
        h('div', { class: 'chat-actions' }, cancel, save));
      const close = () => {
        editor.remove();
        body.hidden = false;
      };
      cancel.addEventListener('click', close);
      editor.addEventListener('submit', (ev) => {
        ev.preventDefault();
        const text = area.value.trim();
        if (!text || turn) return;
        close();
        edit(el, text);
      });
      body.hidden = true;
      el.append(editor);
      area.focus();
    });
    return el;
  }

  // assistantMessage renders a streamed assistant message chunk by chunk.
  function assistantMessage() {
    const body = h('div', { class: 'msg-body' });
    const copyBtn = h('button', { type: 'button', class: 'button ghost small msg-copy', 'aria-label': 'Copy the answer' }, 'Copy');
    const retryBtn = h('button', { type: 'button', class: 'button ghost small msg-retry', 'aria-label': 'Retry: answer the question again' }, 'Retry');
    const el = h('li', { class: 'msg msg-assistant', dataset: { state: 'streaming' } },
      h('div', { class: 'msg-head' }, h('p', { class: 'msg-role' }, 'Agent'), h('div', { class: 'msg-actions' }, copyBtn, retryBtn)), body);
    copyBtn.addEventListener('click', async () => {
      const text = [...texts.values()].map((t) => t.text).join('\n\n');
      try {
        await navigator.clipboard.writeText(text);
        copyBtn.textContent = 'Copied';
      } catch {
        copyBtn.textContent = 'Copy failed';
      }
      el.dataset.copied = text;
      setTimeout(() => { copyBtn.textContent = 'Copy'; }, 1500);
    });
    retryBtn.addEventListener('click', () => retry(el));
    const texts = new Map(); // text id → {el, text}
    const cards = new Map(); // toolCallId → card
    const asked = new Map(); // approval id → card, while it waits
    const answers = new Map(); // approval id → {approved, reason}
    let context = null;
    let changes = null;
    const scope = { agent_id: agent, chat_id: chat };
    let self = null;
    // decide takes one answer; when every request of the message has
    // one, they go to the server together (as sendAutomaticallyWhen
    // does in the AI SDK).
    const decide = (approvalId, approved) => {
      answers.set(approvalId, { approved });
      if ([...asked.keys()].every((k) => answers.has(k))) answer(self, answers);
    };
    const card = (id, name) => {
      if (!cards.has(id)) {
        const c = toolCard(id, name, scope, decide);
        cards.set(id, c);
        body.append(c.el);
      }
      return cards.get(id);
    };
    self = {
      el,
      chunk(ch) {
        switch (ch.type) {
          case 'start':
            if (ch.messageId) el.dataset.messageId = ch.messageId;
            break;
          case 'text-start': {
            const t = { el: h('div', { class: 'msg-text' }), text: '' };
            texts.set(ch.id, t);
            body.append(t.el);
            break;
          }
          case 'text-delta': {
            const t = texts.get(ch.id);
            if (!t) break;
            t.text += ch.delta;
            t.el.replaceChildren(...markdown(t.text));
            break;
          }
          case 'reasoning-delta':
            break; // reasoning is not shown
          case 'tool-input-start':
            card(ch.toolCallId, ch.toolName);
            break;
          case 'tool-input-available':
            card(ch.toolCallId, ch.toolName).input(ch.input);
            break;
          case 'tool-input-error':
            card(ch.toolCallId, ch.toolName).input(ch.input);
            card(ch.toolCallId, ch.toolName).error(ch.errorText);
            break;
          case 'data-tool-loop-progress':
            if (ch.data) card(ch.id, ch.data.toolName).progress(ch.data);
            break;
          case 'tool-output-available':
            card(ch.toolCallId, '').output(ch.output);
            break;
          case 'data-tool-media':
            if (ch.data && Array.isArray(ch.data.media)) card(ch.id, '').media(ch.data.media);
            break;
          case 'tool-output-error':
            card(ch.toolCallId, '').error(ch.errorText);
            break;
          case 'data-approval-evidence':
            if (ch.data && ch.data.toolCallId) card(ch.data.toolCallId, ch.data.toolName).evidence(ch.data);
            break;
          case 'tool-approval-request': {
            const c = card(ch.toolCallId, '');
            asked.set(ch.approvalId, c);
            c.ask(ch.approvalId);
            el.dataset.state = 'waiting';
            break;
          }
          case 'tool-output-denied':
            card(ch.toolCallId, '').denied();
            break;
          case 'data-turn-changes':
            if (!changes) changes = h('div', { class: 'turn-changes', 'data-turn-changes': '' });
            changes.replaceChildren(...turnChanges(ch.data));
            body.append(changes); // under the answer so far
            break;
          case 'data-claim-check':
            body.append(claimCheck(ch.data)); // under the answer it checks, before a correction
            break;
          case 'data-context':
            if (!context) {
              context = h('div', { class: 'context-meter', 'data-context': '' });
              el.insertBefore(context, body);
            }
            context.replaceChildren(contextMeter(ch.data));
            break;
          case 'abort':
            this.note('info', 'Stopped.');
            el.dataset.state = 'stopped';
            break;
          case 'error':
            this.note('error', ch.errorText || 'The turn failed.');
            break;
          default:
        }
      },
      note(kind, text) {
        body.append(h('p', { class: ['msg-note', kind === 'error' ? 'inline-error' : 'muted'] }, text));
      },
      finish() {
        if (el.dataset.state === 'streaming') el.dataset.state = 'done';
        for (const c of cards.values()) c.settle();
        if (changes) body.append(changes);
      },
      // reopen makes the message take a continuation (the approved or
      // denied calls, then the model's next steps).
      reopen() {
        el.dataset.state = 'streaming';
        asked.clear();
        answers.clear();
      },
      // unanswer offers the buttons again after a failed send.
      unanswer() {
        answers.clear();
        for (const [id, c] of asked) c.ask(id);
      },
    };
    return self;
  }

  // assistantFromParts renders a saved assistant message.
  function assistantFromParts(m) {
    const msg = assistantMessage();
    msg.el.dataset.messageId = m.id || '';
    const later = [];
    let n = 0;
    for (const p of m.parts || []) {
      if (p.type === 'text') {
        const id = `saved-${n++}`;
        msg.chunk({ type: 'text-start', id });
        msg.chunk({ type: 'text-delta', id, delta: p.text });
      } else if (p.type === 'dynamic-tool' || p.type.startsWith('tool-')) {
        const name = p.toolName || p.type.replace(/^tool-/, '');
        msg.chunk({ type: 'tool-input-available', toolCallId: p.toolCallId, toolName: name, input: p.input });
        if (p.state === 'output-available') msg.chunk({ type: 'tool-output-available', toolCallId: p.toolCallId, output: p.output });
        if (p.state === 'output-available' && Array.isArray(p.media)) msg.chunk({ type: 'data-tool-media', id: p.toolCallId, data: { media: p.media } });
        if (p.state === 'output-error') msg.chunk({ type: 'tool-output-error', toolCallId: p.toolCallId, errorText: p.errorText });
        if (p.state === 'output-denied') msg.chunk({ type: 'tool-output-denied', toolCallId: p.toolCallId });
        if (p.state === 'approval-requested' && p.approval) {
          msg.chunk({ type: 'tool-approval-request', toolCallId: p.toolCallId, approvalId: p.approval.id });
        }
      } else if (p.type === 'data-claim-check') {
        msg.chunk({ type: p.type, id: p.id, data: p.data }); // in place: after the answer, before its correction
      } else if (p.type === 'data-approval-evidence' || p.type === 'data-turn-changes') {
        later.push({ type: p.type, id: p.id, data: p.data });
      }
    }
    // The thread keeps the evidence before the tool parts: it goes on
    // the cards once they are all there, in the order of the calls.
    for (const ch of later) msg.chunk(ch);
    msg.finish();
    return msg;
  }

  // toolCard is one tool call: arguments, the live progress line, then
  // the verdict, the boundary statement and the rows.
  function toolCard(callId, toolName, scope, decide) {
    const name = h('span', { class: 'tc-name' }, toolName || 'tool');
    const badge = h('span', { class: 'tc-badge' }, h('span', { class: ['pill', 'pill-running'] }, 'Running'));
    const trace = h('a', {
      class: 'tc-trace', href: `#/activity/${encodeURIComponent(`agent=${scope.agent_id}&chat=${scope.chat_id}&call=${callId}`)}`,
    }, 'Trace');
    const args = h('details', { class: 'tc-args' }, h('summary', null, 'Arguments'), h('pre', { class: 'json' }));
    const prog = progressView();
    const result = h('div', { class: 'tc-result' });
    const effect = h('span', { class: 'tc-effect' });
    const proof = h('div', { class: 'tc-evidence', hidden: true });
    const approval = h('div', { class: 'tc-approval', hidden: true });
    const el = h('article', { class: 'tool-call', dataset: { toolCallId: callId, state: 'running' }, 'aria-label': `Tool call ${toolName}` },
      h('header', { class: 'tc-head' }, name, effect, badge, trace),
      args, proof, approval, prog.el, result);
    let input = {};
    // firstPageOnly marks a call that came back without a verdict although
    // its tool pages (or the call asked for every page): it ran without
    // looping, so it saw the first page only.
    const firstPageOnly = async (env) => {
      let paged = input && input._all_pages === true;
      if (!paged) {
        const n = name.textContent;
        try {
          const named = (await tools()).filter((t) => t.name === n || t.id === n);
          paged = named.some((t) => t.pagination && t.pagination.strategy && t.pagination.strategy !== 'none');
        } catch {
          return; // without the catalog, no claim either way
        }
      }
      if (!paged || el.dataset.verdict !== 'none' || isQueryAnswer(env)) return;
      el.dataset.verdict = 'first_page';
      badge.replaceChildren(h('span', {
        class: ['pill', 'pill-partial'], dataset: { verdict: 'first_page' },
        title: 'This call ran without looping (response looping is off for this tool in the agent’s binding): it saw the first page only, and more rows may exist beyond it.',
      }, 'First page only'));
    };
    return {
      el,
      input(v) {
        input = v || {};
        args.querySelector('pre').textContent = JSON.stringify(input, null, 2);
      },
      progress(p) {
        if (p.toolName && name.textContent === 'tool') name.textContent = p.toolName;
        prog.update(p);
      },
      output(out) {
        el.dataset.state = 'done';
        approval.hidden = true;
        approval.replaceChildren();
        const env = out && typeof out === 'object' ? out : {};
        prog.done(finalText(env));
        const c = completionOf(env);
        badge.replaceChildren(c ? verdictBadge(env) : h('span', { class: ['pill', 'pill-none'], dataset: { verdict: 'none' } }, 'Done'));
        el.dataset.verdict = c || 'none';
        if (!c) firstPageOnly(env);
        const query = isQueryAnswer(env);
        const fields = Array.isArray(input._fields) ? input._fields : null;
        const agg = aggregateView(env);
        // A queryToolResult aggregate has no rows of its own to list.
        const rows = agg && !env._boundary ? null : rowsView(env, { scope, fields, callFilter: input._filter });
        result.replaceChildren(...[
          query ? queryChips(input) : null,
          env._note ? h('p', { class: 'note' }, env._note) : null,
          env._boundary ? h('details', { class: 'tc-boundary' }, h('summary', null, 'Boundary statement'), boundaryTable(env._boundary)) : null,
          agg,
          rows || (agg ? null : jsonView('Output', out)), // a result without rows (a write's answer) as it came
        ].filter(Boolean));
      },
      // media shows the pictures (and sounds) the call returned beside
      // its output, which names them as attached.
      media(items) {
        for (const m of items) {
          const type = String(m.mimeType || '');
          if (m.type === 'image' && /^image\/[\w.+-]+$/.test(type)) {
            result.append(h('img', { class: 'tc-media', src: `data:${type};base64,${m.data}`, alt: `A picture the call returned (${type})` }));
          } else if (m.type === 'audio' && /^audio\/[\w.+-]+$/.test(type)) {
            result.append(h('audio', { class: 'tc-media', controls: '', src: `data:${type};base64,${m.data}` }));
          }
        }
      },
      error(text) {
        el.dataset.state = 'error';
        prog.done();
        badge.replaceChildren(h('span', { class: ['pill', 'pill-failed'], dataset: { verdict: 'failed' } }, 'Failed'));
        result.replaceChildren(h('p', { class: 'inline-error' }, text));
      },
      // evidence shows what the human approves: the effect, the
      // arguments and the verdicts of the turn's earlier reads.
      evidence(ev) {
        if (ev.toolName && name.textContent === 'tool') name.textContent = ev.toolName;
        effect.replaceChildren(ev.effect ? effectBadge(ev.effect) : null);
        if (ev.input !== undefined) this.input(ev.input);
        args.open = true;
        const reads = Array.isArray(ev.reads) ? ev.reads : [];
        proof.hidden = false;
        proof.replaceChildren(h('p', { class: 'tc-evidence-title' }, 'Before this call, the turn read:'),
          reads.length ? h('ul', { class: 'tc-reads' }, reads.map((r) => h('li', null, r)))
            : h('p', { class: 'muted' }, 'nothing (no read came before it in this turn).'));
      },
      // ask shows Approve / Deny; the call waits until one is clicked.
      ask(approvalId) {
        el.dataset.state = 'waiting';
        el.dataset.approvalId = approvalId;
        prog.done();
        badge.replaceChildren(h('span', { class: ['pill', 'pill-waiting'], dataset: { verdict: 'waiting' } }, 'Waits for approval'));
        const yes = h('button', { type: 'button', class: 'button small primary', dataset: { approve: approvalId } }, 'Approve');
        const no = h('button', { type: 'button', class: 'button small', dataset: { deny: approvalId } }, 'Deny');
        const pick = (ok) => {
          yes.disabled = true;
          no.disabled = true;
          el.dataset.state = ok ? 'approved' : 'denying';
          badge.replaceChildren(h('span', { class: ['pill', 'pill-running'] }, ok ? 'Approved' : 'Denied'));
          decide(approvalId, ok);
        };
        yes.addEventListener('click', () => pick(true));
        no.addEventListener('click', () => pick(false));
        approval.hidden = false;
        approval.replaceChildren(h('p', { class: 'tc-approval-q' }, 'This call changes data. Run it?'), yes, ' ', no);
        requestAnimationFrame(() => approval.scrollIntoView({ block: 'center' }));
      },
      denied() {
        el.dataset.state = 'denied';
        prog.done();
        approval.hidden = true;
        approval.replaceChildren();
        badge.replaceChildren(h('span', { class: ['pill', 'pill-failed'], dataset: { verdict: 'denied' } }, 'Denied'));
        result.replaceChildren(h('p', { class: 'muted' }, 'Denied: the call did not run.'));
      },
      settle() {
        if (el.dataset.state === 'running') {
          el.dataset.state = 'stopped';
          prog.done();
          badge.replaceChildren(h('span', { class: ['pill', 'pill-none'] }, 'No result'));
        }
      },
    };
  }

  return {
    el,
    update,
    destroy: () => {
      if (turn) turn.controller.abort();
    },
  };
}

// turnChanges says what a turn changed (a data-turn-changes part:
// {changes: [{toolCallId, tool, effect, outcome}]}).
function turnChanges(data) {
  const list = (data && Array.isArray(data.changes)) ? data.changes : [];
  const words = { done: 'done', failed: 'failed', unknown: 'outcome unknown (check before trying again)', denied: 'denied', waiting: 'waits for approval' };
  return [h('p', { class: 'turn-changes-title' }, 'This turn changed:'),
    h('ul', null, list.map((c) => h('li', { dataset: { outcome: c.outcome || '' } },
      h('code', null, c.tool || c.toolCallId), ' ', effectBadge(c.effect), ' ', words[c.outcome] || c.outcome || '')))];
}

// claimCheck shows a data-claim-check part under the answer it checks:
// each count, total or "all" its calls do not support, and whether a
// correction follows ({mode, status, revision, findings: [{claim, tool,
// callId, verdict}]}).
function claimCheck(data) {
  const d = data && typeof data === 'object' ? data : {};
  const list = Array.isArray(d.findings) ? d.findings : [];
  const title = d.status === 'revising' ? 'Unsupported claim — a correction follows:' : 'Unsupported claim:';
  return h('div', { class: 'claim-check', role: 'note', dataset: { status: d.status || '' } },
    h('p', { class: 'claim-check-title' }, title),
    h('ul', null, list.map((f) => h('li', null, h('q', null, f.claim || ''), ' — ',
      h('code', null, f.tool || f.callId || 'a call'), ` was ${String(f.verdict || 'not complete').replace(/_/g, ' ')}, not complete`))));
}

// contextMeter shows a data-context chunk (stream.ContextReport): what
// the step sent the model against the agent's context budget, and how
// many older results went as their verdicts.
function contextMeter(data) {
  const d = data && typeof data === 'object' ? data : {};
  const rows = [];
  for (const unit of ['tokens', 'chars']) {
    const sent = d[unit];
    const budget = d[`budget${unit[0].toUpperCase()}${unit.slice(1)}`];
    if (typeof sent === 'number') {
      rows.push(h('div', { class: 'meter-row' },
        h('span', { class: 'meter-label' }, `Context ${unit}${unit === 'tokens' && !d.calibrated ? ' (estimated)' : ''}`),
        typeof budget === 'number' && budget > 0 ? h('meter', { min: '0', max: String(budget), value: String(sent) }) : null,
        h('span', { class: 'muted' }, typeof budget === 'number' ? `${sent} of ${budget}` : String(sent))));
    }
  }
  const shrunk = [];
  if (d.compacted > 0) shrunk.push(`${d.compacted} older result${d.compacted === 1 ? '' : 's'} sent as verdicts`);
  if (d.shortened > 0) shrunk.push(`${d.shortened} older text${d.shortened === 1 ? '' : 's'} shortened`);
  if (d.droppedTurns > 0) shrunk.push(`${d.droppedTurns} oldest turn${d.droppedTurns === 1 ? '' : 's'} left out`);
  if (shrunk.length) rows.push(h('div', { class: 'muted meter-note' }, shrunk.join(' · ')));
  if (!rows.length) {
    rows.push(h('span', { class: 'muted' }, Object.entries(d).map(([k, v]) => `${k}: ${typeof v === 'object' ? JSON.stringify(v) : v}`).join(' · ')));
  }
  return h('div', { class: 'meter' }, rows);
}
