#!/usr/bin/env node
// sandbox-holder.mjs: the holder's side of the Pier sandbox.
//
//   node sandbox-holder.mjs keygen  --key FILE [--json]
//   node sandbox-holder.mjs mandate --base-url URL --session ID --registration-secret SECRET --key FILE [--issuer-kid KID] [--no-post] [--json]
//   node sandbox-holder.mjs decide  --base-url URL --session ID --key FILE (--gate JSON | --gate-file FILE) [--deny] [--no-post] [--json]
//
// It does what the Go package holder does, in the format of
// docs/sandbox-proof.md: it keeps a P-256 key in a 0600 JWK file, signs the
// 100 USD fake-money mandate and gate decisions as ES256 compact JWS carrying
// the public key in the jwk header, and posts them with the session id (and,
// for the mandate, the registration secret that the session's creator
// handed over, which binds the holder to that creator's session).
// It never sends an Authorization header: a holder acts on its own key, never
// with agent authority.
//
// --base-url defaults to $PIER_BASE_URL and --registration-secret to
// $PIER_SANDBOX_REGISTRATION_SECRET. Exit status: 0 done, 1 refused or
// failed, 2 usage error. Needs Node 20 or later and no packages.

import { open, readFile, stat } from 'node:fs/promises';

const subtle = globalThis.crypto.subtle;
const TYP_MANDATE = 'pier-mandate+jwt';
const TYP_DECISION = 'pier-gate-decision+jwt';
const ISSUER_JWKS_PATH = '/reference/sandbox/issuer-jwks.json';
const MANDATE_LIFETIME_SECONDS = 3600;
const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256' };

class UsageError extends Error {}

const utf8 = new TextEncoder();
const b64url = (bytes) => Buffer.from(bytes).toString('base64url');
const jsonB64 = (v) => b64url(utf8.encode(JSON.stringify(v)));

async function sha256(bytes) {
  return new Uint8Array(await subtle.digest('SHA-256', bytes));
}

async function thumbprint(jwk) {
  const canonical = `{"crv":"P-256","kty":"EC","x":"${jwk.x}","y":"${jwk.y}"}`;
  return b64url(await sha256(utf8.encode(canonical)));
}

// ---------- keys ----------

async function keygen(path) {
  const pair = await subtle.generateKey(ALGORITHM, true, ['sign', 'verify']);
  const { kty, crv, x, y, d } = await subtle.exportKey('jwk', pair.privateKey);
  const file = { kty, crv, x, y, d, kid: await thumbprint({ x, y }), alg: 'ES256', use: 'sig' };
  // "wx": never replace a key, since that would lose control of its mandates.
  const handle = await open(path, 'wx', 0o600);
  try {
    await handle.writeFile(`${JSON.stringify(file, null, 2)}\n`);
  } finally {
    await handle.close();
  }
  return { key: path, thumbprint: file.kid };
}

async function loadKey(path) {
  const info = await stat(path);
  if (!info.isFile()) throw new Error(`${path} is not a regular file`);
  // A key others can read may already be in someone else's hands.
  if ((info.mode & 0o077) !== 0) {
    throw new Error(`key file ${path} is readable by group or others (mode ${(info.mode & 0o777).toString(8)}); chmod 600 it`);
  }
  let f;
  try {
    f = JSON.parse(await readFile(path, 'utf8'));
  } catch (err) {
    throw new Error(`key file ${path}: ${err.message}`);
  }
  if (f?.kty !== 'EC' || f.crv !== 'P-256' || typeof f.d !== 'string') {
    throw new Error(`key file ${path} is not a private P-256 JWK`);
  }
  const privateKey = await subtle.importKey('jwk', { kty: 'EC', crv: 'P-256', x: f.x, y: f.y, d: f.d, ext: true }, ALGORITHM, false, ['sign']);
  const jwk = { kty: 'EC', crv: 'P-256', x: f.x, y: f.y };
  const thumb = await thumbprint(jwk);
  if (f.kid !== undefined && f.kid !== thumb) throw new Error(`key file ${path}: kid does not match the key`);
  return { privateKey, jwk, thumbprint: thumb };
}

// ---------- signing ----------

