// Capping an agent key in a real browser: the person signs in with a
// one-time link, opens the keys page, types a monthly cap for the key the
// agent uses and submits the form; the page says what was set and shows
// the cap with what the key has committed. The Go test then checks that
// the agent's next quote past the cap is refused.
import { launch, check, fitsPhone, run, artifacts } from './lib.mjs';

const signin = process.env.PIER_SIGNIN_URL;
const keyID = process.env.PIER_KEY_ID;
const capUSD = process.env.PIER_CAP_USD;

run(async () => {
  const { page, close } = await launch();
  try {
    await page.goto(signin);
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    await page.goto(page.url().replace(/\/dashboard.*/, '/keys'));
    const form = page.locator(`form[action="/keys/${keyID}/cap"]`);
    check(await form.count() === 1, 'no cap form for the key');
    check((await page.locator(`p.cap[data-key="${keyID}"]`).innerText()).includes('No spending cap'), 'an uncapped key says so');
    await form.locator('input[name=cap_usd]').fill(capUSD);
    await form.locator('select[name=period]').selectOption('month');
    await Promise.all([page.waitForNavigation(), form.locator('button[type=submit]').click()]);
    const main = await page.locator('main').innerText();
    check(main.includes(`Capped ${keyID} at $`) && main.includes('per month'), `the page does not say what was set: ${main}`);
    const shown = await page.locator(`p.cap[data-key="${keyID}"]`).innerText();
    check(shown.includes('Spending cap $') && shown.includes('per month') && shown.includes('committed $'), `the key's cap: ${shown}`);
    check(await page.locator(`form[action="/keys/${keyID}/cap"] input[name=cap_usd]`).inputValue() === capUSD, 'the form does not hold the cap');
    check(await fitsPhone(page), 'the keys page is wider than a phone');
    await page.screenshot({ path: `${artifacts}/keys-cap-phone.png`, fullPage: true });
    return {};
  } finally {
    await close();
  }
});
