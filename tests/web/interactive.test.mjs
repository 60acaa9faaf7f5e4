// tests/web/interactive.test.mjs: the job port proxy in a real browser
// (Debian's Chromium, driven by playwright-core), against the pool that
// tests/e2e/test_interactive_web.sh started. Run by that script, with:
//   GP_URL        the coordinator's (dashboard's) URL
//   GP_ALICE      alice's user token
//   GP_JUPYTER    alice's job running Jupyter on its port 8888
//   GP_JUP_TOKEN  that Jupyter's own token
//   GP_EVIL       alice's job serving tests/web/site on its port 8000
//   SHOTS         where the screenshots go
// Prints "ok: ..." per check and "all checks passed"; a failure throws.
import { chromium } from 'playwright-core';
import { gotoRetrying } from './nav.mjs';
import { mkdirSync } from 'node:fs';

const URL0 = process.env.GP_URL;
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

// Signs in to the dashboard, opens the job's page and clicks "Open port
// PORT": the proxied page opens in a new tab (its own origin).
async function openPort(ctx, page, job, port) {
  await gotoRetrying(page, URL0 + '/#/job/' + job);
  const button = `button.open-port[data-port="${port}"]`;
  await page.waitForSelector(button, { timeout: WAIT });
  const [tab] = await Promise.all([ctx.waitForEvent('page'), page.click(button)]);
  tab.on('requestfailed', (r) => console.log(`request failed: ${r.url()} ${r.failure().errorText}`));
  await tab.waitForLoadState('domcontentloaded');
  return tab;
}

