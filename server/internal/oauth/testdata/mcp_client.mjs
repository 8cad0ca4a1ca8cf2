// The official MCP TypeScript client signing in to Pier with OAuth, as an
// MCP host would: its auth provider discovers the metadata from the 401,
// registers, and sends the person to the authorization URL. The person's
// part (sign in with a one-time link, allow) is played here with fetch and
// a cookie; then the client finishes the sign-in and calls a tool.
//
//   PIER_MCP_URL=… PIER_SIGNIN_URL=… PIER_TOOLS=…/tools node mcp_client.mjs
import { join } from 'node:path';

const sdk = join(process.env.PIER_TOOLS, 'node_modules', '@modelcontextprotocol', 'sdk', 'dist', 'esm');
const { Client } = await import(join(sdk, 'client', 'index.js'));
const { StreamableHTTPClientTransport } = await import(join(sdk, 'client', 'streamableHttp.js'));

const mcpURL = new URL(process.env.PIER_MCP_URL);
const callback = 'http://127.0.0.1:9/callback';

const saved = {};
const provider = {
  get redirectUrl() { return callback; },
  get clientMetadata() {
    return { client_name: 'TypeScript Host', redirect_uris: [callback], grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'], token_endpoint_auth_method: 'none' };
  },
  clientInformation() { return saved.info; },
  saveClientInformation(i) { saved.info = i; },
  tokens() { return saved.tokens; },
  saveTokens(t) { saved.tokens = t; },
  redirectToAuthorization(u) { saved.authURL = u; },
  saveCodeVerifier(v) { saved.verifier = v; },
  codeVerifier() { return saved.verifier; },
};

function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

// The person: sign in, open the authorization URL, allow what is ticked.
async function consent(authURL) {
  // The link opens a confirm page; its button spends the link.
  const link = process.env.PIER_SIGNIN_URL;
  const confirm = await fetch(link, { redirect: 'manual' });
  const formCookie = confirm.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
  const token = (await confirm.text()).match(/name="csrf" value="([^"]+)"/)[1];
  const signin = await fetch(link, { method: 'POST', redirect: 'manual', body: new URLSearchParams({ csrf: token }),
    headers: { cookie: formCookie, origin: new URL(link).origin, 'content-type': 'application/x-www-form-urlencoded' } });
  check(signin.status === 303, `sign-in answered ${signin.status}`);
  const cookie = signin.headers.getSetCookie().map((c) => c.split(';')[0]).filter((c) => c.split('=')[1] !== '').join('; ');
  const parked = await fetch(authURL, { redirect: 'manual' });
  check(parked.status === 303, `authorize answered ${parked.status}`);
  const page = new URL(parked.headers.get('location'), authURL);
  const html = await (await fetch(page, { headers: { cookie } })).text();
  check(html.includes('Allow TypeScript Host?'), 'not the consent page');
  const csrf = html.match(/name="csrf" value="([^"]+)"/)[1];
  const form = new URLSearchParams({ csrf, decision: 'approve' });
  for (const m of html.matchAll(/name="(scope_[a-z_]+)" value="1" checked/g)) form.set(m[1], '1');
  const decided = await fetch(page, { method: 'POST', redirect: 'manual', body: form,
    headers: { cookie, origin: page.origin, 'content-type': 'application/x-www-form-urlencoded' } });
  check(decided.status === 303, `decision answered ${decided.status}`);
  return new URL(decided.headers.get('location'));
}

const out = {};
let transport = new StreamableHTTPClientTransport(mcpURL, { authProvider: provider });
let client = new Client({ name: 'pier-oauth-test', version: '1.0.0' });
await client.connect(transport);
try {
  await client.callTool({ name: 'list_projects', arguments: {} });
  throw new Error('a governed tool answered without credentials');
} catch (err) {
  check(err.constructor.name === 'UnauthorizedError', `want UnauthorizedError, got ${err}`);
}
check(saved.authURL, 'the client was not sent to sign in');
out.authURL = saved.authURL.href;
out.clientId = saved.info.client_id;
const back = await consent(saved.authURL);
out.state = back.searchParams.get('state');
await transport.finishAuth(back.searchParams.get('code'));
out.scope = saved.tokens.scope;
await client.close();

transport = new StreamableHTTPClientTransport(mcpURL, { authProvider: provider });
client = new Client({ name: 'pier-oauth-test', version: '1.0.0' });
await client.connect(transport);
out.listProjects = await client.callTool({ name: 'list_projects', arguments: {} });
await client.close();
process.stdout.write(JSON.stringify(out) + '\n');
