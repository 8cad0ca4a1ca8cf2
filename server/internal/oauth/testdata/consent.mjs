// The consent step of an OAuth sign-in in real headless Chromium (Debian's,
// driven by playwright-core from tools/). The Go test started the flow
// with golang.org/x/oauth2 and exchanges the code this returns.
//
// The person opens the authorization URL signed out and sees only the
// sign-in page; signs in with a one-time link and lands back on the consent
// page; finds buy_domain unticked; unticks launch; allows. The browser ends
// at the client's loopback redirect URI with the code.
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const require = createRequire(join(process.env.PIER_TOOLS, 'package.json'));
const { chromium } = require('playwright-core');

const authURL = process.env.PIER_AUTH_URL;
const signin = process.env.PIER_SIGNIN_URL;
const callback = process.env.PIER_CALLBACK;
const artifacts = process.env.PIER_ARTIFACTS;

function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

async function main() {
  const profile = mkdtempSync(join(tmpdir(), 'pier-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.PIER_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run'],
    viewport: { width: 390, height: 844 },
  });
  try {
    const page = context.pages()[0] || await context.newPage();
    await page.goto(authURL);
    check((await page.locator('h1').innerText()) === 'Sign in to continue', 'a signed-out browser was not asked to sign in');
    const signedOut = await page.locator('main').innerText();
    check(!signedOut.includes('Browser Agent') && !signedOut.includes('buy_domain'), 'the signed-out page reveals the request');

    await page.goto(signin);
    // The link opens a confirm page; pressing its button spends the link.
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    check(page.url().includes('/oauth/consent/'), `sign-in landed on ${page.url()}`);
    check((await page.locator('h1').innerText()) === 'Allow Browser Agent?', 'not the consent page');
    check(!(await page.isChecked('input[name=scope_buy_domain]')), 'buy_domain is ticked by default');
    for (const s of ['read', 'quote', 'launch']) {
      check(await page.isChecked(`input[name=scope_${s}]`), `${s} is not ticked by default`);
    }
    await page.uncheck('input[name=scope_launch]');
    await page.screenshot({ path: `${artifacts}/oauth-consent-phone.png`, fullPage: true });
    await Promise.all([
      page.waitForURL((u) => u.href.startsWith(callback), { timeout: 15000 }),
      page.click('button[value=approve]'),
    ]);
    return { url: page.url(), text: await page.locator('body').innerText() };
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
}

main().then(
  (out) => process.stdout.write(JSON.stringify({ ok: true, ...out }) + '\n'),
  (err) => {
    process.stdout.write(JSON.stringify({ ok: false, error: String(err && err.stack || err) }) + '\n');
    process.exitCode = 1;
  },
);
