// tests/web/dashboard.test.mjs: the dashboard in a real browser (Debian's
// Chromium, driven by playwright-core), against the pool that
// tests/e2e/test_web_dashboard.sh started. Run by that script, with:
//   GP_URL      the coordinator's URL
//   GP_ALICE    alice's user token; GP_BOB, bob's
//   GP_BOB_JOB  a job of bob's (alice must not see it)
//   GP_ADMIN    an admin token (to submit the pool's other work)
//   GP_BOB_NODE the node bob's job runs on; GP_PROVIDER its provider's
//               token, GP_PROVIDER_NAME that provider's name
//   SHOTS       where the screenshots go
// Prints "ok: ..." per check; any failure throws (exit status 1).
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

async function api(token, method, path, body) {
  const r = await fetch(URL0 + path, {
    method, headers: { Authorization: 'Bearer ' + token, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
  return JSON.parse(text);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  // The flags this closed network needs (no background connections).
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});

// Every page is watched: no request leaves the coordinator's origin, no
// script error, no dialog (an injected alert would open one).
function watch(page, label) {
  const foreign = [];
  page.on('request', (req) => {
    if (!req.url().startsWith(URL0) && !req.url().startsWith('data:')) foreign.push(req.url());
  });
  page.on('pageerror', (e) => { throw new Error(`${label}: script error: ${e.message}`); });
  page.on('dialog', async (d) => {
    await d.dismiss();
    throw new Error(`${label}: a dialog opened: ${d.message()}`);
  });
  page.on('console', (m) => {
    if (m.type() === 'error' && !/the server responded with a status of 404/.test(m.text())) {
      console.log(`${label}: console error: ${m.text()}`);
    }
  });
  return foreign;
}

async function signIn(page, token) {
  await gotoRetrying(page, URL0 + '/');
  await page.waitForSelector('#login-form');
  await page.fill('#token', token);
  await page.click('#login-form button[type=submit]');
  await page.waitForSelector('.nodes .node', { timeout: WAIT });
}

try {
  // ---------------------------------------------------------------- desktop
  const desk = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await desk.newPage();
  const foreign = watch(page, 'desktop');

  const resp = await gotoRetrying(page, URL0 + '/');
  const csp = resp.headers()['content-security-policy'] || '';
  check(/default-src 'none'/.test(csp) && /script-src 'self'/.test(csp) &&
    /frame-ancestors 'none'/.test(csp), 'the page is served with a strict CSP');
  check(resp.headers()['x-content-type-options'] === 'nosniff', 'nosniff');

  // A wrong token is refused, and nothing is kept.
  await page.waitForSelector('#login-form');
  await page.fill('#token', 'gpt_' + 'x'.repeat(43));
  await page.click('#login-form button[type=submit]');
  await page.waitForFunction(() => document.querySelector('#login-error').textContent.length > 0);
  check(/not known/.test(await page.textContent('#login-error')), 'a wrong token is refused');
  check(await page.evaluate(() => sessionStorage.getItem('gpupool.token')) === null, 'a refused token is not kept');

  await page.fill('#token', process.env.GP_ALICE);
  await page.click('#login-form button[type=submit]');
  await page.waitForSelector('.nodes .node', { timeout: WAIT });
  check((await page.textContent('#who-name')).includes('alice (user)'), 'signed in as alice');
  check(await page.evaluate(() => sessionStorage.getItem('gpupool.token')) === process.env.GP_ALICE,
    'the token is in sessionStorage');
  check(await page.evaluate(() => document.cookie) === '' && (await desk.cookies()).length === 0, 'no cookie');

  // The pool: both nodes, every GPU, who uses the busy ones.
  await page.waitForFunction(() => document.querySelectorAll('.gpu.busy').length >= 2, null, { timeout: WAIT });
  const nodes = await page.$$eval('.node', (ns) => ns.map((n) => n.dataset.node));
  check(nodes.includes('alpha') && nodes.includes('beta'), 'the pool shows both nodes');
  check(await page.$$eval('.gpu', (gs) => gs.length) === 3, 'the pool shows all 3 GPUs');
  const who = await page.$$eval('.gpu.busy .gpu-who', (ws) => ws.map((w) => w.textContent));
  check(who.some((w) => /job \d+ · admin/.test(w)) && who.some((w) => /· bob/.test(w)),
    'busy GPUs name their job and its user: ' + who.join(' | '));
  await page.waitForFunction(() => [...document.querySelectorAll('.gpu.busy .meter-label')]
    .some((m) => /util [1-9]\d*%/.test(m.textContent)), null, { timeout: WAIT });
  ok('a busy GPU shows its utilization');
  await page.screenshot({ path: `${SHOTS}/dashboard-pool.png`, fullPage: true });

  // Submit through the form (the API), and watch the job to its end.
  await page.click('a[href="#/jobs"]');
  await page.waitForSelector('#submit-form');
  await page.fill('#f-command', 'for i in 1 2 3 4 5 6; do echo "step $i of 6"; sleep 1; done');
  await page.fill('#f-name', 'steps');
  await page.fill('#f-gpus', '1');
  await page.fill('#f-time', '10m');
  await page.click('#submit-form button[type=submit]');
  await page.waitForURL(/#\/job\/\d+$/, { timeout: WAIT });
  const jobId = page.url().split('/').pop();
  ok('submitted job ' + jobId + ' from the form');
  await page.waitForFunction(() => /step 2 of 6/.test(document.querySelector('#log').textContent), null, { timeout: WAIT });
  check(!/step 6 of 6/.test(await page.textContent('#log')), 'the log is followed live (step 2 before the end)');
  await page.waitForSelector('.gpu.busy .spark', { timeout: WAIT });
  ok('the running job shows its GPU use');
  await page.waitForSelector('.tl-seg.tl-att.tl-running', { timeout: WAIT });
  ok('the timeline shows the running attempt');
  await page.screenshot({ path: `${SHOTS}/dashboard-job-running.png`, fullPage: true });
  await page.waitForSelector('h1 .badge.st-succeeded', { timeout: WAIT });
  ok('the page shows the job succeeded');
  await page.waitForFunction(() => document.querySelector('#log-state').textContent === 'complete', null, { timeout: WAIT });
  const log = await page.textContent('#log');
  check(/step 1 of 6[\s\S]*step 6 of 6/.test(log), 'the whole log, in order');
  await page.waitForSelector('.tl-seg.tl-att.tl-ok', { timeout: WAIT });
  ok('the timeline shows the finished attempt');
  const job = await api(process.env.GP_ALICE, 'GET', '/v1/jobs/' + jobId);
  check(job.state === 'succeeded' && job.user === 'alice' && job.request.time_limit_s === 600,
    'the API agrees: alice\'s job, succeeded, 10m limit');
  // Its network bytes, as the API has them (issue 14).
  const facts = await page.textContent('.facts');
  check(typeof job.net_sent_bytes === 'number' &&
    facts.includes('Network') && / sent · .* received/.test(facts),
    'the job page shows the bytes its network sent and received');
  await page.screenshot({ path: `${SHOTS}/dashboard-job.png`, fullPage: true });

  // A job with markup in its command and output: shown as text.
  const xss = await api(process.env.GP_ALICE, 'POST', '/v1/jobs',
    { command: ['sh', '-c', 'echo "<img src=x onerror=alert(1)><b>bold</b>"'], gpus: 0 });
  await gotoRetrying(page, `${URL0}/#/job/${xss.id}`);
  await page.waitForFunction(() => /<img src=x/.test(document.querySelector('#log').textContent), null, { timeout: WAIT });
  check(await page.$$eval('main img, main b', (e) => e.length) === 0, 'markup in a command and its log stays text');

  // The queue and the jobs list: alice's jobs only.
  await page.click('a[href="#/queue"]');
  await page.waitForSelector('table');
  await page.click('a[href="#/jobs"]');
  await page.waitForSelector(`tr[data-job="${jobId}"]`, { timeout: WAIT });
  const listed = await page.$$eval('tr[data-job]', (rs) => rs.map((r) => r.dataset.job));
  check(!listed.includes(process.env.GP_BOB_JOB), 'alice does not see bob\'s job in her list');
  await gotoRetrying(page, `${URL0}/#/job/${process.env.GP_BOB_JOB}`);
  await page.waitForSelector('main .error');
  check(/not one of yours/.test(await page.textContent('main .error')), 'bob\'s job page is refused to alice');

  // A node's page: what it lends and lent.
  await gotoRetrying(page, `${URL0}/#/node/alpha`);
  await page.waitForFunction(() => /GPU-h/.test(document.querySelector('main').textContent), null, { timeout: WAIT });
  ok('the node page shows the GPU time it lent');
  await page.screenshot({ path: `${SHOTS}/dashboard-node.png`, fullPage: true });

  // The queue as an admin: every running and queued job (a 2-GPU job
  // waits: no node has 2 free GPUs while the long jobs run).
  const big = await api(process.env.GP_ADMIN, 'POST', '/v1/jobs', { command: ['sleep', '600'], gpus: 2, name: 'big' });
  ok('job ' + big.id + ' (2 GPUs) waits in the queue');
  await page.click('#signout');
  await page.waitForSelector('#login-form');
  check(await page.evaluate(() => sessionStorage.getItem('gpupool.token')) === null, 'sign out forgets the token');
  await signIn(page, process.env.GP_ADMIN);
  await page.click('a[href="#/queue"]');
  await page.waitForFunction(() => document.querySelectorAll('tr[data-job]').length >= 3, null, { timeout: WAIT });
  const queued = await page.$$eval('tr[data-job] .st-queued', (e) => e.length);
  check(queued >= 1, 'the admin sees the queue with the waiting job');
  // Why it waits: the scheduler's reason when the API gives one ("wait"),
  // else its state.
  const bigJob = await api(process.env.GP_ADMIN, 'GET', '/v1/jobs/' + big.id);
  const want = (bigJob.wait && bigJob.wait.reason) || (bigJob.hold_reason ? 'held' : bigJob.state);
  await page.waitForFunction((id) => document.querySelector(`tr[data-job="${id}"] td.wait`), big.id, { timeout: WAIT });
  const shown = await page.$eval(`tr[data-job="${big.id}"] td.wait`, (td) => td.dataset.reason);
  check(shown === want, `the queue says why job ${big.id} waits: ${shown} (the API: ${want})`);
  await page.screenshot({ path: `${SHOTS}/dashboard-queue.png`, fullPage: true });
  // The same page given the scheduler's explanation (the "wait" object of
  // live scheduling, added here to the coordinator's real answer): its
  // reason, why, and expected start are shown, in the scheduler's order.
  const start = new Date(Date.now() + 3600000).toISOString();
  await page.route('**/v1/jobs', async (route) => {
    const r = await route.fetch();
    const body = await r.json();
    for (const j of body.jobs) {
      if (j.state === 'queued') {
        j.wait = { reason: 'resources', why: 'no node has 2 free GPUs', position: 1, expected_start: start };
      }
    }
    await route.fulfill({ response: r, json: body });
  });
  // (the live scheduler's own "wait" may be shown already: wait for the
  // page to render the routed answer's)
  await page.waitForFunction((id) => {
    const td = document.querySelector(`tr[data-job="${id}"] td.wait`);
    return td && td.dataset.reason === 'resources' &&
      /no node has 2 free GPUs/.test(td.textContent);
  }, big.id, { timeout: WAIT });
  const why = await page.textContent(`tr[data-job="${big.id}"] td.wait`);
  check(/no node has 2 free GPUs/.test(why) && /expected to start/.test(why),
    'with the scheduler\'s "wait", the queue shows its reason, why and expected start: ' + why);
  await page.unroute('**/v1/jobs');

  // A provider's page, from the ledger: the admin sees what the provider
  // of bob's node lent and earned (accruals every second), as the API says.
  const PROV = process.env.GP_PROVIDER_NAME;
  await page.click('a[href="#/pool"]');
  await page.waitForSelector(`.node[data-node="${process.env.GP_BOB_NODE}"] a.provider-link`, { timeout: WAIT });
  await page.click(`.node[data-node="${process.env.GP_BOB_NODE}"] a.provider-link`);
  await page.waitForURL(new RegExp('#/provider/' + PROV + '$'), { timeout: WAIT });
  ok('a node card links to its provider\'s page');
  await page.waitForFunction(() => Number((document.querySelector('#earned') || {}).dataset?.micro) > 0,
    null, { timeout: WAIT });
  const earned = Number(await page.$eval('#earned', (e) => e.dataset.micro));
  const lent = Number(await page.$eval('#lent', (e) => e.dataset.gpuMs));
  const usage = await api(process.env.GP_ADMIN, 'GET', '/v1/usage?provider=' + PROV);
  const apiEarned = usage.providers.filter((x) => x.provider === PROV).reduce((a, x) => a + x.earned_micro, 0);
  const apiLent = usage.providers.filter((x) => x.provider === PROV).reduce((a, x) => a + x.gpu_ms, 0);
  check(earned > 0 && lent > 0 && earned <= apiEarned && lent <= apiLent,
    `the provider page shows what ${PROV} earned (${earned} µcr, API now ${apiEarned}) and lent (${lent} GPU-ms)`);
  await page.waitForSelector('tr[data-user="bob"]', { timeout: WAIT });
  ok('the provider page names bob among who used its GPUs');
  check(await page.$$eval('tr[data-posting]', (r) => r.length) >= 1, 'the provider page lists its latest postings');
  check((await page.textContent('#provider')).includes(process.env.GP_BOB_NODE), 'the provider page lists its node');
  await page.screenshot({ path: `${SHOTS}/dashboard-provider.png`, fullPage: true });

  // The provider itself: its own page from the nav; another's is refused.
  await page.click('#signout');
  await page.waitForSelector('#login-form');
  await signIn(page, process.env.GP_PROVIDER);
  await page.click('#nav-provider');
  await page.waitForURL(new RegExp('#/provider/' + PROV + '$'), { timeout: WAIT });
  await page.waitForFunction(() => Number((document.querySelector('#earned') || {}).dataset?.micro) > 0,
    null, { timeout: WAIT });
  ok('the provider sees its own earnings from the nav');
  const other = PROV === 'prov-alpha' ? 'prov-beta' : 'prov-alpha';
  await gotoRetrying(page, `${URL0}/#/provider/${other}`);
  await page.waitForSelector('#provider .error', { timeout: WAIT });
  check(/only what it was paid/.test(await page.textContent('#provider .error')),
    'another provider\'s page is refused to a provider');
  // A user sees only what they paid that provider.
  await page.click('#signout');
  await page.waitForSelector('#login-form');
  await signIn(page, process.env.GP_ALICE);
  check(await page.isHidden('#nav-provider'), 'a user has no earnings page in the nav');
  await gotoRetrying(page, `${URL0}/#/provider/${PROV}`);
  await page.waitForSelector('#earned', { timeout: WAIT });
  const users = await page.$$eval('tr[data-user]', (r) => r.map((x) => x.dataset.user));
  check(users.every((u) => u === 'alice') && /What you paid/.test(await page.textContent('#provider-scope')),
    'a user sees only what they paid the provider: ' + (users.join(' ') || 'nothing'));
  check(foreign.length === 0, 'no request left the coordinator: ' + foreign.join(' '));

  // ---------------------------------------------------------------- phone
  const phone = await browser.newContext({
    viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true,
  });
  const p2 = await phone.newPage();
  const foreign2 = watch(p2, 'phone');
  await signIn(p2, process.env.GP_ALICE);
  const overflow = await p2.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  check(overflow <= 0, 'the pool fits a phone\'s width (overflow ' + overflow + 'px)');
  await p2.screenshot({ path: `${SHOTS}/dashboard-phone-pool.png`, fullPage: true });
  await gotoRetrying(p2, `${URL0}/#/job/${jobId}`);
  await p2.waitForSelector('h1 .badge.st-succeeded', { timeout: WAIT });
  await p2.waitForFunction(() => /step 6 of 6/.test(document.querySelector('#log').textContent), null, { timeout: WAIT });
  const overflow2 = await p2.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  check(overflow2 <= 0, 'a job page fits a phone\'s width (overflow ' + overflow2 + 'px)');
  await p2.screenshot({ path: `${SHOTS}/dashboard-phone-job.png`, fullPage: true });
  check(foreign2.length === 0, 'no request left the coordinator (phone)');
  console.log('all checks passed');
} finally {
  await browser.close();
}
