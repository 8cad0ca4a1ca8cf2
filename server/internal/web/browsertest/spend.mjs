// Seeing money in a real browser: the person signs in with a one-time link
// and lands on the dashboard, which draws this period's spend per project
// and per key as inline SVG bar charts, with a table of the same numbers,
// and lists the organisation's services with what each cost. The page must
// fit a phone; a screenshot is kept.
import { launch, check, fitsPhone, run, artifacts } from './lib.mjs';

const signin = process.env.PIER_SIGNIN_URL;
const projects = JSON.parse(process.env.PIER_PROJECTS);
const keys = JSON.parse(process.env.PIER_KEYS);
const service = process.env.PIER_SERVICE;

async function spentBars(page, group, name) {
  const chart = page.locator(`figure.spend-chart[data-${group}="${name}"]`);
  check(await chart.count() === 1, `no spend chart for ${group} ${name}`);
  const svg = chart.locator('svg[role=img]');
  check((await svg.locator(':scope > title').textContent()).includes(name), `the ${group} ${name} chart has no title`);
  check(await svg.locator('desc').count() === 1, `the ${group} ${name} chart has no description`);
  const bars = svg.locator('rect.bar.spent');
  const n = await bars.count();
  check(n > 0, `the ${group} ${name} chart has no spent bar`);
  const box = await bars.first().boundingBox();
  check(box && box.height > 0 && box.width > 0, `the ${group} ${name} chart's bar is not drawn`);
  return n;
}

run(async () => {
  const { page, close } = await launch();
  try {
    await page.goto(signin);
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    check(page.url().includes('/dashboard'), `not on the dashboard: ${page.url()}`);
    const out = { bars: {} };
    for (const p of projects) out.bars['project ' + p] = await spentBars(page, 'project', p);
    for (const k of keys) out.bars['key ' + k] = await spentBars(page, 'key', k);
    check(await page.locator('#spend details table tbody tr').count() > 0, 'no table of the spend');
    const row = page.locator('#services tr.service', { hasText: service });
    check(await row.count() === 1, `the service ${service} is not listed`);
    const text = await row.innerText();
    check(text.includes('https://') && text.includes('live') && text.includes('$'), `the service's row: ${text}`);
    const ledger = await page.locator('main').innerText();
    check(ledger.includes(`key “${keys[0]}”`) || ledger.includes(keys[0]), 'keys are not named');
    check(await fitsPhone(page), 'the dashboard is wider than a phone');
    await page.screenshot({ path: `${artifacts}/dashboard-spend-phone.png`, fullPage: true });
    return out;
  } finally {
    await close();
  }
});
