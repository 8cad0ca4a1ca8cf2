#!/usr/bin/env node
// verify-sandbox-proof.mjs: checks a published Pier sandbox proof.
//
//   node verify-sandbox-proof.mjs --base-url URL [--api-url URL] [--tamper-check] [--json]
//
// It follows docs/sandbox-proof.md §6 check by check, in the same order and
// with the same check ids as the Go verifier (package verifier), and stops at
// the first failure. Exit status: 0 accept, 1 reject, 2 usage error.
//
// It needs Node 20 or later and nothing else: WebCrypto for the signatures,
// fetch for the downloads, no packages.

const subtle = globalThis.crypto.subtle;

const PATHS = {
  manifest: '/.well-known/sandbox-reference.json',
  proof: '/reference/sandbox/proof.json',
  proofJwks: '/reference/sandbox/proof-jwks.json',
  issuerJwks: '/reference/sandbox/issuer-jwks.json',
  provenance: '/reference/sandbox/provenance.json',
  verifier: '/verify-sandbox-proof.mjs',
  holderCli: '/sandbox-holder.mjs',
};
const MAX_DOWNLOAD = 4 << 20;

const TYP = {
  mandate: 'pier-mandate+jwt',
  decision: 'pier-gate-decision+jwt',
  receipt: 'pier-receipt+jwt',
  proof: 'pier-sandbox-proof',
};

const PROOF_ID = /^sbp_[A-Za-z0-9_-]{20,32}$/;
const ID = /^[A-Za-z0-9_-]{1,128}$/;
const NONCE = /^[A-Za-z0-9_-]{16,128}$/;
const HEX = /^[0-9a-f]{64}$/;
const TIMESTAMP = /^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$/;
const AMOUNT = /^[0-9]+(\.[0-9]{1,2})?$/;
const B64URL = /^[A-Za-z0-9_-]*$/;

// ---------- report ----------

class Report {
  constructor() {
    this.verdict = 'reject';
    this.proofId = undefined;
    this.checks = [];
  }
  pass(id, detail) {
    this.checks.push({ id, ok: true, detail });
    return true;
  }
  fail(id, detail) {
    this.checks.push({ id, ok: false, detail });
    return false;
  }
  failed() {
    return this.checks.find((c) => !c.ok);
  }
  finish() {
    this.verdict = this.failed() ? 'reject' : 'accept';
    return this;
  }
}

// step runs one check: fn throws to fail it, or returns a value; okDetail
// turns that value into the report's detail.
async function step(report, id, fn, okDetail) {
  let value;
  try {
    value = await fn();
  } catch (err) {
    report.fail(id, err instanceof Error ? err.message : String(err));
    return { ok: false };
  }
  report.pass(id, typeof okDetail === 'function' ? okDetail(value) : okDetail);
  return { ok: true, value };
}

// ---------- bytes, base64url, JSON ----------

const utf8 = new TextEncoder();
// Not fatal, and keeping a BOM: Go's decoder replaces invalid UTF-8 and
// refuses a BOM, so this makes both verifiers read the same text.
const utf8Decoder = new TextDecoder('utf-8', { ignoreBOM: true });

function b64urlEncode(bytes) {
  return Buffer.from(bytes).toString('base64url');
}

// Only canonical unpadded base64url is accepted: one spelling per signature
// input, whichever way an implementation re-encodes.
function b64urlDecode(s) {
  if (typeof s !== 'string' || !B64URL.test(s)) throw new Error('not base64url');
  const bytes = Buffer.from(s, 'base64url');
  if (bytes.toString('base64url') !== s) throw new Error('base64url is not canonical');
  return new Uint8Array(bytes);
}

async function sha256(bytes) {
  return new Uint8Array(await subtle.digest('SHA-256', bytes));
}

async function sha256Hex(bytes) {
  return Buffer.from(await sha256(bytes)).toString('hex');
}

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function parseObject(bytes) {
  let v;
  try {
    // Go refuses numbers beyond float64; JSON.parse would make them Infinity.
    v = JSON.parse(utf8Decoder.decode(bytes), (_, x) => {
      if (typeof x === 'number' && !Number.isFinite(x)) throw new Error('number out of range');
      return x;
    });
  } catch (err) {
    throw new Error(`not JSON: ${err.message}`);
  }
  if (!isObject(v)) throw new Error('not a JSON object');
  return v;
}

function jsonText(v) {
  return v === undefined ? 'null' : JSON.stringify(v);
}