try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  // What a page lacked, said: a script or style that failed to load leaves
  // a page without its app (no #login-form) and nothing else to go by.
  ctx.on('requestfailed', (r) => console.log(`request failed: ${r.url()} ${r.failure().errorText}`));
  ctx.on('response', (r) => { if (r.status() >= 400) console.log(`response ${r.status()}: ${r.url()}`); });
  ctx.on('weberror', (e) => console.log('script error: ' + e.error().message));
  const page = await ctx.newPage();
  await gotoRetrying(page, URL0 + '/');
  await page.waitForSelector('#login-form');
  await page.fill('#token', process.env.GP_ALICE);
  await page.click('#login-form button[type=submit]');
  await page.waitForSelector('.nodes .node', { timeout: WAIT });
  check(await page.evaluate(() => sessionStorage.getItem('gpupool.token')) === process.env.GP_ALICE,
    'signed in to the dashboard (the token in its sessionStorage)');

  // ---------------------------------------------------------- Jupyter
  const jup = await openPort(ctx, page, process.env.GP_JUPYTER, 8888);
  const origin = new URL(jup.url()).origin;
  check(/^http:\/\/j\d+-p8888\.localhost:\d+$/.test(origin), 'the port opens at its own origin: ' + origin);
  check(origin !== new URL(URL0).origin, 'not the dashboard\'s origin');
  // The sign-in page posts its code and loads the job's page: Jupyter
  // (its login page until its own token is given).
  await jup.waitForURL((u) => !u.pathname.startsWith('/_gpupool'), { timeout: WAIT, waitUntil: 'commit' });
  check(!jup.url().includes('#'), 'the code left the address bar');
  const proxyCookies = (await ctx.cookies(origin)).filter((c) => c.name === 'gpupool_proxy');
  check(proxyCookies.length === 1 && proxyCookies[0].httpOnly && proxyCookies[0].domain === new URL(origin).hostname,
    'the proxy cookie: HttpOnly, host-only');
  check(!(await jup.evaluate(() => document.cookie)).includes('gpupool_proxy'), 'the page cannot read it');
  await gotoRetrying(jup, origin + '/tree?token=' + process.env.GP_JUP_TOKEN, { waitUntil: 'domcontentloaded' });
  await jup.waitForSelector('#notebook_list, #ipython-main-app, .jp-LabShell', { timeout: WAIT });
  check(/Jupyter|Home/.test(await jup.title()), 'Jupyter\'s page through the proxy: ' + await jup.title());
  await jup.screenshot({ path: SHOTS + '/jupyter-tree.png' });
  // A kernel run: REST to start it, its WebSocket to run code (both
  // through the proxy, the WebSocket an Upgrade spliced as bytes).
  const out = await jup.evaluate(async (tok) => {
    const h = { Authorization: 'token ' + tok, 'Content-Type': 'application/json' };
    const k = await (await fetch('/api/kernels', { method: 'POST', headers: h, body: '{}' })).json();
    const ws = new WebSocket(`ws://${location.host}/api/kernels/${k.id}/channels?token=${tok}`);
    const msgId = 'gp-' + Math.random();
    return await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no answer from the kernel')), 45000);
      let text = '';
      ws.onerror = () => reject(new Error('websocket error'));
      ws.onopen = () => ws.send(JSON.stringify({
        header: { msg_id: msgId, username: 'gp', session: 'gp-s', msg_type: 'execute_request', version: '5.3' },
        parent_header: {}, metadata: {}, channel: 'shell',
        content: { code: 'print(6 * 7)', silent: false, store_history: false, user_expressions: {}, allow_stdin: false },
      }));
      ws.onmessage = (ev) => {
        const m = JSON.parse(ev.data);
        if (m.parent_header && m.parent_header.msg_id === msgId && m.msg_type === 'stream') text += m.content.text;
        if (m.parent_header && m.parent_header.msg_id === msgId && m.msg_type === 'status' &&
            m.content.execution_state === 'idle') {
          clearTimeout(timer);
          ws.close();
          resolve(text);
        }
      };
    });
  }, process.env.GP_JUP_TOKEN);
  check(out.trim() === '42', 'a kernel ran print(6 * 7) over the proxied WebSocket: ' + JSON.stringify(out));

  // --------------------------------------------- a page that turns bad
  const evilGrant = await openPort(ctx, page, process.env.GP_EVIL, 8000);
  await evilGrant.waitForURL((u) => !u.pathname.startsWith('/_gpupool'), { timeout: WAIT, waitUntil: 'commit' });
  const eorigin = new URL(evilGrant.url()).origin;
  check(eorigin !== origin, 'each job\'s port has an origin of its own');
  await gotoRetrying(evilGrant, eorigin + '/evil.html#' + encodeURIComponent(URL0));
  await evilGrant.waitForFunction(() => document.getElementById('result').textContent !== 'running', null,
    { timeout: WAIT });
  const r = JSON.parse(await evilGrant.textContent('#result'));
  console.log('the job\'s page got: ' + JSON.stringify(r));
  const tok = process.env.GP_ALICE;
  check(!JSON.stringify(r).includes(tok), 'the job\'s page never saw the dashboard\'s token');
  check(r.session === '' && r.local === '', 'its storage is its own (empty)');
  check(!r.cookie.includes('gpupool_proxy'), 'it cannot read its proxy cookie');
  check(/^blocked/.test(r.whoami) && /^blocked/.test(r.jobs), 'it cannot read the API as the user');
  check(/^blocked/.test(r.window), 'it cannot read a dashboard window it opens');
  check(r.terminal === 'refused', 'it cannot open the dashboard\'s terminal socket');
  await evilGrant.screenshot({ path: SHOTS + '/evil-page.png' });
  // The request it sent blind carried no token: nothing was made.
  const jobs = await (await fetch(URL0 + '/v1/jobs?all=1', { headers: { Authorization: 'Bearer ' + tok } })).json();
  check(!jobs.jobs.some((j) => (j.command || []).includes('/tmp/pwned')), 'it could not submit a job as the user');
  // The proxy cookie of one job's port opens nothing on another's.
  const other = await ctx.newPage();
  const resp = await gotoRetrying(other, origin.replace(/-p8888\./, '-p8000.') + '/');
  check(resp.status() === 403, 'a port not signed in to is refused (' + resp.status() + ')');
  // ------------------------------------------- the dashboard's terminal
  await page.bringToFront();
  await gotoRetrying(page, URL0 + '/#/job/' + process.env.GP_EVIL);
  await page.waitForSelector('#open-terminal', { timeout: WAIT });
  await page.click('#open-terminal');
  await page.waitForSelector('#terminal-box .xterm-rows', { timeout: WAIT });
  await page.waitForFunction(() => /\$\s*$/m.test(document.querySelector('#terminal-box .xterm-rows').textContent) ||
    document.querySelector('#terminal-box .xterm-rows').textContent.includes('$'), null, { timeout: WAIT });
  await page.click('#terminal-box');
  await page.keyboard.type('echo T-$((6*7))-$(id -un)');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.querySelector('#terminal-box .xterm-rows').textContent.includes('T-42-nobody'),
    null, { timeout: WAIT });
  ok('the dashboard\'s terminal ran a typed command in the job and showed its output');
  await page.screenshot({ path: SHOTS + '/terminal.png' });
  console.log('all checks passed');
} finally {
  await browser.close();
}
