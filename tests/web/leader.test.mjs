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
// session of the origin it was typed into). A second tab, opened at the
// leader by a crafted link (?peers= naming a listener of this test's, as
// a phisher would name a site of theirs), goes to the real new leader
// too and never contacts the listener: the dashboard moves only to the
// coordinators the pool lists (GET /v1/coordinators), from which the
// dead leader drops out. Prints "ok: ..." per check; any failure throws
// (exit status 1).
import { chromium } from 'playwright-core';
import { gotoRetrying } from './nav.mjs';
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:http';

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

// The phisher's site: records every request it gets.
const phished = [];
const phisher = createServer((req, res) => {
  phished.push(req.method + ' ' + req.url);
  res.writeHead(200, { 'Content-Type': 'text/html' });
  res.end('<form><input name="token"></form>');
});
await new Promise((ok) => phisher.listen(0, '127.0.0.1', ok));
const EVIL = 'http://127.0.0.1:' + phisher.address().port;

// Polls until PAGE shows ORIGIN (bounded by WAIT); fails at once when
// the phisher was contacted.
async function waitOrigin(page, origin) {
  const deadline = Date.now() + WAIT;
  for (;;) {
    if (phished.length) throw new Error('FAILED: the page contacted ' + EVIL + ': ' + phished.join(', '));
    if (new URL(page.url()).origin === origin) return;
    if (Date.now() > deadline) throw new Error(`FAILED: the page is at ${page.url()}, not ${origin}`);
    await new Promise((ok) => setTimeout(ok, 200));
  }
}

async function newPage(ctx, foreign) {
  const page = await ctx.newPage();
  page.on('request', (req) => {
    const u = req.url();
    if (!u.startsWith(A + '/') && !u.startsWith(B + '/') && !u.startsWith('data:')) foreign.push(u);
  });
  page.on('pageerror', (e) => { throw new Error('script error: ' + e.message); });
  return page;
}

try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const foreign = [];
  const page = await newPage(ctx, foreign);

  // The pool's own list (what the dashboard moves to): A leads, B stands by.
  const r = await fetch(A + '/v1/coordinators', { headers: { Authorization: 'Bearer ' + ADMIN } });
  const listed = (await r.json()).coordinators || [];
  check(r.status === 200 && listed.length === 2 &&
    listed.some((c) => c.url === A && c.leader === true) &&
    listed.some((c) => c.url === B && c.leader === false),
  'GET /v1/coordinators lists ' + A + ' (leading) and ' + B + ': ' + JSON.stringify(listed));
  check((await fetch(A + '/v1/coordinators')).status === 401, 'the list needs a token');

  // At the standby, before any sign-in: on to the leader.
  await gotoRetrying(page, B + '/?peers=' + encodeURIComponent(EVIL));
  await page.waitForURL((u) => u.origin === A, { timeout: WAIT });
  ok('opened at the standby ' + B + ', the page went to the leader ' + A);
  check(!/[?&](peers|down)=/.test(page.url()), 'the page dropped the coordinators it was told from its URL');
  check(!page.url().includes(ADMIN), 'no token in the URL');
  await signIn(page, A);
  check((await page.textContent('#who-name')).includes('(admin)'), 'signed in as the admin at the leader');
  await page.screenshot({ path: `${SHOTS}/leader-a.png`, fullPage: true });

  // A crafted link to the leader, in a tab of its own.
  const ctx2 = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const crafted = await newPage(ctx2, foreign);
  await gotoRetrying(crafted, A + '/?peers=' + encodeURIComponent(EVIL) + '#/pool');
  check(!/[?&]peers=/.test(crafted.url()), 'the crafted link\'s ?peers= was dropped from the address');
  await signIn(crafted, A);

  // The leader dies.
  process.kill(Number(process.env.GP_KILL_PID), 'SIGKILL');
  ok('killed the leader (' + A + ')');
  await waitOrigin(page, B);
  ok('the page went to ' + B + ' when ' + A + ' stopped answering');
  await waitOrigin(crafted, B);
  ok('the tab opened by the crafted link went to ' + B + ' too, never to ' + EVIL);
  await ctx2.close();
  await signIn(page, B);
  // The dead one drops out of the list (its session, and URL lock, ended).
  const after = await (await fetch(B + '/v1/coordinators', { headers: { Authorization: 'Bearer ' + ADMIN } })).json();
  check(JSON.stringify(after.coordinators) === JSON.stringify([{ url: B, leader: true }]),
    'GET /v1/coordinators at the new leader lists it alone: ' + JSON.stringify(after.coordinators));

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
  check(phished.length === 0, 'the crafted ' + EVIL + ' got no request');
  console.log('all checks passed');
} finally {
  await browser.close();
  phisher.close();
}
