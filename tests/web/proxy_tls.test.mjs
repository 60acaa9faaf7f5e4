// tests/web/proxy_tls.test.mjs: the job port proxy over TLS in a real
// browser (Debian's Chromium, driven by playwright-core), against the
// pool tests/e2e/test_interactive_proxy_tls.sh started. The pool's CA is
// in the NSS database of $HOME (certutil): Chromium verifies the proxy's
// certificate for the job's host itself (no ignoreHTTPSErrors). Run with:
//   GP_LINK   a sign-in link https://jJOB-pPORT.DOMAIN:PORT/_gpupool/login#CODE
//   GP_PAGE   the text the job's page shows
// Prints "ok: ..." per check and "all checks passed"; a failure throws.
import { chromium } from 'playwright-core';
import { gotoRetrying } from './nav.mjs';

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
try {
  const ctx = await browser.newContext();
  const page = await ctx.newPage();
  const link = process.env.GP_LINK;
  const origin = new URL(link).origin;
  // What failed, if a request of the page did (said with a retry below).
  const failures = [];
  page.on('requestfailed', (r) => failures.push(r.url().replace(/[?#].*/, '') +
    ': ' + ((r.failure() && r.failure().errorText) || 'failed')));
  await gotoRetrying(page, link);
  const signedIn = (u) => !u.pathname.startsWith('/_gpupool');
  try {
    await page.waitForURL(signedIn, { timeout: WAIT / 3, waitUntil: 'commit' });
  } catch (e) {
    // Seen once in a loaded full-suite run: the sign-in's grant was
    // logged, and the page's navigation to / never reached the proxy.
    // Load / once more (the cookie is set by then) and say so; a second
    // failure fails the test. The coordinator's log (debug) says how
    // each connection that brought no request ended.
    console.log('retry: the navigation after sign-in did not commit (at ' +
      page.url() + '): ' + String(e && e.message).split('\n')[0] +
      (failures.length > 0 ? '; failed requests: ' + failures.join(', ') : '') +
      '; loading / again');
    await gotoRetrying(page, origin + '/', { timeout: WAIT, waitUntil: 'commit' });
    await page.waitForURL(signedIn, { timeout: WAIT, waitUntil: 'commit' });
  }
  await page.waitForLoadState('domcontentloaded');
  check(page.url().startsWith(origin + '/') && origin.startsWith('https://'),
    'signed in over HTTPS, the certificate verified: ' + page.url());
  check((await page.textContent('body')).includes(process.env.GP_PAGE), 'the job\'s page over TLS');
  const cookies = (await ctx.cookies(origin)).filter((c) => c.name === 'gpupool_proxy');
  check(cookies.length === 1 && cookies[0].secure && cookies[0].httpOnly &&
    cookies[0].domain === new URL(origin).hostname, 'the proxy cookie: Secure, HttpOnly, host-only');
  // A WebSocket through the proxy (wss://), echoed by the job.
  const echoed = await page.evaluate(async () => {
    const ws = new WebSocket(`wss://${location.host}/ws`);
    return await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no echo')), 30000);
      ws.onerror = () => reject(new Error('websocket error'));
      ws.onopen = () => ws.send('from chromium');
      ws.onmessage = (ev) => { clearTimeout(timer); ws.close(); resolve(ev.data); };
    });
  });
  check(echoed === 'from chromium', 'a wss:// WebSocket through the proxy: ' + echoed);
  console.log('all checks passed');
} finally {
  await browser.close();
}
