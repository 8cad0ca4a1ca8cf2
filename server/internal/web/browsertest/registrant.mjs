// A person confirms the registrant of a domain at the task's approval URL
// (the Go test had an agent propose it, at an address the agent's keys
// read, so no link was mailed): signed out the page shows nothing, signed
// in it says what is being recorded, nothing happens until the button, and
// afterwards RDAP answers for the domain with the registrant redacted.
import { launch, check, fitsPhone, run, artifacts } from './lib.mjs';

const approve = process.env.PIER_APPROVE_URL;
const signin = process.env.PIER_SIGNIN_URL;
const domain = process.env.PIER_DOMAIN;
const rdap = process.env.PIER_RDAP_URL;

run(async () => {
  const { page, close } = await launch();
  try {
    await page.goto(approve);
    check((await page.locator('h1').innerText()) === 'Sign in to continue', 'a signed-out browser was not asked to sign in');
    check(!(await page.locator('main').innerText()).includes('Lovelace'), 'the signed-out page reveals the registrant');

    await page.goto(signin);
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    await page.goto(approve);
    check((await page.locator('h1').innerText()) === `Confirm Ada Lovelace as the registrant of ${domain}`, `heading: ${await page.locator('h1').innerText()}`);
    const shown = await page.locator('main').innerText();
    for (const want of ['Ada Lovelace', 'London', 'GB', 'No link was mailed', 'Denying records nothing']) {
      check(shown.includes(want), `the approval page lacks "${want}": ${shown}`);
    }
    check(await fitsPhone(page), 'the approval page is wider than a phone');
    await page.screenshot({ path: `${artifacts}/registrant-before.png`, fullPage: true });

    // Opening the page recorded nothing yet.
    let body = await (await fetch(rdap)).json();
    check(!JSON.stringify(body).includes('registrant'), `RDAP shows a registrant before the confirmation: ${JSON.stringify(body)}`);

    await Promise.all([page.waitForNavigation(), page.click('button[value=approve]')]);
    check((await page.locator('.state').innerText()) === 'approved', 'not approved');
    const after = await page.locator('main').innerText();
    check(after.includes('Confirmed') && after.includes(`as the registrant of ${domain}`), `after confirming: ${after}`);
    await page.screenshot({ path: `${artifacts}/registrant-confirmed.png`, fullPage: true });

    const res = await fetch(rdap, { headers: { Accept: 'application/rdap+json' } });
    check(res.headers.get('content-type') === 'application/rdap+json', `RDAP content type ${res.headers.get('content-type')}`);
    body = await res.json();
    const text = JSON.stringify(body);
    check(body.objectClassName === 'domain' && body.ldhName === domain, `RDAP object: ${text}`);
    check(body.entities?.[0]?.roles?.[0] === 'registrant' && Array.isArray(body.redacted), `RDAP registrant: ${text}`);
    check(!text.includes('Lovelace') && !text.includes('ada@') && !text.includes('James'), `RDAP shows personal data: ${text}`);
    return {};
  } finally {
    await close();
  }
});
