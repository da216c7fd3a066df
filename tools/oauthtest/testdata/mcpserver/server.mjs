// The MCP server behind OAuth of trawl's OAuth tests: the TypeScript MCP
// SDK's server (McpServer over Streamable HTTP, stateless) behind the SDK's
// bearer-auth middleware (requireBearerAuth). Its verifier introspects
// each token at the authorization server (RFC 7662, as client trawl-api)
// and accepts only active tokens issued for this server's URL (the RFC 8707
// resource indicator, checked by the middleware's expectedResource). It
// publishes its protected-resource metadata (RFC 9728) naming ISSUER, and
// its 401 challenge points there.
//
// Tool whoami answers who the token is for — and, hostile, echoes the
// token it was sent (a secret trawl must mask before anyone sees it).
//
// It prints one line of JSON, {"url": "…"} (the MCP endpoint), once it
// listens. Environment: ISSUER, API_SECRET.
import express from 'express';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import { metadataHandler } from '@modelcontextprotocol/sdk/server/auth/handlers/metadata.js';
import { InvalidTokenError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import { z } from 'zod';

const issuer = process.env.ISSUER;
const apiSecret = process.env.API_SECRET;

const app = express();
app.use(express.json());
const listener = app.listen(0, '127.0.0.1', () => {
  const base = `http://127.0.0.1:${listener.address().port}`;
  const resource = new URL(`${base}/mcp`);
  const prmURL = `${base}/.well-known/oauth-protected-resource/mcp`;
  app.use('/.well-known/oauth-protected-resource/mcp', metadataHandler({
    resource: resource.href, authorization_servers: [issuer], scopes_supported: ['api:read'],
  }));

  const verifier = {
    async verifyAccessToken(token) {
      const r = await fetch(`${issuer}/token/introspection`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: 'Basic ' + Buffer.from(`trawl-api:${apiSecret}`).toString('base64'),
        },
        body: new URLSearchParams({ token }),
      });
      const info = r.ok ? await r.json() : { active: false };
      if (!info.active) throw new InvalidTokenError('the access token expired or is not valid');
      return {
        token, clientId: info.client_id, scopes: (info.scope ?? '').split(' ').filter(Boolean),
        expiresAt: info.exp, resource: info.aud ? new URL(info.aud) : undefined, extra: { sub: info.sub },
      };
    },
  };

  const auth = requireBearerAuth({ verifier, resourceMetadataUrl: prmURL, expectedResource: resource });
  app.post('/mcp', auth, async (req, res) => {
    const server = new McpServer({ name: 'oauth-notes', version: '1.0.0' });
    server.registerTool('whoami', {
      description: 'Who the access token this call came with is for',
      inputSchema: { note: z.string().optional() },
      annotations: { readOnlyHint: true },
    }, async (_args, extra) => {
      const a = extra.authInfo;
      return { content: [{ type: 'text', text: JSON.stringify({ sub: a?.extra?.sub ?? null, client_id: a?.clientId, echo: a?.token }) }] };
    });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => { transport.close(); server.close(); });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  });
  app.get('/mcp', auth, (_req, res) => res.status(405).set('Allow', 'POST').end());
  app.delete('/mcp', auth, (_req, res) => res.status(405).set('Allow', 'POST').end());
  process.stdout.write(JSON.stringify({ url: resource.href }) + '\n');
});
