// A person confirms they are a domain's registrant from the link mailed to
// them (the Go test proposed it and read the link from the inbox): the page
// says what is being recorded, nothing happens until the button, and
// afterwards RDAP answers for the domain with the registrant redacted.
import { launch, check, fitsPhone, run, artifacts } from './lib.mjs';

const link = process.env.PIER_CONFIRM_URL;
const domain = process.env.PIER_DOMAIN;
const rdap = process.env.PIER_RDAP_URL;

run(async () => {
  const { page, close } = await launch();
  try {
    await page.goto(link);
    check((await page.locator('h1').innerText()) === `Are you the registrant of ${domain}?`, `heading: ${await page.locator('h1').innerText()}`);
    const shown = await page.locator('main').innerText();
    for (const want of ['Ada Lovelace', 'London', 'GB', 'nothing is recorded until you press the button']) {
      check(shown.includes(want), `the confirm page lacks "${want}": ${shown}`);
    }
    check(await fitsPhone(page), 'the confirm page is wider than a phone');
    await page.screenshot({ path: `${artifacts}/registrant-before.png`, fullPage: true });

    // Opening the page recorded nothing yet.
    let body = await (await fetch(rdap)).json();
    check(!JSON.stringify(body).includes('registrant'), `RDAP shows a registrant before the confirmation: ${JSON.stringify(body)}`);

    await Promise.all([page.waitForNavigation(), page.click('#confirm')]);
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
