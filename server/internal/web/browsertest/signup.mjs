// Signup in a real browser, following only the typed actions: the agent
// posts /v1/signup, the human opens the review URL, approves, is refused a
// declined card and accepted with a good one; the agent's poll then
// returns the key once, and never again.
import { base, artifacts, launch, check, call, fitsPhone, run } from './lib.mjs';

run(async () => {
  const started = await fetch(base + '/v1/signup', {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ email: 'grace@example.com', organizationName: 'Hopper Labs' }),
  });
  check(started.status === 201, `signup answered ${started.status}`);
  const env = await started.json();
  const review = env.actions.find(a => a.kind === 'url' && a.purpose === 'review_signup');
  const poll = env.actions.find(a => a.kind === 'tool' && a.tool === 'poll_signup');
  check(review && review.actor === 'human', 'no review action for the human');
  check(poll && poll.retryAfterSeconds > 0 && poll.requiredHeaders.includes('Content-Type'), 'no typed poll action');

  let polled = await call(poll);
  check(polled.body.data.state === 'pending_review', `first poll: ${JSON.stringify(polled.body)}`);

  const { page, close } = await launch();
  try {
    await page.goto(review.url);
    check(await page.locator('h1').innerText() === 'Review your Pier account', 'not the review page');
    const text = await page.locator('main').innerText();
    for (const want of ['What the agent', 'buy_domain', 'Budget and approval rules', '.com', 'managed_postgres']) {
      check(text.includes(want), `review page lacks ${want}`);
    }
    check(await fitsPhone(page), 'the review page is wider than a phone');
    await page.screenshot({ path: `${artifacts}/review-phone.png`, fullPage: true });
    await page.fill('input[name=org_name]', 'Hopper Labs');
    await page.fill('input[name=project_name]', 'compiler');
    await page.fill('input[name=budget]', '120');
    await page.fill('input[name=approval_above]', '25');
    await page.fill('input[name=human_name]', 'Grace');
    await page.check('input[name=approve]');
    await Promise.all([page.waitForURL(/\/billing\/bss_/), page.click('#review-form button[type=submit]')]);

    // The agent now sees the card step.
    polled = await call(poll);
    check(polled.body.data.state === 'pending_card', `after review: ${polled.body.data.state}`);
    check(polled.body.actions.some(a => a.kind === 'url' && a.purpose === 'card_setup' && a.url === page.url()), 'no card_setup action naming this page');

    // A declined card is refused.
    await page.fill('input[name=number]', '4000 0000 0000 0002');
    await page.fill('input[name=expiry]', '12/30');
    await page.fill('input[name=cvc]', '123');
    await Promise.all([page.waitForNavigation(), page.click('#card-form button[type=submit]')]);
    const alert = await page.locator('[role=alert]').innerText();
    check(alert.includes('declined') && alert.includes('What to do'), `decline shown as: ${alert}`);
    polled = await call(poll);
    check(!polled.body.data.apiKey, 'a key before a card was accepted');

    // A good card is accepted.
    await page.fill('input[name=number]', '4242 4242 4242 4242');
    await page.fill('input[name=expiry]', '12/30');
    await page.fill('input[name=cvc]', '123');
    await Promise.all([page.waitForNavigation(), page.click('#card-form button[type=submit]')]);
    check((await page.locator('h1').innerText()) === 'Card saved', 'card not saved');
    check((await page.locator('main').innerText()).includes('visa •••• 4242'), 'saved card not shown');

    // The key, once.
    const done = await call(poll);
    const key = done.body.data.apiKey;
    check(done.body.data.state === 'complete' && /^agk_/.test(key || ''), `completion poll: ${JSON.stringify(done.body.data)}`);
    const later = [];
    for (let i = 0; i < 2; i++) {
      const again = await call(poll);
      check(again.body.data.state === 'claimed' && again.body.data.apiKey === undefined, `later poll showed: ${JSON.stringify(again.body.data)}`);
      later.push(again.body.data.state);
    }
    const projects = await fetch(base + '/v1/projects', { headers: { Authorization: `Bearer ${key}` } });
    const list = await projects.json();
    check(projects.status === 200 && list.data.projects.length === 1 && list.data.projects[0].budgetLimitUsd === 120, `projects: ${projects.status}`);

    // The dashboard on a phone.
    await page.goto(base + '/dashboard');
    check((await page.locator('h1').innerText()) === 'Hopper Labs', 'dashboard heading');
    check(await fitsPhone(page), 'the dashboard is wider than a phone');
    await page.screenshot({ path: `${artifacts}/signup-dashboard-phone.png`, fullPage: true });
    return { key, organizationId: done.body.data.organizationId, projectId: done.body.data.projectId, later };
  } finally {
    await close();
  }
});