async function sign(key, typ, claims) {
  const input = `${jsonB64({ alg: 'ES256', typ, jwk: key.jwk })}.${jsonB64(claims)}`;
  // WebCrypto's ECDSA signature is already JWS's 64-byte R||S.
  const sig = new Uint8Array(await subtle.sign({ name: 'ECDSA', hash: 'SHA-256' }, key.privateKey, utf8.encode(input)));
  return `${input}.${b64url(sig)}`;
}

function signMandate(key, sessionId, issuerKid, now = Date.now()) {
  const iat = Math.floor(now / 1000);
  return sign(key, TYP_MANDATE, {
    kind: 'open',
    amountUsd: 100,
    currency: 'USD',
    fake: true,
    sessionId,
    aud: issuerKid,
    iat,
    exp: iat + MANDATE_LIFETIME_SECONDS,
    nonce: b64url(globalThis.crypto.getRandomValues(new Uint8Array(16))),
  });
}

function signDecision(key, sessionId, gate, outcome) {
  // The gate offers one outcome to approve; approving anything else would
  // sign something the sandbox never asked for.
  if (outcome === 'approved' && gate.outcome !== 'approved') {
    throw new Error(`gate offers outcome ${JSON.stringify(gate.outcome)}, not "approved"`);
  }
  return sign(key, TYP_DECISION, {
    sessionId,
    gateId: gate.id,
    requestDigest: gate.requestDigest,
    nonce: gate.nonce,
    outcome,
    expiresAt: gate.expiresAt,
  });
}

// readGate accepts the gate itself, {gate}, or a whole attempt response
// ({data: {gate}}), so a holder can paste whatever the agent handed over.
function readGate(text) {
  let v;
  try {
    v = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`gate is not JSON: ${err.message}`);
  }
  const gate = v?.data?.gate ?? v?.gate ?? v;
  for (const name of ['id', 'requestDigest', 'nonce', 'outcome', 'expiresAt']) {
    if (typeof gate?.[name] !== 'string' || gate[name] === '') throw new UsageError(`gate has no "${name}"`);
  }
  return gate;
}

// ---------- HTTP ----------

async function request(method, url, body, idempotencyKey) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (idempotencyKey) headers['Idempotency-Key'] = idempotencyKey;
  let res;
  try {
    res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), redirect: 'error' });
  } catch (err) {
    throw new Error(`${method} ${url}: ${err.cause?.message ?? err.message}`);
  }
  const text = await res.text();
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = text;
  }
  return { status: res.status, body: parsed };
}

async function fetchIssuerKid(baseUrl) {
  const res = await request('GET', baseUrl + ISSUER_JWKS_PATH);
  if (res.status !== 200) throw new Error(`GET ${ISSUER_JWKS_PATH} answered ${res.status}`);
  // The first key is the one new mandates must name.
  const key = res.body?.keys?.[0];
  if (typeof key?.kid !== 'string' || key.kid === '' || key.kty !== 'EC' || key.crv !== 'P-256' || 'd' in key) {
    throw new Error('the issuer JWKS has no public P-256 key with a kid first');
  }
  return key.kid;
}

// Both holder posts carry the JWS's digest as Idempotency-Key: a retry of
// the same signature is the same request.
async function post(baseUrl, path, body, jws) {
  const key = Buffer.from(await sha256(utf8.encode(jws))).toString('hex');
  const res = await request('POST', baseUrl + path, body, key);
  if (res.status < 200 || res.status > 299) {
    const why = typeof res.body === 'object' && res.body?.blockedBy ? ` (${res.body.blockedBy}: ${res.body.message})` : '';
    const err = new Error(`POST ${path} answered ${res.status}${why}`);
    err.response = res;
    throw err;
  }
  return res;
}

// ---------- command line ----------

const USAGE = `usage:
  node sandbox-holder.mjs keygen  --key FILE [--json]
  node sandbox-holder.mjs mandate --base-url URL --session ID --registration-secret SECRET --key FILE [--issuer-kid KID] [--no-post] [--json]
  node sandbox-holder.mjs decide  --base-url URL --session ID --key FILE (--gate JSON | --gate-file FILE) [--deny] [--no-post] [--json]`;

const FLAGS = {
  '--key': 'key', '--base-url': 'baseUrl', '--session': 'session', '--issuer-kid': 'issuerKid',
  '--registration-secret': 'registration',
  '--gate': 'gate', '--gate-file': 'gateFile',
};
const SWITCHES = { '--json': 'json', '--no-post': 'noPost', '--deny': 'deny', '--help': 'help', '-h': 'help' };