// Objects must have exactly the members the format names: an unread member
// is an unchecked claim.
function exactly(m, required, optional = []) {
  for (const name of required) {
    if (!Object.hasOwn(m, name)) throw new Error(`missing member "${name}"`);
  }
  const known = new Set([...required, ...optional]);
  for (const name of Object.keys(m).sort()) {
    if (!known.has(name)) throw new Error(`unknown member "${name}"`);
  }
}

function getString(m, name) {
  if (typeof m[name] !== 'string') throw new Error(`"${name}" must be a string`);
  return m[name];
}

function getMatch(m, name, re) {
  const s = getString(m, name);
  if (!re.test(s)) throw new Error(`"${name}" is ${JSON.stringify(s)}, which does not match ${re.source}`);
  return s;
}

function getConst(m, name, want) {
  if (m[name] !== want) throw new Error(`"${name}" must be ${JSON.stringify(want)}`);
}

function getNumericDate(m, name) {
  const v = m[name];
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 2 ** 53) {
    throw new Error(`"${name}" must be integer seconds`);
  }
  return v;
}

function getTimestamp(m, name) {
  const s = getMatch(m, name, TIMESTAMP);
  const t = new Date(s);
  if (Number.isNaN(t.getTime()) || t.toISOString() !== s.replace('Z', '.000Z')) {
    throw new Error(`"${name}" is ${JSON.stringify(s)}, which is not a real instant`);
  }
  return s;
}

// Amounts: a number in (0, 100] with at most two fractional digits in its
// shortest round-trip form; cents come from that text, never from float maths.
function getAmount(m, name) {
  const v = m[name];
  if (typeof v !== 'number') throw new Error(`"${name}" must be a number`);
  const text = String(v);
  if (!(v > 0 && v <= 100) || !AMOUNT.test(text)) {
    throw new Error(`"${name}" is ${text}, not whole cents in (0, 100]`);
  }
  const [whole, frac = ''] = text.split('.');
  return { value: v, text, cents: Number(whole) * 100 + Number((frac + '00').slice(0, 2)) };
}

function jsonEqual(a, b) {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => jsonEqual(x, b[i]));
  }
  if (!isObject(a) || !isObject(b)) return false;
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && jsonEqual(a[k], b[k]));
}

// ---------- keys and JWS ----------

async function ecPublicKey(k) {
  if (k.kty !== 'EC' || k.crv !== 'P-256') throw new Error('must be kty EC, crv P-256');
  for (const name of ['x', 'y']) {
    if (typeof k[name] !== 'string') throw new Error(`${name} must be a string`);
    let c;
    try {
      c = b64urlDecode(k[name]);
    } catch {
      c = null;
    }
    if (!c || c.length !== 32) throw new Error(`${name} must be 32 bytes of canonical base64url`);
  }
  let cryptoKey;
  try {
    // importKey refuses points that are not on the curve.
    cryptoKey = await subtle.importKey(
      'jwk',
      { kty: 'EC', crv: 'P-256', x: k.x, y: k.y, ext: true },
      { name: 'ECDSA', namedCurve: 'P-256' },
      false,
      ['verify'],
    );
  } catch {
    throw new Error('x, y is not a point on P-256');
  }
  return { cryptoKey, x: k.x, y: k.y };
}

async function thumbprint(key) {
  const canonical = `{"crv":"P-256","kty":"EC","x":"${key.x}","y":"${key.y}"}`;
  return b64urlEncode(await sha256(utf8.encode(canonical)));
}

async function parseJwks(bytes) {
  const doc = parseObject(bytes);
  exactly(doc, ['keys']);
  if (!Array.isArray(doc.keys) || doc.keys.length === 0) throw new Error('"keys" must be a non-empty array');
  const keys = new Map();
  for (const [i, k] of doc.keys.entries()) {
    if (!isObject(k)) throw new Error(`key ${i} is not an object`);
    if (Object.hasOwn(k, 'd')) throw new Error(`key ${i} carries private key material (d)`);
    try {
      exactly(k, ['kty', 'crv', 'x', 'y', 'kid'], ['alg', 'use']);
    } catch (err) {
      throw new Error(`key ${i}: ${err.message}`);
    }
    if (typeof k.kid !== 'string' || k.kid === '') throw new Error(`key ${i}: kid must be a non-empty string`);
    if (keys.has(k.kid)) throw new Error(`kid "${k.kid}" appears twice`);
    if (Object.hasOwn(k, 'alg') && k.alg !== 'ES256') throw new Error(`key "${k.kid}": alg must be ES256`);
    if (Object.hasOwn(k, 'use') && k.use !== 'sig') throw new Error(`key "${k.kid}": use must be sig`);
    try {
      keys.set(k.kid, await ecPublicKey(k));
    } catch (err) {
      throw new Error(`key "${k.kid}": ${err.message}`);
    }
  }
  return keys;
}

