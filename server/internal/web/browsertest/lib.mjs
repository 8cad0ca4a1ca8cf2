// Shared by the browser tests: Debian's Chromium driven by playwright-core,
// which is installed under tools/ (npm ci --prefix tools).
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const require = createRequire(join(process.env.PIER_TOOLS, 'package.json'));
const { chromium } = require('playwright-core');

export const base = process.env.PIER_BASE_URL;
export const artifacts = process.env.PIER_ARTIFACTS;

// The flags Chromium needs when it runs as root on these machines, and a
// fresh profile each run.
export async function launch() {
  const profile = mkdtempSync(join(tmpdir(), 'pier-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.PIER_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run'],
    viewport: { width: 390, height: 844 },
    isMobile: true,
    hasTouch: true,
  });
  const close = async () => { await context.close(); rmSync(profile, { recursive: true, force: true }); };
  return { context, page: context.pages()[0] || await context.newPage(), close };
}

export function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

// api calls the REST API the way an agent would, following a tool action.
export async function call(action, headers = {}) {
  const { method, path } = action.http;
  const init = { method, headers: { ...headers } };
  if (method !== 'GET') {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(action.arguments || {});
  }
  const res = await fetch(base + path, init);
  return { status: res.status, body: await res.json() };
}

// The page must fit a phone: nothing wider than the viewport.
export async function fitsPhone(page) {
  return page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth);
}

export async function run(main) {
  try {
    const out = await main();
    process.stdout.write(JSON.stringify({ ok: true, ...out }) + '\n');
  } catch (err) {
    process.stdout.write(JSON.stringify({ ok: false, error: String(err && err.stack || err) }) + '\n');
    process.exitCode = 1;
  }
}
