// Approving and denying domain purchases in a real browser. The agent
// launched two sites with domains it may not buy on its own (the Go test
// did); the human signs in, reads what each approval buys, at what price,
// renewing at what, asked by which key, and what the budget becomes, then
// approves one and denies the other, and reads the outcomes.
import { launch, check, fitsPhone, run, artifacts } from './lib.mjs';

const approve = process.env.PIER_APPROVE_URL;
const deny = process.env.PIER_DENY_URL;
const signin = process.env.PIER_SIGNIN_URL;
const domain = process.env.PIER_DOMAIN;
const denied = process.env.PIER_DENIED_DOMAIN;

run(async () => {
  const { page, close } = await launch();
  try {
    await page.goto(approve);
    await page.goto(signin);
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    check(page.url() === approve, `sign-in landed on ${page.url()}`);
    check((await page.locator('h1').innerText()) === `Buy the domain ${domain} for 1 year`, `heading: ${await page.locator('h1').innerText()}`);
    // Labels are upper-cased by the stylesheet; compare case-insensitively.
    const shown = (await page.locator('main').innerText()).toLowerCase();
    for (const want of ['Price now', '$12.00', 'Then renews at', 'a year', 'Asked by', 'the key “launcher”', 'Budget remaining', 'if you approve', 'if you deny',
      'cannot be unbought', 'Denying refunds']) {
      check(shown.includes(want.toLowerCase()), `the approval page lacks "${want}": ${shown}`);
    }
    check(!shown.includes('domain_registration') && !shown.includes('for 15 minutes'), `raw or untrue text: ${shown}`);
    check(await fitsPhone(page), 'the approval page is wider than a phone');
    await page.screenshot({ path: `${artifacts}/domain-approval-before.png`, fullPage: true });

    await Promise.all([page.waitForNavigation(), page.click('button[value=approve]')]);
    const after = await page.locator('main').innerText();
    // Right after the decision the launch may still be buying it.
    check((after.includes(`Approved: ${domain} is bought for $12.00`) || after.includes(`Approved: ${domain} is being bought for $12.00`)) && !after.includes('if you approve'), `after approving: ${after}`);
    await page.screenshot({ path: `${artifacts}/domain-approval-approved.png`, fullPage: true });

    await page.goto(deny);
    check((await page.locator('h1').innerText()) === `Buy the domain ${denied} for 1 year`, 'the second approval names its domain');
    await Promise.all([page.waitForNavigation(), page.click('button[value=deny]')]);
    const afterDeny = await page.locator('main').innerText();
    check(afterDeny.includes(`Denied: ${denied} was not bought, nothing was charged for it`), `after denying: ${afterDeny}`);
    await page.screenshot({ path: `${artifacts}/domain-approval-denied.png`, fullPage: true });
    return {};
  } finally {
    await close();
  }
});