function byKid(keys, setName) {
  return async (header) => {
    const kid = typeof header.kid === 'string' ? header.kid : '';
    if (!keys.has(kid)) throw new Error(`unknown kid "${kid}": not in the ${setName}`);
    return keys.get(kid);
  };
}

async function byEmbeddedJwk(header) {
  if (!isObject(header.jwk)) throw new Error('header "jwk" must be an object');
  try {
    exactly(header.jwk, ['kty', 'crv', 'x', 'y']);
    return await ecPublicKey(header.jwk);
  } catch (err) {
    throw new Error(`header jwk: ${err.message}`);
  }
}

async function verifyParts(protectedB64, payloadB64, signatureB64, typ, keyMember, pick) {
  let rawHeader, rawPayload, sig;
  try {
    rawHeader = b64urlDecode(protectedB64);
  } catch (err) {
    throw new Error(`protected header: ${err.message}`);
  }
  try {
    rawPayload = b64urlDecode(payloadB64);
  } catch {
    rawPayload = new Uint8Array();
  }
  if (rawPayload.length === 0) throw new Error('payload: must be non-empty canonical base64url');
  try {
    sig = b64urlDecode(signatureB64);
  } catch (err) {
    throw new Error(`signature: ${err.message}`);
  }
  let header;
  try {
    header = parseObject(rawHeader);
  } catch (err) {
    throw new Error(`protected header: ${err.message}`);
  }
  // Checked first and by value: "none", HS256 and every other algorithm
  // are refused before any key is chosen.
  if (header.alg !== 'ES256') throw new Error(`alg ${jsonText(header.alg)} is refused: only ES256 is allowed`);
  try {
    exactly(header, ['alg', 'typ', keyMember]);
  } catch (err) {
    throw new Error(`protected header: ${err.message}`);
  }
  if (header.typ !== typ) throw new Error(`typ ${jsonText(header.typ)}, want "${typ}"`);
  if (sig.length !== 64) throw new Error(`ES256 signature must be 64 bytes (R||S), got ${sig.length}`);
  const key = await pick(header);
  const input = utf8.encode(`${protectedB64}.${payloadB64}`);
  const ok = await subtle.verify({ name: 'ECDSA', hash: 'SHA-256' }, key.cryptoKey, sig, input);
  if (!ok) throw new Error('signature does not verify');
  return { header, payload: rawPayload, key };
}

async function verifyCompact(compact, typ, keyMember, pick) {
  const parts = typeof compact === 'string' ? compact.split('.') : [];
  if (parts.length !== 3) throw new Error('not a compact JWS (three dot-separated parts)');
  return verifyParts(parts[0], parts[1], parts[2], typ, keyMember, pick);
}

async function verifyFlattened(bytes, typ, pick) {
  const obj = parseObject(bytes);
  try {
    exactly(obj, ['protected', 'payload', 'signature']);
  } catch (err) {
    throw new Error(`flattened JWS: ${err.message}`);
  }
  const parts = ['protected', 'payload', 'signature'].map((n) => getString(obj, n));
  return verifyParts(parts[0], parts[1], parts[2], typ, 'kid', pick);
}

// ---------- SPEC §4 rule 3: checks 1 to 10 ----------

function manifestHash(m, field) {
  let has = Object.hasOwn(m, field);
  let v = m[field];
  if (!has && field === 'holderCliSha256' && isObject(m.verification)) {
    has = Object.hasOwn(m.verification, field);
    v = m.verification[field];
  }
  if (!has || typeof v !== 'string' || !HEX.test(v)) {
    throw new Error(`manifest ${field} must be 64 lowercase hex characters`);
  }
  return v;
}

