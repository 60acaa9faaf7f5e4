// web/app.js: the gpupool dashboard, a small single-page app with no
// dependencies, embedded in the coordinator's binary. It signs in with an
// API token (kept in sessionStorage, sent as a bearer header; no cookie,
// so nothing a third-party page could ride on), and shows only what the
// public API shows that token: the pool (every node and GPU, and who uses
// each), the running jobs and the queue with the reason each job waits, a
// job's attempts on a timeline with its live log and its GPUs' use, a
// node's page with what it lent, and a provider's page with what it lent
// and earned (from the ledger: GET /v1/usage and /v1/ledger, narrowed by
// the coordinator to what the token may see, as for the CLI). Every text
// from the API is inserted as text, never as markup.
'use strict';

(() => {
  const TOKEN_KEY = 'gpupool.token';
  const main = document.getElementById('main');
  const statusEl = document.getElementById('status');
  let me = null;          // GET /v1/whoami
  let view = null;        // { stop() } of the current view
  let viewSeq = 0;

  // ---- helpers ----

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  // el('div', {class: 'x', onclick: f}, 'text', child...): a new element.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else if (k === 'text') e.textContent = v;
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  const SVG = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs, ...children) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    for (const c of children.flat()) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function token() {
    return sessionStorage.getItem(TOKEN_KEY);
  }

  // Several coordinators, one leader (docs/operations.md): a standby
  // answers 503 with X-Gpupool-Role: standby and the leader's URL in
  // X-Gpupool-Leader. The dashboard then goes to the leader's own
  // dashboard (the token stays in this origin's session: sign in there);
  // a leader naming itself is still loading: the next refresh retries.
  // The pool's coordinators come from the coordinator itself (GET
  // /v1/coordinators: those the pool's database lists, each by the URL it
  // advertises), asked once signed in and every COORDS_MS, and kept in
  // this tab's session: when the one it shows stops answering (the leader
  // died), it goes to another of those, saying which one was down
  // (?down=), so that one is not followed back to while the others still
  // name it. Never to one the page's address names: a link's ?peers= (as
  // older dashboards carried) could send the tab to any site.
  const COORDS_KEY = 'gpupool.coordinators', DOWN_KEY = 'gpupool.down';
  const COORDS_MS = 15000;  // how often the list is asked again
  const DOWN_MS = 60000;    // how long a coordinator that died is not followed
  const UNREACHABLE = 2;    // failed calls in a row before going elsewhere
  let goingToLeader = false;
  let unreachable = 0;

  function httpOrigin(text) {
    try {
      const u = new URL(text);
      return u.protocol === 'http:' || u.protocol === 'https:' ? u.origin : null;
    } catch (e) { return null; }
  }
  // The other coordinators the pool listed (origins).
  function peers() {
    try {
      const p = JSON.parse(sessionStorage.getItem(COORDS_KEY) || '[]');
      return Array.isArray(p) ? p.filter((o) => httpOrigin(o) === o && o !== location.origin) : [];
    } catch (e) { return []; }
  }
  function downOrigin() {
    try {
      const d = JSON.parse(sessionStorage.getItem(DOWN_KEY) || 'null');
      return d && typeof d.origin === 'string' && d.until > Date.now() ? d.origin : null;
    } catch (e) { return null; }
  }
  // Which coordinator the one that sent us here found down (not
  // followed for DOWN_MS; nothing is ever gone to from the address), then
  // the query is dropped from the URL.
  (() => {
    const q = new URLSearchParams(location.search);
    if (!q.has('peers') && !q.has('down')) return;
    const down = httpOrigin(q.get('down') || '');
    if (down) sessionStorage.setItem(DOWN_KEY, JSON.stringify({ origin: down, until: Date.now() + DOWN_MS }));
    history.replaceState(null, '', location.pathname + location.hash);
  })();

  // Asks the coordinator for the pool's coordinators (signed in).
  let coordsAsked = 0;
  async function askCoordinators() {
    if (!token() || Date.now() - coordsAsked < COORDS_MS / 2) return;
    coordsAsked = Date.now();
    try {
      const r = await api('/v1/coordinators');
      const list = ((r && r.coordinators) || []).map((c) => httpOrigin(c.url)).filter((o) => o);
      sessionStorage.setItem(COORDS_KEY, JSON.stringify([...new Set(list)]));
    } catch (e) { /* kept as it was; asked again later */ }
  }
  setInterval(askCoordinators, COORDS_MS);

  // Goes to ORIGIN's dashboard (one the pool listed, or the leader a
  // standby named), the same page, saying which one was down.
  function goTo(origin, why, down) {
    goingToLeader = true;
    setStatus(why, true);
    const q = down ? '?' + new URLSearchParams({ down }) : '';
    setTimeout(() => location.assign(origin + location.pathname + q + location.hash), 1500);
  }

  function followLeader(leader) {
    const o = httpOrigin(leader);
    if (!o || o === location.origin || goingToLeader) return;
    if (o === downOrigin()) {
      setStatus('The leader ' + o + ' stopped answering; waiting for another to lead', true);
      return;
    }
    goTo(o, 'This coordinator is a standby: going to the leader at ' + o);
  }

  // This coordinator did not answer (a network error): after UNREACHABLE
  // in a row, to another one the pool listed.
  function unreachableNow() {
    const next = peers().find((o) => o !== downOrigin());
    if (++unreachable < UNREACHABLE || !next || goingToLeader) return;
    goTo(next, 'This coordinator stopped answering: going to ' + next, location.origin);
  }

  // Before signing in: is this one a standby? (No token is sent: a
  // standby answers 503 naming the leader, a leader 401.)
  async function probeLeader() {
    try {
      const r = await fetch('/v1/whoami', { cache: 'no-store', credentials: 'omit', redirect: 'error' });
      const leader = r.headers.get('X-Gpupool-Leader');
      if (r.status === 503 && r.headers.get('X-Gpupool-Role') === 'standby' && leader) followLeader(leader);
    } catch (e) {
      unreachableNow();
    }
  }

  // One API call with the session's token. opts: method, body (JSON),
  // raw (return the Response), signal.
  async function api(path, opts = {}) {
    const headers = { Authorization: 'Bearer ' + (opts.token || token() || '') };
    let body;
    if (opts.body !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = JSON.stringify(opts.body);
    }
    let r;
    try {
      r = await fetch(path, {
        method: opts.method || 'GET', headers, body, signal: opts.signal,
        cache: 'no-store', credentials: 'omit', redirect: 'error',
      });
    } catch (e) {
      if (e.name !== 'AbortError') unreachableNow();
      throw e;
    }
    unreachable = 0;
    if (r.status === 503 && r.headers.get('X-Gpupool-Role') === 'standby') {
      const leader = r.headers.get('X-Gpupool-Leader');
      if (leader) followLeader(leader);
      throw new ApiError(503, leader ? 'not the leader: the leader is ' + leader
        : 'no coordinator leads yet; retrying');
    }
    if (r.status === 401 && !opts.token) {
      signOut('Your token was not accepted (revoked?). Sign in again.');
      throw new ApiError(401, 'not signed in');
    }
    if (opts.raw && r.ok) return r;
    const text = await r.text();
    let data = null;
    try { data = JSON.parse(text); } catch (e) { data = null; }
    if (!r.ok) throw new ApiError(r.status, (data && data.error) || r.statusText);
    return data;
  }

  function setStatus(text, isError) {
    statusEl.textContent = text;
    statusEl.className = isError ? 'error' : '';
  }

  function updated() {
    setStatus('Updated ' + new Date().toLocaleTimeString());
  }

  function fmtMib(mib) {
    if (mib === null || mib === undefined) return '-';
    if (mib >= 1024 * 1024) return (mib / 1048576).toFixed(1).replace(/\.0$/, '') + 'T';
    if (mib >= 1024) return (mib / 1024).toFixed(1).replace(/\.0$/, '') + 'G';
    return mib + 'M';
  }

  // Bytes in binary units: "0 B", "10.5 KiB", "3.2 GiB".
  function fmtBytes(n) {
    if (typeof n !== 'number') return '-';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i === 0 ? String(n) : n.toFixed(1).replace(/\.0$/, '')) + ' ' + units[i];
  }

  function fmtDuration(ms) {
    if (ms === null || ms === undefined || ms < 0) return '-';
    let s = Math.floor(ms / 1000);
    const d = Math.floor(s / 86400), h = Math.floor(s / 3600) % 24;
    const m = Math.floor(s / 60) % 60;
    s %= 60;
    const p = (n) => String(n).padStart(2, '0');
    if (d > 0) return `${d}d ${p(h)}:${p(m)}:${p(s)}`;
    if (h > 0) return `${h}:${p(m)}:${p(s)}`;
    if (m > 0) return `${m}:${p(s)}`;
    return `${s}s`;
  }

  function fmtTime(iso) {
    if (!iso) return '-';
    const d = new Date(iso);
    return isNaN(d) ? iso : d.toLocaleString();
  }

  const ms = (iso) => (iso ? Date.parse(iso) : null);

  // Micro-credits as credits: up to 6 decimals, no trailing zeros.
  function fmtCredits(micro) {
    if (micro === null || micro === undefined) return '-';
    const c = Number(micro) / 1e6;
    return (Math.abs(c) >= 1000 ? c.toFixed(2) : String(Number(c.toFixed(6)))) + ' cr';
  }

  // Share-weighted GPU-milliseconds: GPU-seconds under an hour, else GPU-h.
  function fmtGpuTime(gpuMs) {
    if (gpuMs === null || gpuMs === undefined) return '-';
    return gpuMs < 3600000 ? (gpuMs / 1000).toFixed(1) + ' GPU-s'
      : (gpuMs / 3600000).toFixed(2) + ' GPU-h';
  }

  // Why a queued job waits: the scheduler's "wait" object when the
  // coordinator gives one ({reason, why, position, expected_start}), else
  // what the job itself says (a budget hold, or just queued).
  function waitInfo(j) {
    const w = j.wait;
    if (w && typeof w === 'object' && w.reason) {
      return { reason: String(w.reason), why: w.why ? String(w.why) : '',
        position: Number.isInteger(w.position) ? w.position : null,
        expected: w.expected_start || null };
    }
    if (j.hold_reason) return { reason: 'held', why: String(j.hold_reason), position: null, expected: null };
    return { reason: j.state, why: '', position: null, expected: null };
  }

  function badge(state) {
    return el('span', { class: 'badge st-' + String(state).replace(/[^a-z_]/g, '') }, state);
  }

  // A horizontal bar for a fraction (0..1) with a label.
  function meter(frac, label, kind) {
    const f = Math.max(0, Math.min(1, Number(frac) || 0));
    const fill = el('span', { class: 'fill' + (kind ? ' ' + kind : '') });
    fill.style.width = (f * 100).toFixed(1) + '%';
    return el('span', { class: 'meter', role: 'img', 'aria-label': label },
      fill, el('span', { class: 'meter-label' }, label));
  }

  function jobLink(id, text) {
    return el('a', { href: '#/job/' + encodeURIComponent(id) }, text || String(id));
  }

  function nodeLink(name) {
    return name ? el('a', { href: '#/node/' + encodeURIComponent(name) }, name) : '-';
  }

  function providerLink(name) {
    return name ? el('a', { href: '#/provider/' + encodeURIComponent(name), class: 'provider-link' }, name) : '-';
  }

  function table(headers, rows, cls) {
    return el('div', { class: 'table-wrap' },
      el('table', { class: cls || '' },
        el('thead', {}, el('tr', {}, headers.map((h) => el('th', {}, h)))),
        el('tbody', {}, rows.length ? rows : [el('tr', {}, el('td', { colspan: headers.length, class: 'empty' }, 'none'))])));
  }

  // Runs fn now and every ms while the view lives; errors go to the footer.
  function every(ctx, msInterval, fn) {
    let timer = null;
    const tick = async () => {
      try {
        await fn();
        if (!ctx.stopped) updated();
      } catch (e) {
        if (!ctx.stopped && e.name !== 'AbortError' && !goingToLeader) setStatus(String(e.message || e), true);
      }
      if (!ctx.stopped) timer = setTimeout(tick, msInterval);
    };
    ctx.onStop.push(() => clearTimeout(timer));
    tick();
  }

  function newContext() {
    const ctx = { stopped: false, onStop: [], seq: ++viewSeq, abort: new AbortController() };
    ctx.stop = () => {
      ctx.stopped = true;
      ctx.abort.abort();
      ctx.onStop.forEach((f) => f());
    };
    return ctx;
  }

  // ---- sign in ----

  function signOut(message) {
    sessionStorage.removeItem(TOKEN_KEY);
    me = null;
    if (location.hash !== '#/login') location.hash = '#/login';
    else route();
    if (message) setStatus(message, true);
  }

  function viewLogin() {
    const input = el('input', {
      id: 'token', type: 'password', name: 'token', autocomplete: 'off',
      spellcheck: 'false', placeholder: 'gpt_…', required: true,
    });
    const err = el('p', { class: 'error', id: 'login-error', role: 'alert' });
    const form = el('form', { class: 'card login', id: 'login-form' },
      el('h1', {}, 'Sign in to the pool'),
      el('p', {}, 'Paste your API token (the one `gpupool token create` printed, or the token ',
        'line of your CLI config). It stays in this tab only, until you sign out or close it.'),
      el('label', { for: 'token' }, 'Token'), input,
      el('button', { type: 'submit', class: 'primary' }, 'Sign in'), err);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      err.textContent = '';
      const t = input.value.trim();
      try {
        me = await api('/v1/whoami', { token: t });
        sessionStorage.setItem(TOKEN_KEY, t);
        // The page the URL names (one that sent us here from another
        // coordinator kept it), else the pool; the same hash is no
        // hashchange, so route() is called for it.
        if (location.hash && location.hash !== '#/login') route();
        else location.hash = '#/pool';
      } catch (e) {
        err.textContent = e.status === 401 ? 'This token is not known to the pool.'
          : 'Cannot sign in: ' + e.message;
      }
    });
    main.replaceChildren(form);
    input.focus();
    return { stop() {} };
  }

  // ---- the pool ----

  function summarise(nodes, jobs) {
    const s = { up: 0, nodes: nodes.length, busy: 0, idle: 0, unlent: 0, down: 0, running: 0, queued: 0 };
    for (const n of nodes) {
      const live = n.state === 'up' || n.state === 'paused';
      if (n.state === 'up') s.up++;
      for (const g of n.gpus) {
        if (!live) s.down++;
        else if (g.job !== null && g.job !== undefined) s.busy++;
        else if (n.state === 'paused' || !g.lent) s.unlent++;
        else s.idle++;
      }
    }
    for (const j of jobs) {
      if (j.state === 'running') s.running++;
      if (j.state === 'queued') s.queued++;
    }
    return s;
  }

  function card(title, value, sub) {
    return el('div', { class: 'card stat' }, el('div', { class: 'stat-title' }, title),
      el('div', { class: 'stat-value' }, value), sub ? el('div', { class: 'stat-sub' }, sub) : null);
  }

  function gpuRow(node, g) {
    const live = node.state === 'up' || node.state === 'paused';
    const busy = g.job !== null && g.job !== undefined;
    const used = live ? g.mem_used_mib : null;
    return el('li', { class: 'gpu' + (busy ? ' busy' : ''), 'data-gpu': g.index },
      el('div', { class: 'gpu-head' },
        el('strong', {}, 'GPU ' + g.index), ' ', el('span', { class: 'muted' }, g.model + ' · ' + fmtMib(g.mem_mib)),
        el('span', { class: 'gpu-who' }, busy
          ? [jobLink(g.job, 'job ' + g.job), g.user ? ' · ' + g.user : '']
          : (live && !g.lent ? 'not lent' : live ? 'free' : 'down'))),
      live ? el('div', { class: 'gpu-meters' },
        meter(g.util / 100, 'util ' + g.util + '%', 'util'),
        meter(g.mem_mib ? used / g.mem_mib : 0, 'mem ' + fmtMib(used) + '/' + fmtMib(g.mem_mib), 'mem'),
        el('span', { class: 'sensors muted' },
          (g.temp_c !== null && g.temp_c !== undefined ? g.temp_c + '°C' : ''),
          (g.power_mw !== null && g.power_mw !== undefined ? ' · ' + Math.round(g.power_mw / 1000) + ' W' : ''))) : null);
  }

  function nodeCard(n) {
    return el('section', { class: 'card node', 'data-node': n.name },
      el('div', { class: 'node-head' },
        el('h3', {}, nodeLink(n.name)), badge(n.state),
        el('span', { class: 'muted' }, 'lent by ', providerLink(n.owner))),
      n.gpus.length ? el('ul', { class: 'gpus' }, n.gpus.map((g) => gpuRow(n, g)))
        : el('p', { class: 'muted' }, 'no GPU'));
  }

  function viewPool() {
    const ctx = newContext();
    const head = el('div', { class: 'stats' });
    const grid = el('div', { class: 'nodes' });
    main.replaceChildren(el('h1', {}, 'The pool'), head, el('h2', {}, 'Nodes and GPUs'), grid);
    every(ctx, 3000, async () => {
      const [nr, jr] = await Promise.all([api('/v1/nodes', { signal: ctx.abort.signal }),
        api('/v1/jobs', { signal: ctx.abort.signal })]);
      if (ctx.stopped) return;
      const s = summarise(nr.nodes, jr.jobs);
      const mine = me.role === 'admin' ? 'Jobs' : me.role === 'provider' ? 'Jobs on your nodes' : 'Your jobs';
      head.replaceChildren(
        card('Nodes up', `${s.up} / ${s.nodes}`),
        card('GPUs busy', String(s.busy), `${s.idle} free · ${s.unlent} not lent · ${s.down} down`),
        card(mine + ' running', String(s.running)),
        card(mine + ' queued', String(s.queued)));
      grid.replaceChildren(...(nr.nodes.length ? nr.nodes.map(nodeCard)
        : [el('p', { class: 'muted' }, 'No node has joined the pool yet.')]));
    });
    return ctx;
  }

  // ---- the queue and the jobs ----

  function jobRow(j, now, withPos, pos) {
    const started = ms(j.started_at), submitted = ms(j.submitted_at), finished = ms(j.finished_at);
    const t = j.state === 'queued' ? now - submitted
      : started ? (finished || now) - started : null;
    const w = withPos ? waitInfo(j) : null;
    return el('tr', { 'data-job': j.id },
      withPos ? el('td', { class: 'num' }, String(pos)) : null,
      el('td', { class: 'num' }, jobLink(j.id)), el('td', {}, j.name), el('td', {}, j.user),
      el('td', {}, badge(j.cancel_requested && j.state === 'running' ? 'cancelling' : j.state)),
      withPos ? null : el('td', {}, nodeLink(j.node)),
      el('td', { class: 'num' }, String(j.request ? j.request.gpus : '-')),
      el('td', { class: 'num' }, fmtDuration(t)),
      withPos ? el('td', { class: 'wait', 'data-reason': w.reason },
        el('span', { class: 'reason' }, w.reason), w.why ? el('span', { class: 'why muted' }, w.why) : null,
        w.expected ? el('span', { class: 'why muted' }, 'expected to start ' + fmtTime(w.expected)) : null) : null);
  }

  function viewQueue() {
    const ctx = newContext();
    const running = el('div'), queued = el('div');
    main.replaceChildren(el('h1', {}, 'Running and queued'),
      el('h2', {}, 'Running'), running, el('h2', {}, 'Queue'),
      el('p', { class: 'muted' }, 'In the order the scheduler considers them.'), queued);
    every(ctx, 3000, async () => {
      const r = await api('/v1/jobs', { signal: ctx.abort.signal });
      if (ctx.stopped) return;
      const now = Date.now();
      running.replaceChildren(table(['ID', 'Name', 'User', 'State', 'Node', 'GPUs', 'Running for'],
        r.jobs.filter((j) => j.state === 'running').map((j) => jobRow(j, now))));
      // The scheduler's order when it gives one (wait.position), else the
      // coordinator's.
      const q = r.jobs.filter((j) => j.state === 'queued').map((j, i) => ({ j, i, w: waitInfo(j) }));
      q.sort((a, b) => (a.w.position ?? Infinity) - (b.w.position ?? Infinity) || a.i - b.i);
      queued.replaceChildren(table(['#', 'ID', 'Name', 'User', 'State', 'GPUs', 'Waiting', 'Why'],
        q.map((x, k) => jobRow(x.j, now, true, x.w.position ?? k + 1))));
    });
    return ctx;
  }

  // "90m", "2h", "1:30:00", "45" (minutes) to seconds; null when empty.
  function parseDuration(text) {
    const t = text.trim();
    if (!t) return null;
    let m = /^(\d+)([smhd]?)$/.exec(t);
    if (m) return Number(m[1]) * ({ s: 1, m: 60, h: 3600, d: 86400, '': 60 })[m[2]];
    m = /^(\d+):(\d{2}):(\d{2})$/.exec(t);
    if (m) return Number(m[1]) * 3600 + Number(m[2]) * 60 + Number(m[3]);
    throw new Error('time limit: like 90m, 2h or 1:30:00');
  }

  function submitForm() {
    const cmd = el('input', { id: 'f-command', name: 'command', required: true, placeholder: 'python3 train.py --epochs 3', spellcheck: 'false' });
    const name = el('input', { id: 'f-name', name: 'name', placeholder: 'train', pattern: '[A-Za-z0-9._-]{1,64}' });
    const gpus = el('input', { id: 'f-gpus', name: 'gpus', type: 'number', min: 0, max: 64, value: 1 });
    const time = el('input', { id: 'f-time', name: 'time', placeholder: '1h' });
    const err = el('p', { class: 'error', role: 'alert' });
    const form = el('form', { class: 'card submit', id: 'submit-form' },
      el('h2', {}, 'Submit a job'),
      el('div', { class: 'fields' },
        el('label', { class: 'wide' }, 'Command (run with sh -c)', cmd),
        el('label', {}, 'Name', name), el('label', {}, 'GPUs', gpus),
        el('label', {}, 'Time limit', time)),
      el('button', { type: 'submit', class: 'primary' }, 'Submit'), err);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      err.textContent = '';
      try {
        const body = { command: ['sh', '-c', cmd.value], gpus: Number(gpus.value) };
        if (name.value.trim()) body.name = name.value.trim();
        const limit = parseDuration(time.value);
        if (limit !== null) body.time_limit_s = limit;
        const r = await api('/v1/jobs', { method: 'POST', body });
        location.hash = '#/job/' + r.id;
      } catch (e) {
        err.textContent = 'Not submitted: ' + e.message;
      }
    });
    return form;
  }

  function viewJobs() {
    const ctx = newContext();
    const list = el('div');
    main.replaceChildren(el('h1', {}, me.role === 'admin' ? 'All jobs' : 'Your jobs'),
      me.role === 'provider' ? null : submitForm(), el('h2', {}, 'Jobs'), list);
    every(ctx, 5000, async () => {
      const r = await api('/v1/jobs?all=1&limit=500', { signal: ctx.abort.signal });
      if (ctx.stopped) return;
      const now = Date.now();
      list.replaceChildren(table(['ID', 'Name', 'User', 'State', 'Node', 'GPUs', 'Ran for'],
        r.jobs.slice().reverse().slice(0, 500).map((j) => jobRow(j, now))));
    });
    return ctx;
  }

  // ---- one job ----

  // The attempts on a time line: one row per attempt, its queue wait grey
  // and the attempt coloured by how it ended (green: the job succeeded,
  // red: it failed, amber: moved elsewhere, blue: running to "now").
  function timeline(job) {
    const hist = job.history || [];
    const t0 = ms(job.submitted_at);
    const t1 = ms(job.finished_at) || Date.now();
    const span = Math.max(1000, t1 - t0);
    const pct = (t) => ((Math.max(t0, Math.min(t1, t)) - t0) / span) * 100;
    const seg = (from, to, cls, title, attempt) => {
      const s = el('span', { class: 'tl-seg ' + cls, title, 'data-attempt': attempt });
      s.style.left = pct(from).toFixed(2) + '%';
      s.style.width = Math.max(0.6, pct(to) - pct(from)).toFixed(2) + '%';
      return s;
    };
    const rows = [];
    let prevEnd = t0;
    hist.forEach((a, i) => {
      const s = ms(a.started_at) || prevEnd;
      const e = ms(a.finished_at) || (job.state === 'running' && i === hist.length - 1 ? t1 : s);
      const how = !a.finished_at ? 'running'
        : ['exited', 'killed', 'timeout', 'cancelled', 'start_failed'].includes(a.reason)
          ? (job.state === 'succeeded' ? 'ok' : 'end') : 'moved';
      const label = `Attempt ${a.attempt} on ${a.node || '?'}: ${a.finished_at ? (a.reason || 'ended') : 'running'}`
        + ` for ${fmtDuration(e - s)}`
        + (a.restored_version ? `, resumed from checkpoint ${a.restored_version}` : '')
        + (a.checkpoint ? `, saved checkpoint ${a.checkpoint.version}${a.checkpoint.label ? ' (' + a.checkpoint.label + ')' : ''}` : '');
      const track = el('div', { class: 'tl-track' });
      if (s > prevEnd) track.append(seg(prevEnd, s, 'tl-wait', `queued ${fmtDuration(s - prevEnd)}`));
      track.append(seg(s, e, 'tl-att tl-' + how, label, a.attempt));
      rows.push(el('div', { class: 'tl-row' }, el('div', { class: 'tl-label' }, label), track));
      prevEnd = e;
    });
    if (!hist.length) {
      const track = el('div', { class: 'tl-track' }, seg(t0, t1, 'tl-wait', 'queued'));
      rows.push(el('div', { class: 'tl-row' }, el('div', { class: 'tl-label' }, 'Waiting in the queue for ' + fmtDuration(t1 - t0)), track));
    }
    return el('div', { class: 'timeline', role: 'list' }, rows,
      el('div', { class: 'tl-axis muted' }, el('span', {}, fmtTime(job.submitted_at)),
        el('span', {}, job.finished_at ? fmtTime(job.finished_at) : 'now')));
  }

  function sparkline(values) {
    const W = 120, H = 28;
    if (values.length === 1) values = [values[0], values[0]];
    const pts = values.map((v, i) => `${(i / Math.max(1, values.length - 1)) * W},${H - (Math.max(0, Math.min(100, v)) / 100) * H}`).join(' ');
    return svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'spark', role: 'img', 'aria-label': 'utilization history' },
      svg('polyline', { points: pts || `0,${H} ${W},${H}`, class: 'spark-line' }));
  }

  function detail(label, value) {
    return [el('dt', {}, label), el('dd', {}, value === null || value === undefined || value === '' ? '-' : value)];
  }

  // A shell in the job, in the page (xterm.js, embedded: web/vendor/):
  // a one-time ticket with the token, then a WebSocket on this origin
  // whose first message is the ticket (docs/interactive.md). A gang's
  // part: the ticket is asked for that part and good for it alone.
  let terminal = null;
  async function openTerminal(jobId, part = 0) {
    if (terminal) terminal.close();
    const box = document.getElementById('terminal-box');
    if (!box || typeof Terminal === 'undefined') return;
    box.hidden = false;
    box.replaceChildren();
    const term = new Terminal({ rows: 24, cols: 100, convertEol: false });
    term.open(box);
    let t;
    try {
      t = await api(`/v1/jobs/${jobId}/terminal?part=${part}`, { method: 'POST' });
    } catch (e) { setStatus(e.message, true); return; }
    const ws = new WebSocket(`${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/v1/jobs/${jobId}/terminal`);
    ws.binaryType = 'arraybuffer';
    const enc = new TextEncoder();
    ws.onopen = () => {
      ws.send(JSON.stringify({ ticket: t.ticket, part, rows: term.rows, cols: term.cols }));
      term.focus();
    };
    ws.onmessage = (ev) => {
      if (typeof ev.data !== 'string') { term.write(new Uint8Array(ev.data)); return; }
      const m = JSON.parse(ev.data);
      if (m.exit !== undefined) term.write(`\r\n[exited ${m.exit}]\r\n`);
      if (m.error) term.write(`\r\n[${m.error}]\r\n`);
      if (m.notice) term.write(`\r\n[${m.notice}]\r\n`);
    };
    ws.onclose = () => term.write('\r\n[closed]\r\n');
    term.onData((d) => { if (ws.readyState === 1) ws.send(enc.encode(d)); });
    term.onResize((s) => { if (ws.readyState === 1) ws.send(JSON.stringify({ resize: [s.rows, s.cols] })); });
    terminal = { close: () => { ws.close(); term.dispose(); } };
  }

  // The Terminal button; for a gang, a part selector beside it (the
  // Open links go to part 0: the proxy serves rank 0's ports).
  // chosen: { part }, kept across the page's refreshes.
  function terminalControls(job, chosen) {
    const nparts = (job.parts || []).length;
    const pick = nparts > 1 ? el('select', {
      id: 'terminal-part', 'aria-label': 'Part', onchange: (e) => { chosen.part = Number(e.target.value); },
    }, ...job.parts.map((p) => el('option', { value: String(p.part), selected: p.part === chosen.part }, 'Part ' + p.part))) : null;
    const button = el('button', {
      type: 'button', id: 'open-terminal',
      onclick: () => openTerminal(job.id, pick ? chosen.part : 0),
    }, 'Terminal');
    return pick ? [pick, button] : [button];
  }

  function viewJob(id) {
    const ctx = newContext();
    const title = el('h1', {}, 'Job ' + id);
    const actions = el('div', { class: 'actions' });
    const facts = el('dl', { class: 'facts card' });
    const tl = el('div', { class: 'card tl-card' });
    const gpus = el('div', { class: 'card' }, el('p', { class: 'muted' }, 'Loading…'));
    const log = el('pre', { class: 'log', id: 'log', tabindex: 0 });
    const logState = el('span', { class: 'muted', id: 'log-state' }, 'following…');
    if (terminal) { terminal.close(); terminal = null; }
    main.replaceChildren(el('p', {}, el('a', { href: '#/jobs' }, '← Jobs')), title, actions,
      el('div', { id: 'terminal-box', class: 'card terminal', hidden: true }),
      el('div', { class: 'job-grid' }, facts, el('div', {},
        el('h2', {}, 'Attempts'), tl, el('h2', {}, 'GPU use'), gpus)),
      el('h2', {}, 'Output ', logState), log);
    let job = null;
    const termChosen = { part: 0 };   // the terminal's part (a gang's)
    const history = {};   // "node/gpu" -> recent utilization values

    function render() {
      title.replaceChildren('Job ' + job.id + ' · ' + job.name + ' ', badge(job.cancel_requested && job.state === 'running' ? 'cancelling' : job.state));
      const finished = ['succeeded', 'failed', 'cancelled', 'timeout'].includes(job.state);
      actions.replaceChildren(finished || job.cancel_requested ? '' : el('button', {
        type: 'button', class: 'danger', id: 'cancel', onclick: async () => {
          try { await api(`/v1/jobs/${job.id}/cancel`, { method: 'POST' }); refresh(); } catch (e) { setStatus(e.message, true); }
        },
      }, 'Cancel'), ...(job.state === 'running' ? (job.expose || []).map((entry) => {
        // A port the job declares (submit --expose PORT, or PART:PORT on
        // a gang's part), through the coordinator's proxy: its own
        // origin, signed in with a one-time code (docs/interactive.md).
        // noopener: the page gets no handle on this one.
        const [part, port] = typeof entry === 'string' ? entry.split(':').map(Number) : [0, entry];
        return el('button', {
          type: 'button', class: 'open-port', 'data-port': String(port), 'data-part': String(part), onclick: async () => {
            try {
              const g = await api(`/v1/jobs/${job.id}/proxy`, { method: 'POST', body: part > 0 ? { port, part } : { port } });
              window.open(g.url, '_blank', 'noopener,noreferrer');
            } catch (e) { setStatus(e.message, true); }
          },
        }, part > 0 ? 'Open part ' + part + ' port ' + port : 'Open port ' + port);
      }) : []), ...(job.state === 'running' ? terminalControls(job, termChosen) : []));
      const req = job.request || {};
      facts.replaceChildren(...[
        detail('User', job.user), detail('State', job.state),
        detail('Node', nodeLink(job.node)), detail('GPUs', (job.gpus || []).join(', ')),
        detail('Submitted', fmtTime(job.submitted_at)), detail('Started', fmtTime(job.started_at)),
        detail('Finished', fmtTime(job.finished_at)),
        detail('Exit', job.exit_code !== null ? 'code ' + job.exit_code : job.signal ? 'signal ' + job.signal : null),
        job.state === 'queued' ? detail('Waiting', (() => {
          const w = waitInfo(job);
          return w.reason + (w.why ? ': ' + w.why : '') + (w.expected ? ' (expected to start ' + fmtTime(w.expected) + ')' : '');
        })()) : [],
        detail('Reason', job.reason), detail('Message', job.message),
        detail('Attempts', String(job.attempts)),
        // Over the job's own network (its veth pair), every attempt and part.
        typeof job.net_sent_bytes === 'number' ? detail('Network',
          `${fmtBytes(job.net_sent_bytes)} sent · ${fmtBytes(job.net_received_bytes)} received` +
          (job.state === 'running' ? ' (as of the last heartbeat)' : '')) : [],
        // A fraction's use, as the enforcement layer (libgpupool-cuda.so) measured it.
        ((job.parts || [])[0] || {}).gpu_use ? detail('GPU share in use', (() => {
          const u = job.parts[0].gpu_use;
          return `${fmtMib(u.mem_used_mib)} of ${fmtMib(u.mem_limit_mib)} GPU memory · may use ${Math.round(u.share_now * 100)}% of the GPU now · using ${u.util}%`;
        })()) : [],
        detail('Asked for', `${req.gpus} GPU · ${req.cpus} CPU · ${req.mem_mib ? fmtMib(req.mem_mib) : 'any'} memory · ${req.time_limit_s ? fmtDuration(req.time_limit_s * 1000) : 'no'} time limit`),
        detail('Command', el('code', {}, (job.command || []).join(' '))),
      ].flat());
      tl.replaceChildren(timeline(job));
      if (job.state !== 'running') {
        gpus.replaceChildren(el('p', { class: 'muted' }, job.state === 'queued'
          ? 'Shown once the job runs.' : 'The job is not running.'));
      }
    }

    async function refresh() {
      job = await api('/v1/jobs/' + encodeURIComponent(id), { signal: ctx.abort.signal });
      if (!ctx.stopped) render();
    }

    // Job details: at once, then whenever the job ends (the wait long
    // poll), and every few seconds for the attempts' progress.
    (async () => {
      try {
        await refresh();
      } catch (e) {
        if (e.status === 404) main.replaceChildren(el('h1', {}, 'Job ' + id), el('p', { class: 'error' }, 'No such job, or not one of yours.'));
        else setStatus(e.message, true);
        ctx.stop();
        return;
      }
      every(ctx, 4000, refresh);
      while (!ctx.stopped && !['succeeded', 'failed', 'cancelled', 'timeout'].includes(job.state)) {
        try {
          const j = await api(`/v1/jobs/${encodeURIComponent(id)}/wait?wait_ms=25000`, { signal: ctx.abort.signal });
          if (!ctx.stopped && j.state !== job.state) await refresh();
        } catch (e) {
          if (ctx.stopped) return;
          await new Promise((r) => setTimeout(r, 2000));
        }
      }
    })();

    // The log, followed with the long poll (as `gpupool logs -f`).
    (async () => {
      let offset = 0;
      const MAX = 2 << 20;
      while (!ctx.stopped) {
        try {
          const r = await api(`/v1/jobs/${encodeURIComponent(id)}/log?offset=${offset}&wait_ms=25000`, { raw: true, signal: ctx.abort.signal });
          const text = await r.text();
          const atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 8;
          if (text) {
            log.append(document.createTextNode(text));
            if (log.textContent.length > MAX) log.textContent = log.textContent.slice(-MAX);
            if (atEnd) log.scrollTop = log.scrollHeight;
          }
          offset = Number(r.headers.get('X-Gpupool-Offset')) || offset;
          if (r.headers.get('X-Gpupool-Done') === '1') {
            logState.textContent = 'complete';
            return;
          }
        } catch (e) {
          if (ctx.stopped) return;
          if (e.status === 404) { logState.textContent = ''; return; }
          logState.textContent = 'reconnecting…';
          await new Promise((r) => setTimeout(r, 2000));
          logState.textContent = 'following…';
        }
      }
    })();

    // Its GPUs' use, from the nodes' heartbeats, while it runs.
    every(ctx, 2000, async () => {
      if (!job || job.state !== 'running' || !job.node) return;
      const nr = await api('/v1/nodes', { signal: ctx.abort.signal });
      const node = nr.nodes.find((n) => n.name === job.node);
      if (!node || ctx.stopped) return;
      const rows = (job.gpus || []).map((i) => {
        const g = node.gpus.find((x) => x.index === i);
        if (!g) return null;
        const key = node.name + '/' + i;
        history[key] = (history[key] || []).concat([g.util]).slice(-60);
        return el('li', { class: 'gpu busy', 'data-gpu': i },
          el('div', { class: 'gpu-head' }, el('strong', {}, `${node.name} GPU ${i}`), ' ', el('span', { class: 'muted' }, g.model)),
          el('div', { class: 'gpu-meters' },
            meter(g.util / 100, 'util ' + g.util + '%', 'util'), sparkline(history[key]),
            meter(g.mem_mib ? g.mem_used_mib / g.mem_mib : 0, 'mem ' + fmtMib(g.mem_used_mib) + '/' + fmtMib(g.mem_mib), 'mem'),
            el('span', { class: 'sensors muted' }, g.temp_c !== null && g.temp_c !== undefined ? g.temp_c + '°C' : '',
              g.power_mw !== null && g.power_mw !== undefined ? ' · ' + Math.round(g.power_mw / 1000) + ' W' : '')));
      });
      gpus.replaceChildren(rows.length ? el('ul', { class: 'gpus' }, rows) : el('p', { class: 'muted' }, 'The job uses no GPU.'));
    });
    return ctx;
  }

  // ---- one node (a provider's page) ----

  function viewNode(name) {
    const ctx = newContext();
    const body = el('div');
    main.replaceChildren(el('p', {}, el('a', { href: '#/pool' }, '← Pool')), el('h1', {}, 'Node ' + name), body);
    every(ctx, 5000, async () => {
      const [nr, jr] = await Promise.all([api('/v1/nodes', { signal: ctx.abort.signal }),
        // The newest 500 jobs, not every job ever (old ones are read
        // back from the database one by one): the totals are the
        // ledger's, on the provider's page.
        api('/v1/jobs?all=1&limit=500', { signal: ctx.abort.signal })]);
      if (ctx.stopped) return;
      const n = nr.nodes.find((x) => x.name === name);
      if (!n) {
        body.replaceChildren(el('p', { class: 'error' }, 'No such node.'));
        return;
      }
      const now = Date.now();
      const jobs = jr.jobs.filter((j) => j.node === name);
      let gpuMs = 0;
      for (const j of jobs) {
        const s = ms(j.started_at);
        if (s && j.state !== 'queued') gpuMs += ((ms(j.finished_at) || now) - s) * (j.request ? j.request.gpus : 0);
      }
      body.replaceChildren(
        el('div', { class: 'stats' },
          card('State', n.state), card('Lent by', providerLink(n.owner)),
          card('GPUs lent now', `${n.gpus.filter((g) => g.lent).length} / ${n.gpus.length}`),
          card('GPU time lent', (gpuMs / 3600000).toFixed(2) + ' GPU-h',
            `over ${jobs.length} job${jobs.length === 1 ? '' : 's'} you can see whose last attempt ran here, of the pool's newest 500`)),
        el('dl', { class: 'facts card' }, [
          detail('Last heard from', fmtTime(n.last_seen)), detail('CPUs offered', `${n.offer_cpus} of ${n.cpus}`),
          detail('Memory offered', `${fmtMib(n.offer_mem_mib)} of ${fmtMib(n.mem_mib)}`),
          detail('Longest job', n.max_job_s ? fmtDuration(n.max_job_s * 1000) : 'any'),
          detail('Taking new jobs', n.accepting ? 'yes' : 'no'),
        ].flat()),
        el('h2', {}, 'GPUs'), el('ul', { class: 'gpus card' }, n.gpus.map((g) => gpuRow(n, g))),
        el('h2', {}, 'Jobs here'),
        table(['ID', 'Name', 'User', 'State', 'Node', 'GPUs', 'Ran for'], jobs.slice().reverse().slice(0, 200).map((j) => jobRow(j, now))));
    });
    return ctx;
  }

  // ---- one provider: what it lent and earned (the ledger) ----

  function viewProvider(name) {
    const ctx = newContext();
    const note = el('p', { class: 'muted', id: 'provider-scope' });
    const body = el('div', { id: 'provider' }, el('p', { class: 'muted' }, 'Loading…'));
    main.replaceChildren(el('p', {}, el('a', { href: '#/pool' }, '← Pool')),
      el('h1', {}, 'Provider ' + name), note, body);
    note.textContent = me.role === 'admin' ? 'Everything the ledger credited to ' + name + '.'
      : me.role === 'provider' ? 'What your nodes lent and what you earned, from the ledger.'
        : 'What you paid ' + name + ': a user sees only their own postings.';
    const q = 'provider=' + encodeURIComponent(name);
    every(ctx, 5000, async () => {
      const week = new Date(Date.now() - 7 * 86400000).toISOString();
      const sig = { signal: ctx.abort.signal };
      let all, recent, ledger, nodes;
      try {
        [all, recent, ledger, nodes] = await Promise.all([
          api('/v1/usage?' + q, sig), api('/v1/usage?' + q + '&since=' + encodeURIComponent(week), sig),
          api('/v1/ledger?' + q + '&limit=20', sig), api('/v1/nodes', sig)]);
      } catch (e) {
        if (e.status === 403 || e.status === 404) {
          body.replaceChildren(el('p', { class: 'error' }, e.message));
          return;
        }
        throw e;
      }
      if (ctx.stopped) return;
      const sum = (rows, k) => rows.reduce((a, x) => a + (Number(x[k]) || 0), 0);
      const mine = (u) => u.providers.filter((x) => x.provider === name);
      const earned = sum(mine(all), 'earned_micro'), lent = sum(mine(all), 'gpu_ms');
      const earnedWeek = sum(mine(recent), 'earned_micro'), lentWeek = sum(mine(recent), 'gpu_ms');
      const own = nodes.nodes.filter((n) => n.owner === name);
      const stat = (title, value, sub, attrs) => {
        const c = card(title, value, sub);
        for (const [k, v] of Object.entries(attrs || {})) c.setAttribute(k, String(v));
        return c;
      };
      const postings = ledger.postings.slice().reverse().map((p) => {
        const u = (p.entries || []).find((e) => e.account === 'user') || {};
        return el('tr', { 'data-posting': p.id },
          el('td', {}, fmtTime(p.at)), el('td', { class: 'num' }, jobLink(p.job_id)),
          el('td', { class: 'num' }, String(p.attempt)), el('td', {}, nodeLink(p.node)),
          el('td', {}, u.name ? `${u.name} (${u.group})` : '-'), el('td', {}, p.kind),
          el('td', { class: 'num' }, fmtGpuTime(p.gpu_ms)), el('td', { class: 'num' }, fmtCredits(p.amount_micro)));
      });
      body.replaceChildren(
        el('div', { class: 'stats' },
          stat('Earned', fmtCredits(earned), `${all.totals.postings} posting${all.totals.postings === 1 ? '' : 's'}`,
            { id: 'earned', 'data-micro': earned }),
          stat('GPU time lent', fmtGpuTime(lent), 'billed to jobs', { id: 'lent', 'data-gpu-ms': lent }),
          stat('Last 7 days', fmtCredits(earnedWeek), fmtGpuTime(lentWeek) + ' lent', { id: 'earned-week' }),
          stat('Nodes', `${own.filter((n) => n.state === 'up').length} up / ${own.length}`,
            `${own.reduce((a, n) => a + n.gpus.length, 0)} GPUs`)),
        el('h2', {}, 'By group of the node'),
        table(['Group', 'GPU time lent', 'Earned'], mine(all).map((x) => el('tr', { 'data-group': x.group },
          el('td', {}, x.group), el('td', { class: 'num' }, fmtGpuTime(x.gpu_ms)),
          el('td', { class: 'num' }, fmtCredits(x.earned_micro))))),
        el('h2', {}, 'Who used its GPUs'),
        table(['User', 'Group', 'GPU time', 'Paid'], all.users.map((x) => el('tr', { 'data-user': x.user },
          el('td', {}, x.user), el('td', {}, x.group), el('td', { class: 'num' }, fmtGpuTime(x.gpu_ms)),
          el('td', { class: 'num' }, fmtCredits(x.spent_micro))))),
        el('h2', {}, 'Its nodes'),
        own.length ? el('div', { class: 'nodes' }, own.map(nodeCard)) : el('p', { class: 'muted' }, 'No node now.'),
        el('h2', {}, 'Latest postings'),
        table(['Posted', 'Job', 'Attempt', 'Node', 'Paid by', 'Kind', 'GPU time', 'Amount'], postings));
    });
    return ctx;
  }

  // ---- routing ----

  async function route() {
    if (view) view.stop();
    view = null;
    const hash = location.hash || '#/pool';
    const nav = document.getElementById('nav'), who = document.getElementById('who');
    if (!token()) {
      nav.hidden = true;
      who.hidden = true;
      view = viewLogin();
      probeLeader();
      return;
    }
    if (!me) {
      try {
        me = await api('/v1/whoami');
      } catch (e) {
        if (e.status !== 401) setStatus('Cannot reach the coordinator: ' + e.message, true);
        return;
      }
    }
    nav.hidden = false;
    who.hidden = false;
    askCoordinators();
    document.getElementById('who-name').textContent = `${me.name} (${me.role})`;
    // A coordinator started with --insecure beyond loopback: say it, always.
    if (me.insecure && !document.getElementById('insecure')) {
      document.body.prepend(el('p', { class: 'error', id: 'insecure', role: 'alert' },
        'Insecure: this coordinator serves plain HTTP beyond loopback (--insecure); ',
        'tokens and jobs cross the network in clear.'));
    }
    const earnings = document.getElementById('nav-provider');
    earnings.hidden = me.role !== 'provider';
    earnings.setAttribute('href', '#/provider/' + encodeURIComponent(me.name));
    const [, page, arg] = hash.split('/');
    document.querySelectorAll('[data-nav]').forEach((a) => a.classList.toggle('active', a.dataset.nav === page));
    if (page === 'queue') view = viewQueue();
    else if (page === 'jobs') view = viewJobs();
    else if (page === 'job' && /^\d+$/.test(arg || '')) view = viewJob(arg);
    else if (page === 'node' && arg) view = viewNode(decodeURIComponent(arg));
    else if (page === 'provider' && arg) view = viewProvider(decodeURIComponent(arg));
    else if (page === 'login') location.hash = '#/pool';
    else view = viewPool();
  }

  document.getElementById('signout').addEventListener('click', () => signOut());
  window.addEventListener('hashchange', route);
  route();
})();
