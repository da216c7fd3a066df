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
