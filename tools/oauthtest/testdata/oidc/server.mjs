// The authorization server of trawl's OAuth tests: oidc-provider on
// loopback, with short token lifetimes, refresh-token rotation,
// revocation and introspection, and three clients:
//
//   trawl-web  authorization_code (+ PKCE) and refresh_token, redirect URIs
//              from REDIRECT_URIS (space separated)
//   trawl-cc   client_credentials
//   trawl-api  the loopback API, which introspects the tokens it is sent
//
// Every access token is for the resource API_URL (opaque, so that the API
// introspects it), or the resource indicator the client names (an MCP
// server's URL). With DCR=1, clients may register themselves (RFC 7591,
// open registration: no initial access token). It listens on 127.0.0.1,
// port PORT (or a free one), and prints one line of JSON, {"issuer": "…"},
// once it listens; the secrets come from the environment (WEB_SECRET,
// CC_SECRET, API_SECRET).
import Provider from 'oidc-provider';

const env = (k, d) => process.env[k] ?? d;
const ttl = Number(env('ACCESS_TTL', '60'));
const resource = env('API_URL', 'http://127.0.0.1/api');
const scope = 'api:read api:write';

// PORT: the one the test picked (it may configure trawl before this
// server starts); else a free one.
const port = Number(env('PORT', '0')) || await new Promise((resolve) => {
  // Pick a free port: the issuer must name it before the provider starts.
  import('node:net').then(({ createServer }) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
  });
});
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'trawl-web', client_secret: env('WEB_SECRET'),
      grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'],
      redirect_uris: env('REDIRECT_URIS', '').split(' ').filter(Boolean),
      token_endpoint_auth_method: env('WEB_AUTH_METHOD', 'client_secret_basic'),
    },
    {
      client_id: 'trawl-cc', client_secret: env('CC_SECRET'),
      grant_types: ['client_credentials'], response_types: [], redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
    },
    {
      client_id: 'trawl-api', client_secret: env('API_SECRET'),
      grant_types: [], response_types: [], redirect_uris: [],
    },
  ],
  cookies: { keys: ['trawl-oidc-test-cookie-key'] },
  pkce: { required: () => true },
  scopes: ['openid', 'offline_access', 'api:read', 'api:write'],
  features: {
    devInteractions: { enabled: true },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    registration: { enabled: env('DCR', '') === '1' },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      // Any resource indicator is a resource server (an MCP server's URL,
      // say): its tokens are for it alone.
      getResourceServerInfo: (ctx, indicator) => ({ scope, audience: indicator, accessTokenTTL: ttl, accessTokenFormat: 'opaque' }),
    },
  },
  // Every authorization-code grant gets a refresh token, rotated on use.
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  rotateRefreshToken: () => true,
  // Revoking any token of a grant revokes the grant (refresh token too):
  // a test's way to withdraw consent.
  revokeGrantPolicy: () => true,
  ttl: {
    AccessToken: ttl, ClientCredentials: ttl, AuthorizationCode: 60,
    RefreshToken: 3600, Grant: 3600, Session: 3600, Interaction: 600,
  },
  // Errors are for the browser page; keep the log quiet.
  renderError: async (ctx, out) => {
    ctx.type = 'html';
    ctx.body = `<!doctype html><title>oidc error</title><h1>${out.error}</h1><p id="desc">${out.error_description ?? ''}</p>`;
  },
});
provider.listen(port, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ issuer }) + '\n');
});
