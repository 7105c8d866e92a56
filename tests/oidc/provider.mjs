// A real OpenID provider (oidc-provider, OpenID certified) for
// tests/it/oauth.rs: it issues JWT access tokens (RFC 9068) for skilld's
// resource through the client-credentials grant with resource indicators
// (RFC 8707), as a company's identity provider would.
//
// Started as `node provider.mjs`; it listens on a free loopback port (or
// on `OIDC_PORT`) and prints `issuer http://127.0.0.1:PORT` as its first
// line. It runs until its stdin closes. Besides the
// provider's own routes it answers, for the tests only:
//   POST /test/rotate  a new signing key replaces the old one (the JWKS
//                      then lists the new key alone), as a key rotation does
//   GET  /test/stats   how often discovery, the JWKS and the token endpoint
//                      were asked, so a test can count skilld's fetches
import http from 'node:http';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import Provider from 'oidc-provider';

// Every scope skilld maps to a role (docs/mcp.md, "OAuth sign-in").
const SKILLD_SCOPES = ['skilld:read', 'skilld:invoke', 'skilld:approve', 'skilld:admin'];

// Clients of the client-credentials grant, each with the skilld scopes it
// may have; a token's `sub` is its client id.
const GRANTS = {
  agent: 'skilld:read skilld:invoke',
  reader: 'skilld:read',
  approver: 'skilld:read skilld:invoke skilld:approve',
  operator: 'skilld:read skilld:invoke skilld:approve skilld:admin',
  nobody: '',
  // Its tokens last one second: the expired-token case.
  brief: 'skilld:read skilld:invoke',
};
const CLIENTS = Object.keys(GRANTS).map((id) => ({
  client_id: id,
  client_secret: `${id}-secret`,
  grant_types: ['client_credentials'],
  response_types: [],
  redirect_uris: [],
  token_endpoint_auth_method: 'client_secret_basic',
}));

function newKey() {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...privateKey.export({ format: 'jwk' }), kid: randomUUID(), alg: 'RS256', use: 'sig' };
}

// Any resource on loopback is a resource server: the tests' skilld picks
// its port when it starts, after this provider, and the wrong-audience
// case asks for a token for another one.
function isLoopbackResource(indicator) {
  try {
    const url = new URL(indicator);
    return url.protocol === 'http:' && ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
  } catch {
    return false;
  }
}

function makeProvider(issuer, key) {
  const provider = new Provider(issuer, {
    clients: CLIENTS,
    jwks: { keys: [key] },
    // skilld's scopes are its resource server's, not the provider's own:
    // a client asking for more than it may have gets what it may have
    // (`getResourceServerInfo`), as it would from most identity providers.
    scopes: ['openid'],
    cookies: { keys: ['skilld-oidc-test-cookie-key'] },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      introspection: { enabled: false },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => undefined,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, indicator, oidcClient) => {
          if (!isLoopbackResource(indicator)) {
            throw new Provider.errors.InvalidTarget();
          }
          const allowed = new Set(GRANTS[oidcClient.clientId].split(' '));
          return {
            scope: SKILLD_SCOPES.filter((s) => allowed.has(s)).join(' '),
            audience: indicator,
            accessTokenTTL: oidcClient.clientId === 'brief' ? 1 : 600,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
  });
  return provider;
}

const counts = { discovery: 0, jwks: 0, token: 0 };
let provider;
let handler;

const server = http.createServer((req, res) => {
  const path = (req.url || '').split('?')[0];
  if (path === '/test/stats') {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(counts));
    return;
  }
  if (path === '/test/rotate' && req.method === 'POST') {
    const key = newKey();
    provider = makeProvider(issuer, key);
    handler = provider.callback();
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ kid: key.kid }));
    return;
  }
  if (path === '/.well-known/openid-configuration') counts.discovery += 1;
  if (path === '/jwks') counts.jwks += 1;
  if (path === '/token') counts.token += 1;
  handler(req, res);
});

let issuer;
server.listen(Number(process.env.OIDC_PORT || 0), '127.0.0.1', () => {
  issuer = `http://127.0.0.1:${server.address().port}`;
  provider = makeProvider(issuer, newKey());
  handler = provider.callback();
  process.stdout.write(`issuer ${issuer}\n`);
});

// The test that started it ends it by closing its stdin (or killing it).
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
