// tests/web/gang_expose.test.mjs: a gang's per-part ports on the
// dashboard (issue 17), in Debian's Chromium driven by playwright-core,
// against the pool tests/e2e/test_interactive_gang_expose.sh started.
// Run by that script, with:
//   GP_URL    the coordinator's (dashboard's) URL
//   GP_TOKEN  the job owner's token
//   GP_JOB    a gang declaring port 7901 on part 0 and on part 1, each
//             part serving "page-of-rank-<RANK>" there
// The job's page shows "Open port 7901" and "Open part 1 port 7901";
// each opens its own origin (j<JOB>-p7901, j<JOB>-part1-p7901) with its
// own part's page. Prints "ok: ..." per check and "all checks passed".
import { chromium } from 'playwright-core';
import { gotoRetrying } from './nav.mjs';

const URL0 = process.env.GP_URL;
const JOB = process.env.GP_JOB;
const WAIT = 60000;

function check(cond, what) {
  if (!cond) throw new Error('FAILED: ' + what);
  console.log('ok: ' + what);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});

// Clicks the job page's button for (part, port); the new tab's origin
// and, once the proxy's sign-in page has moved on, its text.
async function open(ctx, page, part, port) {
  await gotoRetrying(page, URL0 + '/#/job/' + JOB);
  const button = `button.open-port[data-part="${part}"][data-port="${port}"]`;
  await page.waitForSelector(button, { timeout: WAIT });
  const label = (await page.textContent(button)).trim();
  const [tab] = await Promise.all([ctx.waitForEvent('page'), page.click(button)]);
  await tab.waitForURL((u) => !u.pathname.startsWith('/_gpupool'), { timeout: WAIT, waitUntil: 'commit' });
  const origin = new URL(tab.url()).origin;
  let text = '';
  for (let i = 0; i < 100 && !text.includes('page-of-rank-'); i++) {
    // The job's server may still be starting: load the page again.
    const resp = await gotoRetrying(tab, origin + '/', { timeout: WAIT }).catch(() => null);
    text = resp && resp.ok() ? await tab.textContent('body') : '';
    if (!text.includes('page-of-rank-')) await tab.waitForTimeout(200);
  }
  await tab.close();
  return { label, origin, text };
}

try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await ctx.newPage();
  await gotoRetrying(page, URL0 + '/');
  await page.waitForSelector('#login-form');
  await page.fill('#token', process.env.GP_TOKEN);
  await page.click('#login-form button[type=submit]');
  await page.waitForSelector('.nodes .node', { timeout: WAIT });

  const p1 = await open(ctx, page, 1, 7901);
  check(p1.label === 'Open part 1 port 7901', 'part 1\'s button: ' + p1.label);
  check(new RegExp(`^http://j${JOB}-part1-p7901\\.localhost:\\d+$`).test(p1.origin),
    'part 1\'s port at its own origin: ' + p1.origin);
  check(p1.text.includes('page-of-rank-1'), 'part 1\'s page: ' + p1.text.trim());

  const p0 = await open(ctx, page, 0, 7901);
  check(p0.label === 'Open port 7901', 'part 0\'s button: ' + p0.label);
  check(new RegExp(`^http://j${JOB}-p7901\\.localhost:\\d+$`).test(p0.origin),
    'part 0\'s port at its own origin: ' + p0.origin);
  check(p0.text.includes('page-of-rank-0'), 'part 0\'s page: ' + p0.text.trim());
  console.log('all checks passed');
} finally {
  await browser.close();
}
