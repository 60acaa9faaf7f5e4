// tests/web/leader.test.mjs: the dashboard follows the leader among
// several coordinators (web/app.js), in a real browser (Debian's
// Chromium, driven by playwright-core), against the two coordinators that
// tests/e2e/test_web_leader_pg.sh started. With:
//   GP_A, GP_B    the leader's URL, the standby's
//   GP_ADMIN      an admin token (the pool's, in PostgreSQL: both know it)
//   GP_KILL_PID   the leader's process, killed (-9) halfway
//   SHOTS         where the screenshots go
// Opened at the standby, the page goes to the leader, and is signed in
// there; the leader is killed: the page goes to the other coordinator,
// which leads now, and works there (signed in again: a token stays in the
// session of the origin it was typed into). Prints "ok: ..." per check;
// any failure throws (exit status 1).
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';

const A = process.env.GP_A, B = process.env.GP_B, ADMIN = process.env.GP_ADMIN;
const SHOTS = process.env.SHOTS;
const WAIT = 60000;
mkdirSync(SHOTS, { recursive: true });

function ok(what) {
  console.log('ok: ' + what);
}
function check(cond, what) {
  if (!cond) throw new Error('FAILED: ' + what);
  ok(what);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});

// signIn: the page's sign-in form, the admin token; retried while the
// coordinator is not (yet) the leader (bounded by WAIT).
async function signIn(page, where) {
  const deadline = Date.now() + WAIT;
  for (;;) {
    await page.waitForSelector('#login-form', { timeout: WAIT });
    await page.fill('#token', ADMIN);
    await page.click('#login-form button[type=submit]');
    try {
      await page.waitForSelector('.nodes .node', { timeout: 3000 });
      break;
    } catch (e) {
      if (Date.now() > deadline) {
        throw new Error(`cannot sign in at ${where}: ${await page.textContent('#login-error')}`);
      }
    }
  }
  check(page.url().startsWith(where + '/'), 'signed in at ' + where);
}

try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await ctx.newPage();
  const foreign = [];
  page.on('request', (req) => {
    const u = req.url();
    if (!u.startsWith(A + '/') && !u.startsWith(B + '/') && !u.startsWith('data:')) foreign.push(u);
  });
  page.on('pageerror', (e) => { throw new Error('script error: ' + e.message); });

  // At the standby, before any sign-in: on to the leader.
  await page.goto(B + '/');
  await page.waitForURL((u) => u.origin === A, { timeout: WAIT });
  ok('opened at the standby ' + B + ', the page went to the leader ' + A);
  check(!/[?&](peers|down)=/.test(page.url()), 'the page dropped the coordinators it was told from its URL');
  check(!page.url().includes(ADMIN), 'no token in the URL');
  await signIn(page, A);
  check((await page.textContent('#who-name')).includes('(admin)'), 'signed in as the admin at the leader');
  await page.screenshot({ path: `${SHOTS}/leader-a.png`, fullPage: true });

  // The leader dies.
  process.kill(Number(process.env.GP_KILL_PID), 'SIGKILL');
  ok('killed the leader (' + A + ')');
  await page.waitForURL((u) => u.origin === B, { timeout: WAIT });
  ok('the page went to ' + B + ' when ' + A + ' stopped answering');
  await signIn(page, B);

  // It works there: a job submitted from the page runs to its end.
  await page.click('a[href="#/jobs"]');
  await page.waitForSelector('#submit-form');
  await page.fill('#f-command', 'echo "after the failover"');
  await page.fill('#f-name', 'after');
  await page.fill('#f-gpus', '1');
  await page.click('#submit-form button[type=submit]');
  await page.waitForURL(/#\/job\/\d+$/, { timeout: WAIT });
  await page.waitForSelector('h1 .badge.st-succeeded', { timeout: WAIT });
  await page.waitForFunction(() => /after the failover/.test(document.querySelector('#log').textContent), null, { timeout: WAIT });
  check(page.url().startsWith(B + '/'), 'a job submitted from the page ran at the new leader, its log shown');
  await page.screenshot({ path: `${SHOTS}/leader-b.png`, fullPage: true });
  check(foreign.length === 0, 'no request left the coordinators: ' + foreign.join(' '));
  console.log('all checks passed');
} finally {
  await browser.close();
}
