// The agent's MCP endpoint and copyable client configurations: Claude
// Desktop (stdio, `trawl mcp`), Claude Code, VS Code, and a curl
// initialize, with the token step (the admin key, or a session token
// minted for one user).

import { h, id } from './dom.js';

// mcpURL is the agent's Streamable HTTP endpoint on this server.
export function mcpURL(agentId) {
  return new URL(`../v1/agents/${encodeURIComponent(agentId)}/mcp`, document.baseURI).href;
}

// mcpConfigs are the client configurations, by name, for an agent.
export function mcpConfigs(agentId) {
  const url = mcpURL(agentId);
  const name = `trawl-${agentId}`.replace(/[^A-Za-z0-9_-]/g, '-');
  const desktop = { mcpServers: { [name]: { command: '/path/to/trawl', args: ['mcp', '--agent', agentId, '--config', '/path/to/trawl.yaml'] } } };
  const code = `claude mcp add --transport http ${name} ${url} --header "Authorization: Bearer $TRAWL_TOKEN"`;
  const vscode = {
    servers: { [name]: { type: 'http', url, headers: { Authorization: 'Bearer ${input:trawl-token}' } } },
    inputs: [{ type: 'promptString', id: 'trawl-token', description: 'trawl admin key or session token', password: true }],
  };
  const generic = { mcpServers: { [name]: { type: 'http', url, headers: { Authorization: 'Bearer <token>' } } } };
  const init = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'curl', version: '1' } } });
  const curl = `curl -sN '${url}' -H "Authorization: Bearer $TRAWL_TOKEN" -H 'Content-Type: application/json' ` +
    `-H 'Accept: application/json, text/event-stream' -d '${init}'`;
  return [
    { key: 'claude-desktop', title: 'Claude Desktop (stdio: claude_desktop_config.json)', text: JSON.stringify(desktop, null, 2),
      note: 'Runs trawl mcp next to the client, as the config\'s organization; drop --config to serve the built-in demo.' },
    { key: 'claude-code', title: 'Claude Code (HTTP)', text: code, note: 'Or over stdio: claude mcp add trawl -- /path/to/trawl mcp' },
    { key: 'vscode', title: 'VS Code (.vscode/mcp.json)', text: JSON.stringify(vscode, null, 2), note: 'VS Code asks for the token once and keeps it.' },
    { key: 'generic', title: 'Any client with Streamable HTTP', text: JSON.stringify(generic, null, 2), note: 'Both protocol revisions are served: 2026-07-28 and 2025-11-25.' },
    { key: 'curl', title: 'curl: initialize', text: curl, note: 'Answers with the server\'s capabilities and instructions, and an Mcp-Session-Id.' },
  ];
}

function copyButton(text, status) {
  return h('button', {
    type: 'button', class: 'button small',
    onclick: async () => {
      try {
        await navigator.clipboard.writeText(text);
        status.textContent = 'Copied';
      } catch {
        status.textContent = 'Select the text and copy it';
      }
    },
  }, 'Copy');
}

// mcpPanel is the agent page's "Use from MCP clients" section.
export function mcpPanel(agentId) {
  const url = mcpURL(agentId);
  const urlStatus = h('span', { class: 'hint', role: 'status' });
  const tabs = mcpConfigs(agentId).map((c) => {
    const status = h('span', { class: 'hint', role: 'status' });
    const pre = h('pre', { class: 'json mcp-config', tabindex: '0', dataset: { config: c.key } }, h('code', null, c.text));
    return h('details', { class: 'mcp-client', dataset: { client: c.key } },
      h('summary', null, c.title),
      pre, h('div', { class: 'json-tools' }, copyButton(c.text, status), status),
      h('p', { class: 'muted small' }, c.note));
  });
  const tokenId = id('mcp-token');
  return h('details', { class: 'mcp-panel', dataset: { mcp: agentId } },
    h('summary', null, 'Use from MCP clients'),
    h('p', null, 'This agent\'s tools over MCP, with looping, verdicts, stored results and tool search as in chat: ',
      h('code', { class: 'mcp-url' }, url), ' ', copyButton(url, urlStatus), urlStatus),
    h('p', { id: tokenId, class: 'muted' },
      'Send Authorization: Bearer with the admin key, or with a session token your backend mints for one user ',
      '(POST /v1/sessions {"user_id": …, "runtime_credentials": …}): the session\'s user, credentials and cache scope then apply, ',
      'as in chat. Writes that need approval are asked through the client, or wait in Approvals.'),
    tabs);
}