async function checkRelease(report, src) {
  const manifestStep = await step(report, 'manifest', async () => parseObject(await src.file(PATHS.manifest)), `downloaded ${PATHS.manifest}`);
  if (!manifestStep.ok) return null;
  const manifest = manifestStep.value;

  const state = await step(report, 'manifest.state', () => {
    if (manifest.state !== 'available') throw new Error(`state is ${jsonText(manifest.state)}, not "available"`);
  }, 'available');
  if (!state.ok) return null;

  const idStep = await step(report, 'manifest.proofId', () => getMatch(manifest, 'proofId', PROOF_ID), (id) => id);
  if (!idStep.ok) return null;
  const proofId = idStep.value;
  report.proofId = proofId;

  const files = [
    ['hash.proof', 'artifactSha256', PATHS.proof],
    ['hash.proofJwks', 'proofJwksSha256', PATHS.proofJwks],
    ['hash.issuerJwks', 'issuerJwksSha256', PATHS.issuerJwks],
    ['hash.provenance', 'provenanceSha256', PATHS.provenance],
    ['hash.verifier', 'verifierSha256', PATHS.verifier],
    ['hash.holderCli', 'holderCliSha256', PATHS.holderCli],
  ];
  const got = {};
  for (const [id, field, path] of files) {
    const s = await step(report, id, async () => {
      const want = manifestHash(manifest, field);
      const bytes = await src.file(path);
      const digest = await sha256Hex(bytes);
      if (digest !== want) throw new Error(`${path} has sha256 ${digest} but the manifest says ${want}`);
      return { bytes, digest };
    }, (v) => `${path} sha256 ${v.digest}`);
    if (!s.ok) return null;
    got[path] = s.value.bytes;
  }

  // The API may format its response differently; it must say the same thing.
  const api = await step(report, 'api.proof', async () => {
    let env;
    try {
      env = parseObject(await src.apiProof(proofId));
    } catch (err) {
      throw new Error(err.message.startsWith('GET ') ? err.message : `API response: ${err.message}`);
    }
    if (!isObject(env.data)) throw new Error('API response has no "data" object');
    let artifact;
    try {
      artifact = parseObject(got[PATHS.proof]);
    } catch (err) {
      throw new Error(`${PATHS.proof}: ${err.message}`);
    }
    if (!jsonEqual(env.data, artifact)) throw new Error(`the API proof differs from ${PATHS.proof}`);
  }, `the API proof equals ${PATHS.proof}`);
  if (!api.ok) return null;

  return {
    proofId,
    proof: got[PATHS.proof],
    proofJwks: got[PATHS.proofJwks],
    issuerJwks: got[PATHS.issuerJwks],
    provenance: got[PATHS.provenance],
  };
}

// ---------- signatures: checks 11 to 27 ----------

function checkProvenance(bytes, proofId) {
  const doc = parseObject(bytes);
  exactly(doc, ['version', 'kind', 'proofId', 'observedAt', 'build']);
  getConst(doc, 'version', 'v1');
  getConst(doc, 'kind', 'unsigned-observation');
  if (doc.proofId !== proofId) throw new Error(`provenance names proof ${jsonText(doc.proofId)}, not ${proofId}`);
  getTimestamp(doc, 'observedAt');
  if (!isObject(doc.build)) throw new Error('"build" must be an object');
}

function parseAttempt(m) {
  if (!isObject(m)) throw new Error('not an object');
  exactly(m, ['attemptId', 'scenario', 'amountUsd', 'currency', 'requestDigest', 'outcome', 'receipt']);
  const a = { attemptId: getMatch(m, 'attemptId', ID), scenario: m.scenario, outcome: m.outcome };
  if (!(a.scenario === 'allowed' && a.outcome === 'charged') && !(a.scenario === 'approval' && a.outcome === 'gated')) {
    throw new Error(`scenario ${jsonText(m.scenario)} with outcome ${jsonText(m.outcome)}: want allowed/charged or approval/gated`);
  }
  a.amount = getAmount(m, 'amountUsd');
  getConst(m, 'currency', 'USD');
  a.requestDigest = getMatch(m, 'requestDigest', HEX);
  a.receipt = getString(m, 'receipt');
  return a;
}

function parseGate(m) {
  if (!isObject(m)) throw new Error('not an object');
  exactly(m, ['id', 'attemptId', 'requestDigest', 'nonce', 'outcome', 'expiresAt', 'decision', 'decidedAt', 'decidedOutcome']);
  const g = {
    id: getMatch(m, 'id', ID),
    attemptId: getMatch(m, 'attemptId', ID),
    requestDigest: getMatch(m, 'requestDigest', HEX),
    nonce: getMatch(m, 'nonce', NONCE),
  };
  getConst(m, 'outcome', 'approved');
  g.expiresAt = getTimestamp(m, 'expiresAt');
  g.decision = getString(m, 'decision');
  g.decidedAt = getTimestamp(m, 'decidedAt');
  g.decidedOutcome = m.decidedOutcome;
  if (g.decidedOutcome !== 'approved' && g.decidedOutcome !== 'denied') {
    throw new Error('"decidedOutcome" must be "approved" or "denied"');
  }
  return g;
}