function parseArgs(argv) {
  const [command, ...rest] = argv[0]?.startsWith('-') ? [undefined, ...argv] : argv;
  const opts = { command };
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i];
    const eq = arg.startsWith('--') ? arg.indexOf('=') : -1;
    const name = eq > 0 ? arg.slice(0, eq) : arg;
    if (SWITCHES[name]) {
      opts[SWITCHES[name]] = true;
    } else if (FLAGS[name]) {
      if (eq > 0) opts[FLAGS[name]] = arg.slice(eq + 1);
      else if (i + 1 < rest.length) opts[FLAGS[name]] = rest[++i];
      else throw new UsageError(`${name} needs a value`);
    } else {
      throw new UsageError(`unknown argument ${arg}`);
    }
  }
  opts.baseUrl = (opts.baseUrl ?? process.env.PIER_BASE_URL ?? '').replace(/\/+$/, '');
  return opts;
}

function need(opts, ...names) {
  for (const name of names) {
    if (!opts[name]) {
      const flag = Object.keys(FLAGS).find((f) => FLAGS[f] === name);
      throw new UsageError(`${opts.command} needs ${flag}`);
    }
  }
}

async function run(opts) {
  switch (opts.command) {
    case 'keygen': {
      need(opts, 'key');
      const out = await keygen(opts.key);
      return { out, text: `wrote ${out.key}\nholder key thumbprint ${out.thumbprint}` };
    }
    case 'mandate': {
      need(opts, 'key', 'session');
      if (!opts.baseUrl && !(opts.noPost && opts.issuerKid)) need(opts, 'baseUrl');
      const key = await loadKey(opts.key);
      const issuerKid = opts.issuerKid ?? (await fetchIssuerKid(opts.baseUrl));
      const mandate = await signMandate(key, opts.session, issuerKid);
      const out = { mandate, thumbprint: key.thumbprint, issuerKid };
      if (!opts.noPost) {
        const registrationSecret = opts.registration ?? process.env.PIER_SANDBOX_REGISTRATION_SECRET;
        if (!registrationSecret) throw new UsageError('mandate needs --registration-secret: ask whoever created the session for its registrationSecret');
        const path = `/v1/sandbox/sessions/${encodeURIComponent(opts.session)}/mandate`;
        out.response = (await post(opts.baseUrl, path, { mandate, registrationSecret }, mandate)).body;
      }
      return { out, text: opts.noPost ? mandate : `mandate registered for session ${opts.session}\n${mandate}` };
    }
    case 'decide': {
      need(opts, 'key', 'session');
      if (!opts.noPost) need(opts, 'baseUrl');
      if (!opts.gate === !opts.gateFile) throw new UsageError('decide needs exactly one of --gate and --gate-file');
      const gate = readGate(opts.gate ?? (await readFile(opts.gateFile === '-' ? '/dev/stdin' : opts.gateFile, 'utf8')));
      const key = await loadKey(opts.key);
      const outcome = opts.deny ? 'denied' : 'approved';
      const decision = await signDecision(key, opts.session, gate, outcome);
      const out = { decision, gateId: gate.id, outcome, thumbprint: key.thumbprint };
      if (!opts.noPost) {
        const path = `/v1/sandbox/sessions/${encodeURIComponent(opts.session)}/gates/${encodeURIComponent(gate.id)}/decision`;
        out.response = (await post(opts.baseUrl, path, { decision }, decision)).body;
      }
      return { out, text: opts.noPost ? decision : `gate ${gate.id} ${outcome}\n${decision}` };
    }
    default:
      throw new UsageError(opts.command ? `unknown command ${opts.command}` : 'no command');
  }
}

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
    if (opts.help) {
      process.stdout.write(`${USAGE}\n`);
      return 0;
    }
    const { out, text } = await run(opts);
    process.stdout.write(opts.json ? `${JSON.stringify(out, null, 2)}\n` : `${text}\n`);
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`${err.message}\n${USAGE}\n`);
      return 2;
    }
    if (opts?.json && err.response) process.stdout.write(`${JSON.stringify({ error: err.message, response: err.response.body }, null, 2)}\n`);
    process.stderr.write(`sandbox-holder: ${err.message}\n`);
    return 1;
  }
}

process.exitCode = await main();
