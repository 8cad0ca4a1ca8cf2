// Approving and denying budget raises in a real browser. The agent asked
// for two raises over REST (the Go test did); the human opens the first
// approval URL signed out and sees nothing, signs in with a one-time link,
// lands back on it and approves; then denies the second.
import { launch, check, fitsPhone, run, artifacts } from './lib.mjs';

const approve = process.env.PIER_APPROVE_URL;
const deny = process.env.PIER_DENY_URL;
const signin = process.env.PIER_SIGNIN_URL;

run(async () => {
  const { page, close } = await launch();
  try {
    await page.goto(approve);
    check((await page.locator('h1').innerText()) === 'Sign in to continue', 'a signed-out browser was not asked to sign in');
    const signedOut = await page.locator('main').innerText();
    check(!signedOut.includes('$') && !signedOut.includes('Raise the budget'), 'the signed-out page reveals the approval');

    await page.goto(signin);
    // The link opens a confirm page; pressing its button spends the link.
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    check(page.url() === approve, `sign-in landed on ${page.url()}`);
    const shown = await page.locator('main').innerText();
    check(shown.includes('Raise the budget of engine by $40.00') && shown.includes('launch week') && shown.includes('if you approve')
      && shown.toLowerCase().includes('asked by') && shown.includes('the key “agent”'), `approval page: ${shown}`);
    check(await fitsPhone(page), 'the approval page is wider than a phone');
    await page.screenshot({ path: `${artifacts}/approval-phone.png`, fullPage: true });

    await page.goto(page.url().replace(/\/approvals\/.*/, '/dashboard'));
    check((await page.locator('main').innerText()).includes('Waiting for you (2)'), 'dashboard lists the two approvals');
    check(await fitsPhone(page), 'the dashboard is wider than a phone');
    await page.screenshot({ path: `${artifacts}/dashboard-phone.png`, fullPage: true });

    await page.goto(approve);
    await Promise.all([page.waitForNavigation(), page.click('button[value=approve]')]);
    check((await page.locator('.state').innerText()) === 'approved', 'not approved');
    check((await page.locator('main').innerText()).includes('Approved: $40.00 was added'), 'the approved page does not say what happened');
    await page.screenshot({ path: `${artifacts}/approval-approved-phone.png`, fullPage: true });

    await page.goto(deny);
    await Promise.all([page.waitForNavigation(), page.click('button[value=deny]')]);
    check((await page.locator('.state').innerText()) === 'denied', 'not denied');
    return {};
  } finally {
    await close();
  }
});
