// The trawl JSON API, called with the admin key the user pasted. The key
// lives in sessionStorage only: it is gone when the tab closes, and it is
// sent to this origin alone.

const KEY = 'trawl.studio.adminKey';
// The console is served at /studio/; the API sits beside it at /v1/.
const BASE = new URL('../v1/', document.baseURI);

// APIError is a failed call: the HTTP status (0 when the server could not
// be reached) and the API's {"error":{"code","message"}}.
export class APIError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = 'APIError';
    this.status = status;
    this.code = code;
  }
}

export function getKey() {
  try {
    return sessionStorage.getItem(KEY) || '';
  } catch {
    return '';
  }
}

export function setKey(key) {
  sessionStorage.setItem(KEY, key);
}

export function clearKey() {
  sessionStorage.removeItem(KEY);
}

let unauthorized = () => {};
// onUnauthorized registers what happens when the server refuses the key.
export function onUnauthorized(fn) {
  unauthorized = fn;
}

// call sends one request and returns {data, text, status, ms}. A non-2xx
// answer throws an APIError carrying the API's code and message; a 401
// also forgets the key and asks for it again.
export async function call(method, path, body) {
  const key = getKey();
  if (!key) {
    const err = new APIError(401, 'no_key', 'an admin key is required');
    unauthorized(err);
    throw err;
  }
  const headers = { Authorization: `Bearer ${key}`, Accept: 'application/json' };
  const init = { method, headers, cache: 'no-store', credentials: 'omit' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const started = performance.now();
  let res;
  try {
    res = await fetch(new URL(path, BASE), init);
  } catch (e) {
    throw new APIError(0, 'network', `could not reach trawl (${e.message})`);
  }
  const text = await res.text();
  const ms = Math.round(performance.now() - started);
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!res.ok) {
    const e = data && data.error;
    const err = new APIError(res.status, (e && e.code) || `http_${res.status}`, (e && e.message) || `HTTP ${res.status} ${res.statusText}`);
    if (res.status === 401) {
      clearKey();
      unauthorized(err);
    }
    throw err;
  }
  return { data, text, status: res.status, ms };
}

// seg escapes one path segment (tool ids hold dots, never slashes, but
// an agent id or a future tool id may hold anything).
export function seg(s) {
  return encodeURIComponent(s);
}

let toolsPromise = null;
// tools is the catalog, fetched once per page load (refreshTools fetches
// it anew).
export function tools() {
  if (!toolsPromise) {
    toolsPromise = call('GET', 'tools').then((r) => r.data.tools || []);
    toolsPromise.catch(() => {
      toolsPromise = null;
    });
  }
  return toolsPromise;
}

export function refreshTools() {
  toolsPromise = null;
  return tools();
}

// openStream sends one request that answers a UI message stream (SSE)
// and returns the Response once its headers are in; a non-2xx answer
// throws an APIError as call does. A 204 comes back as is (no run to
// resume). signal aborts the request (and with it the server's side).
export async function openStream(method, path, body, { signal, lastEventId } = {}) {
  const key = getKey();
  if (!key) {
    const err = new APIError(401, 'no_key', 'an admin key is required');
    unauthorized(err);
    throw err;
  }
  const headers = { Authorization: `Bearer ${key}`, Accept: 'text/event-stream' };
  if (lastEventId) headers['Last-Event-ID'] = String(lastEventId);
  const init = { method, headers, cache: 'no-store', credentials: 'omit', signal };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(new URL(path, BASE), init);
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new APIError(0, 'network', `could not reach trawl (${e.message})`);
  }
  if (!res.ok) {
    let data = null;
    try {
      data = JSON.parse(await res.text());
    } catch {
      data = null;
    }
    const e = data && data.error;
    const err = new APIError(res.status, (e && e.code) || `http_${res.status}`, (e && e.message) || `HTTP ${res.status} ${res.statusText}`);
    if (res.status === 401) {
      clearKey();
      unauthorized(err);
    }
    throw err;
  }
  return res;
}

// readEvents reads a server-sent event stream from a fetch Response and
// calls onEvent({id, data}) for each event, the chunk's JSON parsed
// (data is the string "[DONE]" for the stream's end). It resolves when
// the body ends: true when the stream ended with [DONE], false when the
// connection broke or ended early.
export async function readEvents(res, onEvent) {
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let id = '';
  let data = [];
  let done = false;
  const dispatch = () => {
    if (!data.length) return;
    const text = data.join('\n');
    data = [];
    if (text === '[DONE]') {
      done = true;
      onEvent({ id, data: '[DONE]' });
      return;
    }
    let chunk;
    try {
      chunk = JSON.parse(text);
    } catch {
      return; // not a chunk: nothing to show
    }
    onEvent({ id, data: chunk });
  };
  try {
    for (;;) {
      const { value, done: end } = await reader.read();
      if (end) break;
      buf += value;
      let nl;
      while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf[nl] === '\r' && buf[nl + 1] === '\n' ? 2 : 1));
        if (line === '') dispatch();
        else if (line.startsWith(':')) continue;
        else {
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          let val = colon < 0 ? '' : line.slice(colon + 1);
          if (val.startsWith(' ')) val = val.slice(1);
          if (field === 'data') data.push(val);
          else if (field === 'id') id = val;
        }
      }
    }
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    return false; // the connection broke
  }
  dispatch();
  return done;
}