function parseProofPayload(bytes, proofId) {
  const doc = parseObject(bytes);
  exactly(doc, ['version', 'proofId', 'sessionId', 'issuedAt', 'mandate', 'attempts', 'gates']);
  getConst(doc, 'version', 'v1');
  const p = { proofId: getMatch(doc, 'proofId', PROOF_ID) };
  if (p.proofId !== proofId) throw new Error(`the proof is ${p.proofId} but the manifest names ${proofId}`);
  p.sessionId = getMatch(doc, 'sessionId', ID);
  p.issuedAt = getTimestamp(doc, 'issuedAt');
  p.mandate = getString(doc, 'mandate');
  if (!Array.isArray(doc.attempts) || doc.attempts.length < 1 || doc.attempts.length > 32) {
    throw new Error('"attempts" must be an array of 1 to 32 entries');
  }
  if (!Array.isArray(doc.gates) || doc.gates.length > 32) throw new Error('"gates" must be an array of at most 32 entries');
  p.attempts = [];
  const seen = new Set();
  for (const [i, v] of doc.attempts.entries()) {
    let a;
    try {
      a = parseAttempt(v);
    } catch (err) {
      throw new Error(`attempt ${i}: ${err.message}`);
    }
    if (seen.has(a.attemptId)) throw new Error(`attempt id ${a.attemptId} appears twice`);
    seen.add(a.attemptId);
    p.attempts.push(a);
  }
  p.gates = [];
  for (const [i, v] of doc.gates.entries()) {
    try {
      p.gates.push(parseGate(v));
    } catch (err) {
      throw new Error(`gate ${i}: ${err.message}`);
    }
  }
  return p;
}

function checkMandateClaims(bytes, p, issuerKeys) {
  const m = parseObject(bytes);
  exactly(m, ['kind', 'amountUsd', 'currency', 'fake', 'sessionId', 'aud', 'iat', 'exp', 'nonce']);
  getConst(m, 'kind', 'open');
  getConst(m, 'amountUsd', 100);
  getConst(m, 'currency', 'USD');
  getConst(m, 'fake', true);
  if (m.sessionId !== p.sessionId) throw new Error(`mandate names session ${jsonText(m.sessionId)}, the proof ${p.sessionId}`);
  const aud = getString(m, 'aud');
  if (!issuerKeys.has(aud)) throw new Error(`audience "${aud}" is not a kid in the issuer JWKS`);
  const iat = getNumericDate(m, 'iat');
  const exp = getNumericDate(m, 'exp');
  if (exp <= iat || exp - iat > 86400) throw new Error('exp must follow iat by at most 86400 seconds');
  getMatch(m, 'nonce', NONCE);
  return { aud, exp, cents: 100 * 100 };
}

// Every string in the digest matched a pattern that needs no JSON escaping,
// so concatenation is the canonical (RFC 8785) form.
async function checkRequestDigest(a, sessionId, mandateSha256) {
  const canonical =
    `{"amountUsd":${a.amount.text},"attemptId":"${a.attemptId}","currency":"USD",` +
    `"kind":"pier.sandbox.attempt.v1","mandateSha256":"${mandateSha256}",` +
    `"scenario":"${a.scenario}","sessionId":"${sessionId}"}`;
  const got = await sha256Hex(utf8.encode(canonical));
  if (got !== a.requestDigest) throw new Error(`requestDigest is ${a.requestDigest} but the attempt hashes to ${got}`);
}

function checkReceiptClaims(bytes, a, sessionId, mandate) {
  const m = parseObject(bytes);
  const required = ['sessionId', 'attemptId', 'scenario', 'amountUsd', 'currency', 'fake', 'requestDigest', 'outcome', 'iat'];
  if (a.outcome === 'gated') required.push('gateId');
  exactly(m, required);
  for (const [name, want] of [
    ['sessionId', sessionId], ['attemptId', a.attemptId], ['scenario', a.scenario],
    ['amountUsd', a.amount.value], ['currency', 'USD'], ['fake', true],
    ['requestDigest', a.requestDigest], ['outcome', a.outcome],
  ]) {
    if (m[name] !== want) throw new Error(`receipt ${name} is ${jsonText(m[name])}, the attempt says ${jsonText(want)}`);
  }
  if (a.outcome === 'gated') getMatch(m, 'gateId', ID);
  const iat = getNumericDate(m, 'iat');
  if (iat > mandate.exp) throw new Error(`receipt issued at ${iat}, after the mandate expired at ${mandate.exp}`);
  return m;
}

function checkGateAttempt(g, attempts, receipts) {
  const i = attempts.findIndex((a) => a.attemptId === g.attemptId);
  if (i < 0) throw new Error(`no attempt ${g.attemptId} in the proof`);
  const a = attempts[i];
  if (a.scenario !== 'approval') throw new Error(`attempt ${a.attemptId} is ${a.scenario}, not an approval`);
  if (a.requestDigest !== g.requestDigest) throw new Error(`gate digest ${g.requestDigest} differs from attempt digest ${a.requestDigest}`);
  if (receipts[i].gateId !== g.id) throw new Error(`the attempt's receipt names gate ${jsonText(receipts[i].gateId)}`);
}

function checkDecisionBinding(bytes, g, sessionId) {
  const m = parseObject(bytes);
  exactly(m, ['sessionId', 'gateId', 'requestDigest', 'nonce', 'outcome', 'expiresAt']);
  for (const [name, want] of [
    ['sessionId', sessionId], ['gateId', g.id], ['requestDigest', g.requestDigest],
    ['nonce', g.nonce], ['expiresAt', g.expiresAt],
  ]) {
    if (m[name] !== want) throw new Error(`decision ${name} is ${jsonText(m[name])}, the gate's is "${want}"`);
  }
  if (m.outcome !== 'approved' && m.outcome !== 'denied') {
    throw new Error(`decision outcome ${jsonText(m.outcome)} is neither "approved" nor "denied"`);
  }
  if (m.outcome !== g.decidedOutcome) throw new Error(`decision says ${jsonText(m.outcome)} but the proof records "${g.decidedOutcome}"`);
}

function checkGatesUnique(p) {
  const ids = new Set();
  const nonces = new Set();
  const decisions = new Set();
  const perAttempt = new Map();
  for (const g of p.gates) {
    if (ids.has(g.id)) throw new Error(`gate ${g.id} appears twice`);
    if (nonces.has(g.nonce)) throw new Error(`nonce ${g.nonce} is used by two gates`);
    if (decisions.has(g.decision)) throw new Error(`gate ${g.id} reuses another gate's decision`);
    ids.add(g.id);
    nonces.add(g.nonce);
    decisions.add(g.decision);
    perAttempt.set(g.attemptId, (perAttempt.get(g.attemptId) ?? 0) + 1);
  }
  for (const a of p.attempts) {
    const n = perAttempt.get(a.attemptId) ?? 0;
    if (a.scenario === 'approval' && n !== 1) throw new Error(`approval attempt ${a.attemptId} has ${n} gates, want 1`);
  }
}

function centsText(c) {
  return `${Math.floor(c / 100)}.${String(c % 100).padStart(2, '0')}`;
}

function checkSpend(p, mandate) {
  const approved = new Set(p.gates.filter((g) => g.decidedOutcome === 'approved').map((g) => g.attemptId));
  let spent = 0;
  for (const a of p.attempts) {
    if (a.outcome === 'charged' || approved.has(a.attemptId)) spent += a.amount.cents;
  }
  if (spent > mandate.cents) throw new Error(`${centsText(spent)} fake USD spent under a mandate of 100`);
  return spent;
}

function checkCoverage(p) {
  if (!p.attempts.some((a) => a.scenario === 'allowed') || p.gates.length === 0) {
    throw new Error('a proof needs an allowed attempt and a decided gate');
  }
}

async function checkSignatures(report, rel) {
  const proofKeys = await step(report, 'jwks.proof', () => parseJwks(rel.proofJwks), (k) => `${k.size} key(s): ${[...k.keys()].join(' ')}`);
  if (!proofKeys.ok) return false;
  const issuerKeys = await step(report, 'jwks.issuer', () => parseJwks(rel.issuerJwks), (k) => `${k.size} key(s): ${[...k.keys()].join(' ')}`);
  if (!issuerKeys.ok) return false;
  if (!(await step(report, 'provenance', () => checkProvenance(rel.provenance, rel.proofId), `an unsigned observation for ${rel.proofId}`)).ok) {
    return false;
  }

  const proof = await step(report, 'proof.signature', () => verifyFlattened(rel.proof, TYP.proof, byKid(proofKeys.value, 'proof JWKS')),
    (s) => `signed by proof key ${s.header.kid}`);
  if (!proof.ok) return false;
  const payload = await step(report, 'proof.payload', () => parseProofPayload(proof.value.payload, rel.proofId),
    (p) => `${p.attempts.length} attempt(s), ${p.gates.length} gate(s)`);
  if (!payload.ok) return false;
  const p = payload.value;

  const mandateSig = await step(report, 'mandate.signature', async () => {
    const s = await verifyCompact(p.mandate, TYP.mandate, 'jwk', byEmbeddedJwk);
    return { ...s, thumbprint: await thumbprint(s.key) };
  }, (s) => `signed by holder key ${s.thumbprint}`);
  if (!mandateSig.ok) return false;
  const claims = await step(report, 'mandate.claims', () => checkMandateClaims(mandateSig.value.payload, p, issuerKeys.value),
    (m) => `open mandate for 100 fake USD, audience ${m.aud}`);
  if (!claims.ok) return false;
  const mandate = { ...claims.value, thumbprint: mandateSig.value.thumbprint };

  const mandateSha256 = await sha256Hex(utf8.encode(p.mandate));
  const receipts = [];
  for (const [i, a] of p.attempts.entries()) {
    const label = `attempt ${i} (${a.attemptId}): `;
    const labelled = (fn) => async () => {
      try {
        return await fn();
      } catch (err) {
        throw new Error(label + err.message);
      }
    };
    if (!(await step(report, 'attempt.requestDigest', labelled(() => checkRequestDigest(a, p.sessionId, mandateSha256)), `${label}digest recomputed`)).ok) {
      return false;
    }
    const receipt = await step(report, 'receipt.signature', labelled(async () => {
      const s = await verifyCompact(a.receipt, TYP.receipt, 'kid', byKid(issuerKeys.value, 'issuer JWKS'));
      if (s.header.kid !== mandate.aud) {
        throw new Error(`receipt signed by issuer key ${jsonText(s.header.kid)} but the mandate's audience is "${mandate.aud}"`);
      }
      return s;
    }), `${label}signed by issuer key ${mandate.aud}`);
    if (!receipt.ok) return false;
    const rc = await step(report, 'receipt.claims', labelled(() => checkReceiptClaims(receipt.value.payload, a, p.sessionId, mandate)), `${label}${a.outcome}`);
    if (!rc.ok) return false;
    receipts.push(rc.value);
  }

  for (const [j, g] of p.gates.entries()) {
    const label = `gate ${j} (${g.id}): `;
    const labelled = (fn) => async () => {
      try {
        return await fn();
      } catch (err) {
        throw new Error(label + err.message);
      }
    };
    if (!(await step(report, 'gate.attempt', labelled(() => checkGateAttempt(g, p.attempts, receipts)), `${label}opened by attempt ${g.attemptId}`)).ok) {
      return false;
    }
    const decision = await step(report, 'gate.decision.signature', labelled(async () => {
      const s = await verifyCompact(g.decision, TYP.decision, 'jwk', byEmbeddedJwk);
      const t = await thumbprint(s.key);
      if (t !== mandate.thumbprint) throw new Error(`decision signed by holder key ${t}, not the mandate's ${mandate.thumbprint}`);
      return s;
    }), `${label}signed by the mandate's holder key`);
    if (!decision.ok) return false;
    if (!(await step(report, 'gate.decision.binding', labelled(() => checkDecisionBinding(decision.value.payload, g, p.sessionId)), `${label}${g.decidedOutcome}`)).ok) {
      return false;
    }
    // Same-format UTC timestamps order as strings.
    const expiry = await step(report, 'gate.expiry', labelled(() => {
      if (g.decidedAt > g.expiresAt) throw new Error(`decided at ${g.decidedAt}, after the gate expired at ${g.expiresAt}`);
    }), `${label}decided at ${g.decidedAt}, before ${g.expiresAt}`);
    if (!expiry.ok) return false;
  }

  if (!(await step(report, 'gates.unique', () => checkGatesUnique(p), 'every gate and decision is used once')).ok) return false;
  if (!(await step(report, 'mandate.spend', () => checkSpend(p, mandate), (c) => `${centsText(c)} of 100 fake USD spent`)).ok) return false;
  return (await step(report, 'proof.coverage', () => checkCoverage(p), 'an allowed attempt and a decided gate')).ok;
}

// ---------- tamper check ----------

// Alter the decoded payload (so the change is to signed bytes, not to base64
// padding bits) at len/2 or the next ASCII letter or digit, keeping the JSON
// well-formed so that only the signature can catch it.
function alterPayload(proofBytes) {
  const doc = parseObject(proofBytes);
  if (typeof doc.payload !== 'string') throw new Error('no payload');
  let payload;
  try {
    payload = b64urlDecode(doc.payload);
  } catch {
    payload = new Uint8Array();
  }
  if (payload.length === 0) throw new Error('payload is not base64url');
  const n = payload.length;
  for (let k = 0; k < n; k++) {
    const i = (Math.floor(n / 2) + k) % n;
    const c = payload[i];
    if (c >= 0x30 && c <= 0x39) payload[i] = 0x30 + ((c - 0x30 + 1) % 10);
    else if (c >= 0x61 && c <= 0x7a) payload[i] = c - 0x20;
    else if (c >= 0x41 && c <= 0x5a) payload[i] = c + 0x20;
    else continue;
    doc.payload = b64urlEncode(payload);
    return { bytes: utf8.encode(JSON.stringify(doc)), where: i };
  }
  throw new Error('payload has no letter or digit');
}

async function tamperCheck(rel) {
  let altered;
  try {
    altered = alterPayload(rel.proof);
  } catch (err) {
    throw new Error(`could not alter the artifact: ${err.message}`);
  }
  const sub = new Report();
  if (await checkSignatures(sub, { ...rel, proof: altered.bytes })) {
    throw new Error(`the artifact with payload byte ${altered.where} altered was accepted`);
  }
  return `payload byte ${altered.where} altered: rejected by ${sub.failed().id}`;
}

// ---------- running ----------

function httpSource(baseUrl, apiUrl) {
  async function get(url) {
    let res;
    try {
      res = await fetch(url, { redirect: 'follow' });
    } catch (err) {
      throw new Error(`GET ${url}: ${err.cause?.message ?? err.message}`);
    }
    if (res.status !== 200) {
      await res.body?.cancel();
      throw new Error(`GET ${url} answered ${res.status}`);
    }
    const bytes = new Uint8Array(await res.arrayBuffer());
    if (bytes.length > MAX_DOWNLOAD) throw new Error(`GET ${url}: larger than ${MAX_DOWNLOAD} bytes`);
    return bytes;
  }
  return {
    file: (path) => get(baseUrl + path),
    apiProof: (proofId) => get(`${apiUrl}/v1/sandbox/proofs/${encodeURIComponent(proofId)}`),
  };
}

async function verify({ baseUrl, apiUrl, tamper = false }) {
  const base = baseUrl.replace(/\/+$/, '');
  const api = (apiUrl || baseUrl).replace(/\/+$/, '');
  const report = new Report();
  const rel = await checkRelease(report, httpSource(base, api));
  if (rel && (await checkSignatures(report, rel)) && tamper) {
    await step(report, 'tamper.rejected', () => tamperCheck(rel), (detail) => detail);
  }
  return report.finish();
}

const USAGE = 'usage: node verify-sandbox-proof.mjs --base-url URL [--api-url URL] [--tamper-check] [--json]';

function parseArgs(argv) {
  const opts = { json: false, tamper: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const [name, inline] = arg.startsWith('--') && arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined];
    const value = () => {
      if (inline !== undefined) return inline;
      if (i + 1 >= argv.length) throw new Error(`${name} needs a value`);
      return argv[++i];
    };
    switch (name) {
      case '--base-url': opts.baseUrl = value(); break;
      case '--api-url': opts.apiUrl = value(); break;
      case '--tamper-check': opts.tamper = true; break;
      case '--json': opts.json = true; break;
      case '-h': case '--help': opts.help = true; break;
      default: throw new Error(`unknown argument ${arg}`);
    }
  }
  for (const [flag, url] of [['--base-url', opts.baseUrl], ['--api-url', opts.apiUrl]]) {
    if (url === undefined) continue;
    let u;
    try {
      u = new URL(url);
    } catch {
      u = null;
    }
    if (!u || (u.protocol !== 'http:' && u.protocol !== 'https:')) throw new Error(`${flag} must be an absolute http(s) URL`);
  }
  if (!opts.help && !opts.baseUrl) throw new Error('--base-url is required');
  return opts;
}

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${err.message}\n${USAGE}\n`);
    return 2;
  }
  if (opts.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const report = await verify(opts);
  if (opts.json) {
    const out = { verdict: report.verdict };
    if (report.proofId !== undefined) out.proofId = report.proofId;
    out.checks = report.checks;
    process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
  } else {
    for (const c of report.checks) process.stdout.write(`${c.ok ? 'ok  ' : 'FAIL'}  ${c.id.padEnd(24)} ${c.detail}\n`);
    process.stdout.write(`verdict: ${report.verdict}${report.proofId ? ` (${report.proofId})` : ''}\n`);
  }
  return report.verdict === 'accept' ? 0 : 1;
}

process.exitCode = await main();
