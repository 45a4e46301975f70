// runlog inspector: plain JavaScript, no build step, no external resources. It talks only to this
// origin's /api with the bearer token, which arrives in the URL fragment (#token=…, never sent to the
// server by the browser) and is kept in sessionStorage for this tab.
/* global document, window, sessionStorage, history, location, fetch, TextDecoder, Node, navigator */

const TOKEN_KEY = 'runlog.token';

const state = {
  token: null,
  actors: [],
  filters: { text: '', kind: '', state: '', all: true },
  selectedId: null,
  actor: null,
  steps: [],
  charts: new Map(),
  cursor: null,
  follow: true,
  replays: new Map(),
  diff: { a: null, b: null },
  lastSeq: undefined,
  loadSerial: 0,
  cursorSerial: 0,
  pageSerial: 0,
};

/** Steps per page of the timeline (the API's most: a long history is never read whole). */
const PAGE = 1000;

// ---------------------------------------------------------------------------------------------
// DOM helpers

/** Builds an element; text is always inserted as text (never as HTML). */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

const $ = (sel) => document.querySelector(sel);
const enc = encodeURIComponent;

function clear(el, ...children) {
  el.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  return el;
}

function toast(message, tone = 'error') {
  const t = h('div', { class: `toast ${tone}`, 'data-testid': 'toast', role: 'status' }, message);
  $('#toasts').append(t);
  setTimeout(() => t.remove(), 6000);
}

// ---------------------------------------------------------------------------------------------
// Formatting

const STATE_TONES = [
  [/^(running|succeeded|healthy)$/, 'good'],
  [/^(crashed|failed|lost)/, 'bad'],
  [/^(stopped)$/, 'done'],
  [/^(paused|adopted|stopping|suspended|crashed\.backoff)$/, 'warn'],
];

function tone(stateName) {
  if (stateName === 'crashed.backoff') return 'warn';
  for (const [re, t] of STATE_TONES) if (re.test(stateName)) return t;
  return 'busy';
}

function statePill(name, extra = {}) {
  return h('span', { class: `pill ${tone(name)}`, ...extra }, name);
}

function shortType(type, kind) {
  return kind && type.startsWith(`${kind}.`) ? type.slice(kind.length + 1) : type;
}

function timeOfDay(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const p = (n, w = 2) => String(n).padStart(w, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

function ago(iso) {
  const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  if (!Number.isFinite(s)) return '';
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

function delta(fromIso, toIso) {
  const ms = Date.parse(toIso) - Date.parse(fromIso);
  if (!Number.isFinite(ms)) return '';
  if (ms < 1000) return `+${ms} ms`;
  if (ms < 60_000) return `+${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  return `+${Math.round(ms / 60_000)} min`;
}

function short(value, n = 80) {
  const s = typeof value === 'string' ? JSON.stringify(value) : (JSON.stringify(value) ?? 'undefined');
  return s.length <= n ? s : `${s.slice(0, n - 1)}…`;
}

function describe(row) {
  const s = row.summary || {};
  // An archived actor (runlog archive) keeps its row; its events are in the archive file named here.
  const where = row.archived ? ` · archived → ${row.archived.file}` : '';
  if (s.appId) return `${s.appId} · ${s.sandbox ?? ''}${s.port ? ` · :${s.port}` : ''}${where}`;
  if (s.uri) return `${s.handler ?? ''} · ${String(s.uri).replace(/^at:\/\//, '')}${where}`;
  return where.slice(3);
}

// ---------------------------------------------------------------------------------------------
// JSON: a pretty, coloured view whose lines carry their path (so changed keys can be highlighted)

function jsonView(value, { changed = new Set(), testid } = {}) {
  const lines = [];
  const walk = (v, path, indent, key, last, inherited = false) => {
    const keyPart = key === undefined ? [] : [h('span', { class: 'j-key' }, JSON.stringify(key)), ': '];
    const comma = last ? '' : ',';
    const hit = inherited || (path !== '' && changed.has(path));
    const mark = hit ? ' changed' : '';
    const pad = '  '.repeat(indent);
    if (v !== null && typeof v === 'object') {
      const entries = Array.isArray(v) ? v.map((x, i) => [i, x]) : Object.entries(v);
      const [open, close] = Array.isArray(v) ? ['[', ']'] : ['{', '}'];
      if (entries.length === 0) {
        lines.push(h('span', { class: `j-line${mark}`, 'data-path': path }, pad, keyPart, open + close + comma));
        return;
      }
      lines.push(h('span', { class: `j-line${mark}`, 'data-path': path }, pad, keyPart, open));
      entries.forEach(([k, x], i) => {
        const p = Array.isArray(v) ? `${path}[${k}]` : path ? `${path}.${k}` : String(k);
        walk(x, p, indent + 1, Array.isArray(v) ? undefined : k, i === entries.length - 1, hit);
      });
      lines.push(h('span', { class: `j-line${mark}` }, pad, close + comma));
      return;
    }
    const cls = v === null ? 'j-null' : typeof v === 'string' ? 'j-str' : typeof v === 'number' ? 'j-num' : 'j-bool';
    lines.push(
      h(
        'span',
        { class: `j-line${mark}`, 'data-path': path },
        pad,
        keyPart,
        h('span', { class: cls }, JSON.stringify(v)),
        comma,
      ),
    );
  };
  walk(value, '', 0, undefined, true);
  return h('pre', { class: 'json', 'data-testid': testid }, lines);
}

/** Key-level differences (same rules as `runlog replay --step`). */
function diffContext(before, after, prefix = '') {
  const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
  const same = (a, b) => a === b || JSON.stringify(a) === JSON.stringify(b);
  if (Array.isArray(before) && Array.isArray(after) && prefix) {
    const n = Math.min(before.length, after.length);
    if (before.slice(0, n).every((x, i) => same(x, after[i]))) {
      const out = [];
      for (let i = n; i < after.length; i++) out.push({ path: `${prefix}[${i}]`, op: 'added', after: after[i] });
      for (let i = n; i < before.length; i++) out.push({ path: `${prefix}[${i}]`, op: 'removed', before: before[i] });
      return out;
    }
  }
  if (!isObj(before) || !isObj(after))
    return same(before, after) ? [] : [{ path: prefix || '(context)', op: 'changed', before, after }];
  const out = [];
  for (const k of new Set([...Object.keys(before), ...Object.keys(after)])) {
    const path = prefix ? `${prefix}.${k}` : k;
    if (!Object.hasOwn(before, k)) out.push({ path, op: 'added', after: after[k] });
    else if (!Object.hasOwn(after, k)) out.push({ path, op: 'removed', before: before[k] });
    else out.push(...diffContext(before[k], after[k], path));
  }
  return out;
}

/** Paths to highlight for a set of changes: the changed path and, for objects, its top line. */
function changedPaths(changes) {
  return new Set(changes.map((c) => c.path));
}

/** A value in a change row: short ones inline, objects that do not fit as a small JSON view. */
function value(v, cls) {
  const text = JSON.stringify(v) ?? 'undefined';
  if (v !== null && typeof v === 'object' && text.length > 90) return jsonView(v);
  return h('code', { class: cls, title: text }, short(v, 120));
}

function changeList(changes, testid) {
  if (changes.length === 0) return h('p', { class: 'muted small', 'data-testid': testid }, 'No context change.');
  const sym = { added: '+', removed: '−', changed: '~' };
  return h(
    'table',
    { class: 'changes', 'data-testid': testid },
    h(
      'tbody',
      {},
      changes.map((c) =>
        h(
          'tr',
          { class: `op-${c.op}`, 'data-testid': 'diff-row', 'data-op': c.op, 'data-path': c.path },
          h('td', { class: 'op' }, sym[c.op]),
          h('td', { class: 'path' }, c.path),
          h(
            'td',
            { class: 'vals' },
            c.op !== 'added' ? value(c.before, 'before') : null,
            c.op === 'changed' ? h('span', { class: 'arrow' }, ' → ') : null,
            c.op !== 'removed' ? value(c.after, 'after') : null,
          ),
        ),
      ),
    ),
  );
}

// ---------------------------------------------------------------------------------------------
// API

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(path, init = {}) {
  if (!state.token) {
    showLogin();
    throw new ApiError(401, 'UNAUTHORIZED', 'no token');
  }
  const res = await fetch(path, {
    ...init,
    headers: { ...(init.headers || {}), authorization: `Bearer ${state.token}` },
  });
  const body = await res.json().catch(() => null);
  if (res.status === 401) {
    showLogin('That token was refused. Check $RUNLOG_HOME/token.');
    throw new ApiError(401, 'UNAUTHORIZED', 'the token was refused');
  }
  if (!res.ok)
    throw new ApiError(
      res.status,
      body?.error?.code ?? 'HTTP',
      body?.error?.message ?? `${res.status} ${res.statusText}`,
    );
  return body;
}

async function chartFor(kind) {
  if (!state.charts.has(kind)) state.charts.set(kind, await api(`/api/machines/${enc(kind)}`));
  return state.charts.get(kind);
}

/** The `after` of the page of steps that holds version v: centred on it, and never past the latest page. */
function pageAfter(v, version) {
  return Math.max(0, Math.min(v - PAGE / 2, version - PAGE));
}

/** One page of an actor's steps (the server folds it from the nearest snapshot). */
function loadSteps(id, after) {
  return api(`/api/actors/${enc(id)}/replay?steps=brief&after=${after}&limit=${PAGE}`);
}

/** The state and context after version v (0 = before any event). History is append-only, so it caches. */
async function replayAt(id, v) {
  const key = `${id}@${v}`;
  if (!state.replays.has(key)) {
    const p = api(`/api/actors/${enc(id)}/replay?to=${v}&steps=none`);
    state.replays.set(key, p);
    p.catch(() => state.replays.delete(key));
  }
  return state.replays.get(key);
}

// ---------------------------------------------------------------------------------------------
// Token and routing

function takeTokenFromUrl() {
  const m = /^#token=([0-9a-fA-F]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem(TOKEN_KEY, m[1]);
    // Drop the token from the address bar and the history.
    history.replaceState(null, '', `${location.pathname}#/`);
  }
  state.token = sessionStorage.getItem(TOKEN_KEY);
}

function showLogin(message = '') {
  $('#login').hidden = false;
  $('#login-error').textContent = message;
  $('#login-token').focus();
}

function route() {
  const m = /^#\/actor\/([^/]+)(?:\/v\/(\d+))?$/.exec(location.hash);
  if (!m) {
    state.selectedId = null;
    state.actor = null;
    renderOverview();
    renderList();
    return;
  }
  const id = decodeURIComponent(m[1]);
  const v = m[2] ? Number(m[2]) : null;
  if (id === state.selectedId && state.actor) {
    if (v !== null && v !== state.cursor) setCursor(v);
    return;
  }
  void openActor(id, v);
}

function setHashQuietly(hash) {
  if (location.hash !== hash) history.replaceState(null, '', hash);
}

// ---------------------------------------------------------------------------------------------
// The actor list

async function loadActors() {
  const { actors } = await api(`/api/actors?all=${state.filters.all ? 'true' : 'false'}`);
  state.actors = actors;
  renderList();
  renderTiles();
}

function renderList() {
  const f = state.filters;
  const text = f.text.trim().toLowerCase();
  const states = [...new Set(state.actors.map((a) => a.state))].sort();
  const sel = $('#filter-state');
  const current = sel.value;
  clear(
    sel,
    h('option', { value: '' }, 'any state'),
    states.map((s) => h('option', { value: s }, s)),
  );
  sel.value = states.includes(current) ? current : '';
  f.state = sel.value;

  const rows = state.actors.filter((a) => {
    if (f.kind && a.kind !== f.kind) return false;
    if (f.state && a.state !== f.state) return false;
    if (!text) return true;
    const hay = [
      a.id,
      a.kind,
      a.state,
      ...Object.values(a.summary || {}).map((v) => (typeof v === 'object' ? JSON.stringify(v) : String(v))),
    ]
      .join(' ')
      .toLowerCase();
    return hay.includes(text);
  });
  rows.sort((a, b) => (a.updatedAt < b.updatedAt ? 1 : a.updatedAt > b.updatedAt ? -1 : 0));
  $('#actor-count').textContent =
    `${rows.length} of ${state.actors.length} actor${state.actors.length === 1 ? '' : 's'}`;
  clear(
    $('#actor-list'),
    rows.length === 0
      ? h(
          'li',
          { class: 'none' },
          state.actors.length === 0 ? 'No actors in this log yet.' : 'No actor matches the filters.',
        )
      : rows.map((a) =>
          h(
            'li',
            {},
            h(
              'a',
              {
                class: `actor${a.id === state.selectedId ? ' selected' : ''}`,
                href: `#/actor/${enc(a.id)}`,
                'data-testid': 'actor-row',
                'data-actor-id': a.id,
                'data-kind': a.kind,
                'data-state': a.state,
              },
              h('span', { class: `kind-icon ${a.kind}`, title: a.kind }, a.kind === 'instance' ? 'app' : 'exec'),
              h(
                'span',
                { class: 'actor-main' },
                h('span', { class: 'actor-id' }, a.id),
                h('span', { class: 'actor-what' }, describe(a) || a.kind),
              ),
              h(
                'span',
                { class: 'actor-side' },
                statePill(a.state, { 'data-testid': 'actor-state' }),
                h('span', { class: 'actor-age', title: a.updatedAt }, `v${a.version} · ${ago(a.updatedAt)}`),
              ),
            ),
          ),
        ),
  );
}

// ---------------------------------------------------------------------------------------------
// One actor

// ---------------------------------------------------------------------------------------------
// Overview (no actor selected): counts by kind and state, and the latest events of the whole log

function renderOverview() {
  clear(
    $('#detail'),
    h(
      'section',
      { class: 'card intro' },
      h('h2', {}, 'Overview'),
      h(
        'p',
        { class: 'muted' },
        "Every state here is computed by replaying an actor's events through its machine. Pick an actor to see its statechart, scrub through its history and compare any two moments.",
      ),
    ),
    h('div', { class: 'tiles', id: 'overview-tiles', 'data-testid': 'overview' }),
    h('section', { class: 'card', id: 'nodes-card', 'data-testid': 'nodes', hidden: true }),
    h(
      'section',
      { class: 'card' },
      h(
        'div',
        { class: 'card-head' },
        h('h3', {}, 'Recent activity'),
        h('span', { class: 'muted small' }, 'the latest events in the log, newest first; live'),
      ),
      h(
        'ol',
        { class: 'activity', id: 'activity', 'data-testid': 'activity' },
        h('li', { class: 'muted small' }, 'loading…'),
      ),
    ),
  );
  renderTiles();
  void loadNodes();
  api('/api/events?limit=40')
    .then(({ events }) => {
      const list = $('#activity');
      if (!list) return;
      clear(
        list,
        events.length ? events.reverse().map(activityRow) : h('li', { class: 'muted small' }, 'No events yet.'),
      );
    })
    .catch(() => undefined);
}

function renderTiles() {
  const box = $('#overview-tiles');
  if (!box) return;
  const titles = { instance: 'App instances', execution: 'Executions' };
  clear(
    box,
    ['instance', 'execution'].map((kind) => {
      const mine = state.actors.filter((a) => a.kind === kind);
      const counts = new Map();
      for (const a of mine) counts.set(a.state, (counts.get(a.state) || 0) + 1);
      return h(
        'section',
        { class: 'card tile', 'data-testid': `tile-${kind}` },
        h(
          'div',
          { class: 'tile-head' },
          h('span', { class: `kind-badge ${kind}` }, titles[kind]),
          h('span', { class: 'tile-count' }, String(mine.length)),
        ),
        mine.length === 0
          ? h(
              'p',
              { class: 'muted small' },
              state.filters.all ? 'none in this log' : 'none live (tick “include finished actors” for the rest)',
            )
          : h(
              'div',
              { class: 'chips' },
              [...counts.entries()]
                .sort()
                .map(([st, n]) =>
                  h(
                    'button',
                    { class: 'state-count', title: `show ${kind}s that are ${st}`, onclick: () => filterTo(kind, st) },
                    statePill(st),
                    h('b', {}, String(n)),
                  ),
                ),
            ),
      );
    }),
  );
}

// The supervisors sharing the log (a cluster's, on PostgreSQL): heartbeat, age, live or not, and the actors each
// owns through its lease (token, expiry on the database's clock). Refreshed while the overview is shown:
// heartbeats and lease renewals are not events, so the live stream does not carry them.
let nodesTimer = null;
async function loadNodes() {
  if (nodesTimer) clearTimeout(nodesTimer);
  nodesTimer = null;
  const box = $('#nodes-card');
  if (!box) return;
  let view;
  try {
    view = await api('/api/nodes');
  } catch {
    return;
  }
  if (!$('#nodes-card')) return;
  renderNodes(box, view);
  nodesTimer = setTimeout(() => void loadNodes(), 3000);
}

function seconds(ms) {
  return ms === null || ms === undefined ? '-' : `${(ms / 1000).toFixed(1)} s`;
}

function renderNodes(box, view) {
  // On SQLite there is one supervisor and no lease: the card is a cluster's.
  box.hidden = !view.cluster;
  if (!view.cluster) return;
  clear(
    box,
    h(
      'div',
      { class: 'card-head' },
      h('h3', {}, 'Nodes'),
      h(
        'span',
        { class: 'muted small' },
        `${view.nodes.filter((n) => n.live).length} live of ${view.nodes.length}; the supervisors sharing this log and the actors each owns`,
      ),
    ),
    h(
      'table',
      { class: 'nodes' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ['node', 'status', 'host · pid', 'last heartbeat', 'age', 'owns'].map((c) => h('th', {}, c)),
        ),
      ),
      h(
        'tbody',
        {},
        view.nodes.map((n) =>
          h(
            'tr',
            { 'data-testid': 'node-row', 'data-node': n.node, 'data-live': String(n.live) },
            h('td', { class: 'mono' }, n.node),
            h(
              'td',
              {},
              h(
                'span',
                { class: `pill ${n.live ? 'good' : 'bad'}`, 'data-testid': 'node-status' },
                n.live ? 'live' : n.stoppedAt ? 'stopped' : 'gone',
              ),
            ),
            h('td', { class: 'mono small' }, `${n.host ?? '-'} · ${n.pid ?? '-'}`),
            h('td', { class: 'mono small', title: n.beatAt ?? '' }, n.beatAt ? timeOfDay(n.beatAt) : '-'),
            h('td', { class: 'mono small', 'data-testid': 'node-age' }, seconds(n.ageMs)),
            h(
              'td',
              {},
              n.owns.length === 0
                ? h('span', { class: 'muted small' }, 'nothing')
                : h(
                    'ul',
                    { class: 'owned' },
                    n.owns.map((a) =>
                      h(
                        'li',
                        { 'data-testid': 'node-owns', 'data-actor-id': a.id },
                        h('a', { class: 'mono small', href: `#/actor/${enc(a.id)}` }, a.id),
                        ' ',
                        a.state ? statePill(a.state) : '',
                        h(
                          'span',
                          {
                            class: `mono small ${a.expired ? 'bad-text' : 'muted'}`,
                            title: `lease token ${a.token}, expires ${a.expiresAt}`,
                          },
                          ` token ${a.token} · ${a.expired ? `expired ${seconds(-a.expiresInMs)} ago` : `expires in ${seconds(a.expiresInMs)}`}`,
                        ),
                      ),
                    ),
                  ),
            ),
          ),
        ),
      ),
    ),
    view.unowned.length > 0
      ? h(
          'p',
          { class: 'small bad-text', 'data-testid': 'nodes-unowned' },
          `Live actors no node owns: ${view.unowned.map((a) => a.id).join(', ')}`,
        )
      : '',
  );
}

function filterTo(kind, st) {
  state.filters.kind = kind;
  $('#filter-kind').value = kind;
  renderList();
  $('#filter-state').value = st;
  state.filters.state = st;
  renderList();
}

function activityRow(e) {
  const m = /^(instance|execution)-(.+)$/.exec(e.stream);
  const kind = m ? m[1] : '';
  const id = m ? m[2] : e.stream;
  const data = e.data && Object.keys(e.data).length ? short(e.data, 90) : '';
  return h(
    'li',
    { 'data-testid': 'activity-row' },
    h('span', { class: 'mono small muted', title: e.at }, timeOfDay(e.at)),
    h('a', { class: 'mono small', href: `#/actor/${enc(id)}/v/${e.version}` }, id),
    h(
      'span',
      { class: 'mono small' },
      h('b', {}, shortType(e.type, kind)),
      h('span', { class: 'muted' }, ` v${e.version}`),
    ),
    h('span', { class: 'mono small muted ellipsis', title: JSON.stringify(e.data) }, data),
  );
}

async function openActor(id, v) {
  const serial = ++state.loadSerial;
  state.selectedId = id;
  renderList();
  try {
    const actor = await api(`/api/actors/${enc(id)}`);
    const follow = v === null || v === undefined || v >= actor.version;
    const cursor = follow ? actor.version : Math.max(1, Math.min(v, actor.version));
    // Only the page of steps around the cursor: a long history is read a page at a time.
    const [replay, chart] = await Promise.all([loadSteps(id, pageAfter(cursor, actor.version)), chartFor(actor.kind)]);
    if (serial !== state.loadSerial) return;
    state.actor = actor;
    state.steps = replay.steps;
    state.follow = follow;
    state.cursor = cursor;
    state.diff = { a: actor.version > 1 ? 1 : actor.version, b: actor.version };
    renderActor(chart);
    window.scrollTo(0, 0);
    await setCursor(state.cursor);
    void renderDiff();
  } catch (err) {
    if (serial !== state.loadSerial) return;
    clear(
      $('#detail'),
      h(
        'div',
        { class: 'empty error', 'data-testid': 'detail-error' },
        h('h2', {}, `Cannot show ${id}`),
        h('p', {}, `${err.code ?? ''} ${err.message}`),
      ),
    );
  }
}

function renderActor(chart) {
  const a = state.actor;
  const detail = $('#detail');
  clear(
    detail,
    headerCard(a),
    a.kind === 'execution' ? executionCard(a.context) : instanceCard(a),
    h(
      'section',
      { class: 'card chart-card' },
      h(
        'div',
        { class: 'card-head' },
        h('h3', {}, 'Statechart'),
        h(
          'span',
          { class: 'muted small' },
          `${a.kind} machine · the highlighted state is the one at the selected event`,
        ),
      ),
      h('div', { id: 'chart', 'data-testid': 'statechart' }, renderChart(chart, a)),
    ),
    h(
      'div',
      { class: 'split' },
      h(
        'section',
        { class: 'card timeline-card', 'data-testid': 'timeline' },
        h(
          'div',
          { class: 'card-head' },
          h('h3', {}, 'Timeline'),
          h('span', { class: 'muted small', id: 'timeline-count' }),
          h('span', { class: 'grow' }),
          h(
            'button',
            {
              class: 'btn small',
              id: 'steps-earlier',
              'data-testid': 'steps-earlier',
              title: 'the page of earlier events',
              onclick: () => turnPage(-1),
            },
            'earlier',
          ),
          h(
            'button',
            {
              class: 'btn small',
              id: 'steps-later',
              'data-testid': 'steps-later',
              title: 'the page of later events',
              onclick: () => turnPage(1),
            },
            'later',
          ),
        ),
        scrubber(a),
        h('ol', { class: 'events', id: 'events', 'data-testid': 'event-list' }),
      ),
      h(
        'div',
        { class: 'right-col' },
        h('section', { class: 'card', id: 'state-at', 'data-testid': 'state-at' }),
        h('section', { class: 'card', id: 'diff', 'data-testid': 'diff-panel' }),
      ),
    ),
  );
  renderEvents();
}

function headerCard(a) {
  const actions = [];
  if (a.kind === 'instance' && a.status === 'active') {
    actions.push(
      h(
        'button',
        { class: 'btn', 'data-testid': 'action-stop', onclick: () => act(a.id, 'stop', 'POST', { graceMs: 5000 }) },
        'Stop',
      ),
      h(
        'button',
        { class: 'btn danger', 'data-testid': 'action-kill', onclick: () => act(a.id, 'kill', 'POST', {}) },
        'Kill',
      ),
    );
  }
  return h(
    'section',
    { class: 'card header-card', 'data-testid': 'actor-header' },
    h(
      'div',
      { class: 'title-row' },
      h('span', { class: `kind-badge ${a.kind}` }, a.kind === 'instance' ? 'app instance' : 'execution'),
      h('h2', { class: 'actor-title', 'data-testid': 'actor-title' }, a.id),
      statePill(a.state, { class: `pill big ${tone(a.state)}`, 'data-testid': 'actor-current-state' }),
      h('span', { class: 'grow' }),
      actions,
    ),
    alertFor(a),
    h(
      'dl',
      { class: 'facts' },
      fact('status', a.status),
      fact('version', `v${a.version}`),
      fact('created', a.createdAt, a.createdAt ? `${timeOfDay(a.createdAt)} · ${ago(a.createdAt)}` : '—'),
      fact('updated', a.updatedAt, a.updatedAt ? `${timeOfDay(a.updatedAt)} · ${ago(a.updatedAt)}` : '—'),
      fact('stream', a.stream),
      a.traceId
        ? h(
            'div',
            { class: 'fact' },
            h('dt', {}, 'trace'),
            h(
              'dd',
              { 'data-testid': 'actor-trace' },
              a.traceUrl
                ? h('a', { class: 'mono', href: a.traceUrl, target: '_blank', rel: 'noopener noreferrer' }, a.traceId)
                : h('span', { class: 'mono' }, a.traceId),
            ),
          )
        : null,
    ),
  );
}

/** Why an actor is not fine, in one line at the top (failure of an execution, last crash of an instance). */
function alertFor(a) {
  const c = a.context || {};
  const sup = a.supervision;
  if (sup && !sup.supervised && a.status === 'active') {
    // The state shown is the last one recorded: nothing has watched this actor since.
    return h(
      'p',
      { class: 'alert', 'data-testid': 'actor-unsupervised' },
      h('b', {}, 'not supervised'),
      sup.since
        ? ` since ${sup.since} (last heartbeat from ${sup.node}) — this is the last known state`
        : ' — no supervisor has run on this log; this is the last known state',
    );
  }
  if (a.kind === 'execution' && c.failure) {
    return h(
      'p',
      { class: 'alert', 'data-testid': 'actor-alert' },
      h('b', {}, `${c.failure.reason} failure · ${c.failure.code}`),
      ` — ${c.failure.message}`,
    );
  }
  if (a.kind === 'instance' && c.lastCrash && /^crashed|^lost/.test(a.state)) {
    const k = c.lastCrash;
    return h(
      'p',
      { class: 'alert', 'data-testid': 'actor-alert' },
      h('b', {}, `crashed (${k.reason})`),
      ` — ${k.message}${c.nextRestartAt ? ` · restart due ${timeOfDay(c.nextRestartAt)}` : ''}`,
    );
  }
  return null;
}

function fact(label, title, text) {
  return h('div', { class: 'fact' }, h('dt', {}, label), h('dd', { title }, text ?? title));
}

async function act(id, what, method, body) {
  try {
    await api(`/api/actors/${enc(id)}/${what}`, {
      method,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    toast(`${what} sent to ${id}`, 'ok');
  } catch (err) {
    toast(`${what} failed: ${err.code}: ${err.message}`);
  }
}

function instanceCard(a) {
  const c = a.context || {};
  const spec = c.spec || {};
  return h(
    'section',
    { class: 'card', 'data-testid': 'instance-panel' },
    h('div', { class: 'card-head' }, h('h3', {}, 'Instance'), h('span', { class: 'muted small' }, spec.appDir ?? '')),
    h(
      'dl',
      { class: 'kv two' },
      kv('app', spec.appId, 'inst-app'),
      kv('sandbox', spec.sandbox),
      kv('runtime', spec.runtime),
      kv('address', c.host && c.port ? `${c.host}:${c.port}` : null),
      kv('pid', c.pid),
      kv('container', c.containerId, null, true),
      kv('identity', c.identity),
      kv('tools', spec.tools && spec.tools.length ? spec.tools.join(', ') : 'none', 'inst-tools'),
      kv(
        'restart policy',
        spec.restart
          ? `${spec.restart.policy}, max ${spec.restart.maxRestarts}, backoff ${spec.restart.backoffMs} ms`
          : null,
      ),
      kv('restarts', c.restarts),
      kv('next restart', c.nextRestartAt),
      kv(
        'last crash',
        c.lastCrash
          ? `${c.lastCrash.reason}: ${c.lastCrash.message}${c.lastCrash.exitCode !== null ? ` (exit ${c.lastCrash.exitCode})` : ''}`
          : null,
        'inst-crash',
      ),
      kv(
        'last exit',
        c.lastExit ? `exit ${c.lastExit.exitCode ?? '—'}${c.lastExit.signal ? ` (${c.lastExit.signal})` : ''}` : null,
      ),
      kv('adopted', c.adopted ? 'yes (found alive after a supervisor restart)' : null),
      kv('warnings', c.warnings && c.warnings.length ? c.warnings.join('; ') : null),
    ),
  );
}

function kv(label, value, testid, mono = false) {
  if (value === null || value === undefined || value === '') return null;
  const text = typeof value === 'object' ? JSON.stringify(value) : String(value);
  return h(
    'div',
    { class: 'kv-row' },
    h('dt', {}, label),
    h('dd', { class: mono ? 'mono' : '', 'data-testid': testid }, text),
  );
}

function cidRow(label, value, testid) {
  if (!value) return null;
  return h(
    'div',
    { class: 'kv-row' },
    h('dt', {}, label),
    h(
      'dd',
      { class: 'mono cid' },
      h('span', { 'data-testid': testid }, String(value)),
      h(
        'button',
        {
          class: 'copy',
          title: 'copy',
          onclick: () => navigator.clipboard?.writeText(String(value)).then(() => toast('copied', 'ok')),
        },
        'copy',
      ),
    ),
  );
}

function executionCard(c) {
  const req = c.request || {};
  const resolved = c.resolved || {};
  const mat = c.materialized || {};
  const known = new Set(['codeCid', 'runtimeCid', 'image', 'limits']);
  const imageKeys = Object.keys(resolved).filter((k) => /image/i.test(k));
  const volumeEntries = Object.entries(mat).filter(([k]) => /volume/i.test(k));
  const digestEntries = [
    ...Object.entries(resolved).filter(([k, v]) => /digest/i.test(k) || (typeof v === 'string' && /@sha256:/.test(v))),
    ...Object.entries(mat).filter(([k, v]) => /digest/i.test(k) || (typeof v === 'string' && /^sha256:/.test(v))),
  ];
  const otherResolved = Object.entries(resolved).filter(
    ([k]) => !known.has(k) && !imageKeys.includes(k) && !/digest/i.test(k),
  );
  const otherMat = Object.entries(mat).filter(
    ([k, v]) => !/volume/i.test(k) && !/digest/i.test(k) && !(typeof v === 'string' && /^sha256:/.test(v)),
  );
  const outcome = c.outcome;
  return h(
    'section',
    { class: 'card exec-card', 'data-testid': 'execution-panel' },
    h(
      'div',
      { class: 'card-head' },
      h('h3', {}, 'Execution'),
      h('span', { class: 'muted small' }, 'what was resolved, pinned and run — recorded in the log'),
    ),
    h(
      'div',
      { class: 'exec-grid' },
      h(
        'div',
        { class: 'exec-block' },
        h('h4', {}, 'Request'),
        h(
          'dl',
          { class: 'kv' },
          kv('code URI', req.uri, 'exec-uri', true),
          kv('handler', req.handler, 'exec-handler'),
          kv('caller', req.callerDid, null, true),
          kv('timeout', req.timeoutMs ? `${req.timeoutMs} ms` : null),
          kv('deadline', c.deadline),
        ),
        h('h5', {}, 'input'),
        jsonView(req.input ?? null, { testid: 'exec-input' }),
      ),
      h(
        'div',
        { class: 'exec-block' },
        h('h4', {}, 'Pinned by content'),
        c.resolved
          ? h(
              'dl',
              { class: 'kv' },
              cidRow('code CID', resolved.codeCid, 'exec-code-cid'),
              cidRow('runtime CID', resolved.runtimeCid, 'exec-runtime-cid'),
              imageKeys.map((k) => cidRow(k, resolved[k], k === 'image' ? 'exec-image' : null)),
              digestEntries
                .filter(([k]) => !imageKeys.includes(k))
                .map(([k, v]) => cidRow(k, v, k === 'runtimeDigest' ? 'exec-runtime-digest' : null)),
              otherResolved.map(([k, v]) => kv(k, v, null, typeof v === 'string')),
            )
          : h('p', { class: 'muted small' }, 'not resolved (yet)'),
        h('h4', {}, 'Limits'),
        resolved.limits && typeof resolved.limits === 'object'
          ? h(
              'div',
              { class: 'chips', 'data-testid': 'exec-limits' },
              Object.entries(resolved.limits).map(([k, v]) =>
                h('span', { class: 'chip' }, h('b', {}, k), ` ${typeof v === 'object' ? JSON.stringify(v) : v}`),
              ),
            )
          : h('p', { class: 'muted small' }, 'no limits recorded'),
        h('h4', {}, 'Volumes'),
        volumeEntries.length
          ? h(
              'ul',
              { class: 'volumes', 'data-testid': 'exec-volumes' },
              volumeEntries.map(([k, v]) =>
                h(
                  'li',
                  {},
                  h('span', { class: 'muted' }, k),
                  ' ',
                  h('code', {}, typeof v === 'string' ? v : JSON.stringify(v)),
                ),
              ),
            )
          : h('p', { class: 'muted small' }, c.materialized ? 'no volumes recorded' : 'not materialized (yet)'),
        h(
          'dl',
          { class: 'kv' },
          otherMat.map(([k, v]) => kv(k, v, null, typeof v === 'string')),
          kv('container', c.containerId, 'exec-container', true),
        ),
      ),
      h(
        'div',
        { class: 'exec-block' },
        h('h4', {}, 'Outcome'),
        outcome
          ? h(
              'p',
              {},
              statePill(outcome.status, { 'data-testid': 'exec-outcome' }),
              ' ',
              h('span', { class: 'muted small' }, outcome.at ? `${timeOfDay(outcome.at)}` : ''),
            )
          : h('p', { class: 'muted small' }, 'still running'),
        c.result
          ? [
              h('h5', {}, 'output'),
              jsonView(c.result.output ?? null, { testid: 'exec-output' }),
              c.result.outputHash ? h('p', { class: 'mono small muted hash' }, c.result.outputHash) : null,
            ]
          : null,
        c.failure
          ? h(
              'div',
              { class: 'failure', 'data-testid': 'exec-failure' },
              h('b', {}, `${c.failure.reason} · ${c.failure.code}`),
              h('p', {}, c.failure.message),
            )
          : null,
        c.stderrTail ? [h('h5', {}, 'stderr (tail)'), h('pre', { class: 'stderr' }, c.stderrTail)] : null,
        waterfall(c),
        c.steps && c.steps.length
          ? [
              h('h5', {}, 'steps'),
              h(
                'ol',
                { class: 'steps' },
                c.steps.map((s) =>
                  h(
                    'li',
                    {},
                    h('span', { class: 'mono small' }, timeOfDay(s.at)),
                    ' ',
                    h('b', {}, s.name),
                    ' ',
                    h('span', { class: 'muted small' }, Object.keys(s.detail || {}).length ? short(s.detail, 70) : ''),
                  ),
                ),
              ),
            ]
          : null,
      ),
    ),
  );
}

/**
 * Where the execution's time went: the outcome's latency profile (ms per step) laid out from the request. The
 * phases before the sandbox run end to end; the run starts at the execution.started time. Older logs: no profile.
 */
function waterfall(c) {
  const p = c.profile;
  if (!p || typeof p !== 'object') return null;
  const t0 = Date.parse(c.requestedAt || '');
  const started = Date.parse(c.startedAt || '');
  const n = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : null);
  const rows = [];
  let at = 0;
  for (const [step, key] of [
    ['resolve', 'resolveMs'],
    ['materialize', 'materializeMs'],
    [p.prestarted ? 'create (pre-started: claimed)' : 'create', 'createMs'],
  ]) {
    const ms = n(p[key]);
    if (ms === null) continue;
    rows.push({ step, from: at, ms });
    at += ms;
  }
  if (n(p.invokeMs) !== null) {
    const run = Number.isFinite(t0) && Number.isFinite(started) ? started - t0 : at;
    const envelope = run + (n(p.attachMs) ?? 0) + (n(p.adapterReadyMs) ?? n(p.startMs) ?? 0);
    rows.push({ step: 'attach', from: run, ms: n(p.attachMs) ?? 0 });
    rows.push({
      step: p.prestarted ? 'start (ahead of time)' : 'start',
      from: run + (n(p.attachMs) ?? 0),
      ms: n(p.startMs) ?? 0,
    });
    for (const [step, key] of [
      ['first frame', 'firstFrameMs'],
      ['result', 'resultMs'],
      ['exit', 'exitMs'],
    ])
      if (n(p[key]) !== null) rows.push({ step, from: envelope, ms: p[key] });
  }
  const end = Math.max(1, ...rows.map((r) => r.from + r.ms));
  return [
    h('h5', {}, `latency${p.prestarted ? ' · pre-started sandbox' : ''}`),
    h(
      'div',
      { class: 'waterfall', 'data-testid': 'exec-waterfall' },
      rows.map((r) =>
        h(
          'div',
          { class: 'wf-row' },
          h('span', { class: 'wf-step small' }, r.step),
          h(
            'span',
            { class: 'wf-track' },
            h('span', {
              class: 'wf-bar',
              style: `left:${(100 * r.from) / end}%;width:${Math.max(0.5, (100 * r.ms) / end)}%`,
            }),
          ),
          h('span', { class: 'wf-ms mono small' }, `${Math.round(r.ms * 10) / 10} ms`),
        ),
      ),
    ),
  ];
}

// ---------------------------------------------------------------------------------------------
// Statechart: nested boxes from the machine definition; transitions grouped by target

function renderChart(chart, actor) {
  const kind = actor.kind;
  const body = h('div', { class: 'chart' });
  if (chart.root.transitions.length) {
    body.append(
      h(
        'div',
        { class: 'chart-any' },
        h('span', { class: 'muted small' }, 'in any state: '),
        transitionGroups(chart.root, kind),
      ),
    );
  }
  body.append(
    h(
      'div',
      { class: 'states' },
      chart.root.states.map((s) => stateBox(s, chart.root, kind)),
    ),
  );
  return body;
}

function stateBox(s, parent, kind) {
  const classes = ['state', s.type];
  if (parent.initial === s.key) classes.push('initial');
  return h(
    'div',
    { class: classes.join(' '), 'data-testid': 'chart-state', 'data-path': s.path },
    h(
      'div',
      { class: 'state-head' },
      parent.initial === s.key ? h('span', { class: 'initial-mark', title: 'initial state' }, '●') : null,
      h('span', { class: 'state-name' }, s.key),
      s.type === 'final' ? h('span', { class: 'tag' }, 'final') : null,
    ),
    s.entry.length
      ? h(
          'div',
          { class: 'entry' },
          h('span', { class: 'muted' }, 'entry '),
          s.entry.map((e) => h('span', { class: 'fx' }, e)),
        )
      : null,
    transitionGroups(s, kind),
    s.states.length
      ? h(
          'div',
          { class: 'states nested' },
          s.states.map((c) => stateBox(c, s, kind)),
        )
      : null,
  );
}

function transitionGroups(s, kind) {
  const groups = new Map();
  for (const t of s.transitions) {
    const target = t.targets.length ? t.targets.join(', ') : '';
    if (!groups.has(target)) groups.set(target, []);
    groups.get(target).push(t);
  }
  if (groups.size === 0) return null;
  return h(
    'ul',
    { class: 'transitions' },
    [...groups.entries()].map(([target, ts]) =>
      h(
        'li',
        {},
        h('span', { class: 'target' }, target ? `→ ${target}` : '↺'),
        ts.map((t) =>
          h(
            'span',
            {
              class: `ev${t.event ? '' : ' always'}`,
              'data-event': t.event,
              'data-source': s.path,
              'data-targets': (t.targets ?? []).join(' '),
              title: [
                t.event || 'always (eventless)',
                t.guard ? `if ${t.guard}` : '',
                t.actions.length ? `runs ${t.actions.join(', ')}` : '',
              ]
                .filter(Boolean)
                .join(' · '),
            },
            t.event ? shortType(t.event, kind) : `always${t.guard ? ` [${t.guard}]` : ''}`,
          ),
        ),
      ),
    ),
  );
}

/** Marks the state at the cursor (and its ancestors) and the transition the cursor's event took. */
function highlightChart(statePath, step) {
  const chart = $('#chart');
  if (!chart) return;
  for (const el of chart.querySelectorAll('.state')) {
    const p = el.getAttribute('data-path');
    el.classList.toggle('current', p === statePath);
    el.classList.toggle('ancestor', statePath.startsWith(`${p}.`));
  }
  for (const el of chart.querySelectorAll('.ev')) el.classList.remove('taken');
  if (step && step.accepted) {
    const { from, to } = step;
    const candidates = [...chart.querySelectorAll('.ev')].filter((el) => {
      const src = el.getAttribute('data-source');
      return (
        el.getAttribute('data-event') === step.event.type && (src === from || src === '' || from.startsWith(`${src}.`))
      );
    });
    // One event may have several guarded transitions from a state: mark the one whose target the step reached
    // (a targetless one stays where it was). Eventless steps after it can move on: then mark every candidate.
    const reached = (el) => {
      const targets = (el.getAttribute('data-targets') ?? '').split(' ').filter(Boolean);
      return targets.length === 0 ? to === from : targets.some((t) => to === t || to.startsWith(`${t}.`));
    };
    const taken = candidates.filter(reached);
    for (const el of taken.length > 0 ? taken : candidates) el.classList.add('taken');
  }
}

// ---------------------------------------------------------------------------------------------
// Timeline and scrubber

function scrubber(a) {
  const max = Math.max(1, a.version);
  return h(
    'div',
    { class: 'scrubber' },
    h(
      'button',
      {
        class: 'btn icon',
        title: 'previous event',
        'data-testid': 'scrub-prev',
        onclick: () => setCursor(Math.max(1, state.cursor - 1), true),
      },
      '◀',
    ),
    h('input', {
      type: 'range',
      min: 1,
      max,
      step: 1,
      value: state.cursor ?? max,
      id: 'scrubber',
      'data-testid': 'scrubber',
      'aria-label': 'event',
      oninput: (e) => setCursor(Number(e.target.value), true),
    }),
    h(
      'button',
      {
        class: 'btn icon',
        title: 'next event',
        'data-testid': 'scrub-next',
        onclick: () => setCursor(Math.min(state.actor.version, state.cursor + 1), true),
      },
      '▶',
    ),
    h('span', { class: 'scrub-label', id: 'scrub-label', 'data-testid': 'scrub-label' }),
    h(
      'button',
      {
        class: 'btn small',
        id: 'follow',
        'data-testid': 'follow-live',
        onclick: () => setCursor(state.actor.version, true),
      },
      'latest',
    ),
  );
}

function renderEvents() {
  const a = state.actor;
  const list = $('#events');
  if (!list) return;
  const first = state.steps[0]?.version ?? 0;
  const last = state.steps.at(-1)?.version ?? 0;
  $('#timeline-count').textContent =
    state.steps.length === a.version
      ? `${a.version} event${a.version === 1 ? '' : 's'}`
      : `${a.version} events · showing v${first}–v${last}`;
  $('#steps-earlier').disabled = first <= 1;
  $('#steps-later').disabled = last >= a.version;
  const kind = a.kind;
  clear(
    list,
    state.steps.map((s, i) => {
      const rejected = s.event.type === `${kind}.rejected`;
      const moved = s.from !== s.to;
      return h(
        'li',
        {
          class: `event${s.version === state.cursor ? ' selected' : ''}${s.accepted ? '' : ' refused'}`,
          'data-testid': 'event-row',
          'data-version': s.version,
          'data-type': s.event.type,
          tabindex: 0,
          onclick: () => setCursor(s.version, true),
          onkeydown: (e) => {
            if (e.key === 'Enter' || e.key === ' ') setCursor(s.version, true);
          },
        },
        h('span', { class: `bar ${tone(s.to)}` }),
        h('span', { class: 'ev-version' }, `v${s.version}`),
        h(
          'span',
          { class: 'ev-main' },
          h(
            'span',
            { class: 'ev-type' },
            shortType(s.event.type, kind),
            rejected
              ? h(
                  'span',
                  { class: 'refused-note' },
                  ` ${shortType(s.event.data?.rejected?.type ?? '?', kind)} refused in ${s.event.data?.state ?? '?'}`,
                )
              : null,
          ),
          h(
            'span',
            { class: 'ev-move' },
            moved
              ? [h('span', { class: 'from' }, s.from), ' → ', h('b', {}, s.to)]
              : h('span', { class: 'muted' }, `stays ${s.to}`),
          ),
          s.effects && s.effects.length
            ? h(
                'span',
                { class: 'ev-fx' },
                s.effects.map((e) => h('span', { class: 'fx', title: JSON.stringify(e.params) }, e.type)),
              )
            : null,
        ),
        h(
          'span',
          { class: 'ev-time', title: s.event.at },
          timeOfDay(s.event.at),
          h('br'),
          h('span', { class: 'muted' }, i > 0 ? delta(state.steps[i - 1].event.at, s.event.at) : ''),
        ),
      );
    }),
  );
}

/** Shows the page of steps after `after` (a newer request wins); false when another page or actor came first. */
async function showPage(after) {
  const a = state.actor;
  const serial = ++state.pageSerial;
  const replay = await loadSteps(a.id, after);
  if (serial !== state.pageSerial || state.actor !== a) return false;
  state.steps = replay.steps;
  renderEvents();
  void renderDiff();
  return true;
}

/** The page before (-1) or after (1) the one shown; the cursor moves to its nearest end. */
async function turnPage(dir) {
  const a = state.actor;
  if (!a || state.steps.length === 0) return;
  const first = state.steps[0].version;
  const last = state.steps.at(-1).version;
  const after = dir < 0 ? Math.max(0, first - 1 - PAGE) : Math.min(last, Math.max(0, a.version - PAGE));
  try {
    if (await showPage(after)) await setCursor(dir < 0 ? state.steps.at(-1).version : state.steps[0].version, true);
  } catch (err) {
    toast(`cannot load events: ${err.message}`);
  }
}

/** Loads the page holding version v when the one shown does not. */
async function ensurePage(v) {
  const a = state.actor;
  const first = state.steps[0]?.version ?? 0;
  const last = state.steps.at(-1)?.version ?? 0;
  if (a.version === 0 || (v >= first && v <= last)) return;
  await showPage(pageAfter(v, a.version));
}

async function setCursor(v, fromUser = false) {
  const a = state.actor;
  if (!a) return;
  v = Math.max(1, Math.min(v, a.version));
  state.cursor = v;
  try {
    await ensurePage(v);
  } catch (err) {
    toast(`cannot load events: ${err.message}`);
  }
  if (state.actor !== a || state.cursor !== v) return;
  if (fromUser) state.follow = v === a.version;
  setHashQuietly(state.follow ? `#/actor/${enc(a.id)}` : `#/actor/${enc(a.id)}/v/${v}`);
  const range = $('#scrubber');
  if (range && Number(range.value) !== v) range.value = String(v);
  const step = state.steps.find((s) => s.version === v);
  const list = $('#events');
  for (const el of document.querySelectorAll('.event')) {
    const on = Number(el.getAttribute('data-version')) === v;
    el.classList.toggle('selected', on);
    // Keep the selected event visible inside the list's own scroll box (the page does not jump).
    if (
      on &&
      list &&
      (el.offsetTop < list.scrollTop || el.offsetTop + el.offsetHeight > list.scrollTop + list.clientHeight)
    ) {
      list.scrollTop = Math.max(0, el.offsetTop - list.clientHeight / 2);
    }
  }
  $('#scrub-label').textContent = step
    ? `v${v} of ${a.version} · ${shortType(step.event.type, a.kind)}`
    : `v${v} of ${a.version}`;
  $('#follow').classList.toggle('on', state.follow);

  const serial = ++state.cursorSerial;
  try {
    const [view, prev] = await Promise.all([replayAt(a.id, v), replayAt(a.id, v - 1)]);
    if (serial !== state.cursorSerial || state.actor !== a) return;
    highlightChart(view.state, step);
    renderStateAt(view, prev, step);
  } catch (err) {
    if (serial === state.cursorSerial) toast(`replay failed: ${err.message}`);
  }
}

function renderStateAt(view, prev, step) {
  const a = state.actor;
  const changes = diffContext(prev.context, view.context);
  const past = view.to < a.version;
  clear(
    $('#state-at'),
    h(
      'div',
      { class: 'card-head' },
      h('h3', {}, `State at v${view.to}`),
      h('span', { class: 'grow' }),
      h(
        'button',
        { class: 'btn small', 'data-testid': 'set-a', onclick: () => setDiff('a', view.to) },
        'compare from here',
      ),
      h(
        'button',
        { class: 'btn small', 'data-testid': 'set-b', onclick: () => setDiff('b', view.to) },
        'compare to here',
      ),
    ),
    past
      ? h(
          'p',
          { class: 'past-note', 'data-testid': 'past-note' },
          `You are looking at the past: ${a.version - view.to} later event${a.version - view.to === 1 ? '' : 's'} exist. `,
          h(
            'a',
            {
              href: `#/actor/${enc(a.id)}`,
              onclick: (e) => {
                e.preventDefault();
                void setCursor(a.version, true);
              },
            },
            'Jump to now',
          ),
        )
      : null,
    h(
      'div',
      { class: 'state-line' },
      statePill(view.state, { class: `pill big ${tone(view.state)}`, 'data-testid': 'scrub-state' }),
      step
        ? h(
            'span',
            { class: 'muted small' },
            `after `,
            h('b', {}, step.event.type),
            ` at ${timeOfDay(step.event.at)}${step.accepted ? '' : ' (not accepted)'}`,
          )
        : null,
    ),
    step && step.effects && step.effects.length
      ? h(
          'p',
          { class: 'small' },
          h('span', { class: 'muted' }, 'effects that ran live: '),
          step.effects.map((e) => h('span', { class: 'fx', title: JSON.stringify(e.params) }, e.type)),
        )
      : null,
    h('h4', {}, 'What this event changed'),
    changeList(changes, 'event-changes'),
    h(
      'details',
      { class: 'ctx', open: true },
      h('summary', {}, 'Context'),
      jsonView(view.context, { changed: changedPaths(changes), testid: 'scrub-context' }),
    ),
  );
  // Bring the first changed line of the context into view (inside its own scroll box only).
  const pre = $('[data-testid="scrub-context"]');
  const first = pre && pre.querySelector('.j-line.changed');
  if (first) pre.scrollTop = Math.max(0, first.offsetTop - 60);
}

// ---------------------------------------------------------------------------------------------
// Diff between two points

function setDiff(which, v) {
  state.diff[which] = v;
  void renderDiff();
}

async function renderDiff() {
  const a = state.actor;
  const panel = $('#diff');
  if (!a || !panel) return;
  const { a: va, b: vb } = state.diff;
  // The page's steps, and a chosen version outside the page by its number.
  const shown = new Set(state.steps.map((s) => s.version));
  const outside = (n) =>
    n !== null && n > 0 && !shown.has(n) ? [h('option', { value: n, selected: true }, `v${n}`)] : [];
  const options = (selected) => [
    h('option', { value: 0, selected: selected === 0 }, 'v0 · before any event'),
    selected < (state.steps[0]?.version ?? 0) ? outside(selected) : [],
    state.steps.map((s) =>
      h(
        'option',
        { value: s.version, selected: s.version === selected },
        `v${s.version} · ${shortType(s.event.type, a.kind)} → ${s.to}`,
      ),
    ),
    selected > (state.steps.at(-1)?.version ?? 0) ? outside(selected) : [],
  ];
  const pick = (which) =>
    h(
      'select',
      { 'data-testid': `diff-${which}`, onchange: (e) => setDiff(which, Number(e.target.value)) },
      options(state.diff[which]),
    );
  clear(
    panel,
    h('div', { class: 'card-head' }, h('h3', {}, 'Compare two moments')),
    h('div', { class: 'diff-pick' }, h('label', {}, 'from ', pick('a')), h('label', {}, 'to ', pick('b'))),
    h('p', { class: 'muted small', id: 'diff-summary' }, 'computing…'),
    h('div', { id: 'diff-body' }),
  );
  try {
    const [x, y] = await Promise.all([replayAt(a.id, va), replayAt(a.id, vb)]);
    if (state.diff.a !== va || state.diff.b !== vb || state.actor !== a) return;
    const changes = diffContext(x.context, y.context);
    const counts = ['added', 'removed', 'changed']
      .map((op) => `${changes.filter((c) => c.op === op).length} ${op}`)
      .join(' · ');
    $('#diff-summary').replaceChildren(statePill(x.state), ' → ', statePill(y.state), `   ${counts}`);
    clear($('#diff-body'), changeList(changes, 'diff-changes'));
  } catch (err) {
    $('#diff-summary').textContent = `cannot compare: ${err.message}`;
  }
}

// ---------------------------------------------------------------------------------------------
// Live updates: server-sent events, read with fetch so the token goes in a header, not the URL

const timers = {};
function debounce(name, ms, fn) {
  clearTimeout(timers[name]);
  timers[name] = setTimeout(fn, ms);
}

function setLive(s, text) {
  const el = $('[data-testid="live-status"]');
  el.setAttribute('data-state', s);
  el.querySelector('.live-text').textContent = text ?? s;
}

function onLiveEvent(e) {
  state.lastSeq = e.seq;
  setLive('live', `live · #${e.seq}`);
  debounce('list', 200, () => void loadActors().catch(() => undefined));
  if (state.actor && e.stream === state.actor.stream) debounce('actor', 120, () => void refreshActor());
  const feed = $('#activity');
  if (feed) {
    if (feed.querySelector('li:not([data-testid])')) clear(feed);
    feed.prepend(activityRow(e));
    while (feed.children.length > 60) feed.lastElementChild.remove();
  }
}

async function refreshActor() {
  const a = state.actor;
  if (!a) return;
  const actor = await api(`/api/actors/${enc(a.id)}`);
  const follow = state.follow;
  const keepCursor = state.cursor;
  // Following: the latest page; else the page shown stays.
  const after = follow ? pageAfter(actor.version, actor.version) : Math.max(0, (state.steps[0]?.version ?? 1) - 1);
  const replay = await loadSteps(a.id, after);
  if (state.actor !== a) return;
  const chart = await chartFor(actor.kind);
  state.actor = actor;
  state.steps = replay.steps;
  if (state.diff.b === a.version) state.diff.b = actor.version;
  renderActor(chart);
  await setCursor(follow ? actor.version : keepCursor);
  void renderDiff();
}

async function stream() {
  let backoff = 1000;
  for (;;) {
    try {
      const q = state.lastSeq !== undefined ? `?afterSeq=${state.lastSeq}` : '';
      const res = await fetch(`/api/events/stream${q}`, {
        headers: { authorization: `Bearer ${state.token}`, accept: 'text/event-stream' },
      });
      if (res.status === 401) {
        setLive('off', 'no token');
        showLogin('That token was refused. Check $RUNLOG_HOME/token.');
        return;
      }
      if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
      setLive('live', state.lastSeq !== undefined ? `live · #${state.lastSeq}` : 'live');
      backoff = 1000;
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += decoder.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const frame = buf.slice(0, i);
          buf = buf.slice(i + 2);
          let type = 'message';
          const data = [];
          for (const line of frame.split('\n')) {
            if (line.startsWith('event:')) type = line.slice(6).trim();
            else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
          }
          if (type === 'event' && data.length) onLiveEvent(JSON.parse(data.join('\n')));
        }
      }
    } catch {
      // fall through to reconnect
    }
    setLive('off', 'reconnecting…');
    await new Promise((r) => setTimeout(r, backoff));
    backoff = Math.min(backoff * 2, 10_000);
  }
}

// ---------------------------------------------------------------------------------------------
// Start

async function start() {
  takeTokenFromUrl();
  $('#filter-text').addEventListener('input', (e) => {
    state.filters.text = e.target.value;
    renderList();
  });
  $('#filter-kind').addEventListener('change', (e) => {
    state.filters.kind = e.target.value;
    renderList();
  });
  $('#filter-state').addEventListener('change', (e) => {
    state.filters.state = e.target.value;
    renderList();
  });
  $('#filter-all').addEventListener('change', (e) => {
    state.filters.all = e.target.checked;
    void loadActors();
  });
  $('#login-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const t = $('#login-token').value.trim();
    if (!/^[0-9a-fA-F]{64}$/.test(t)) {
      $('#login-error').textContent = 'A runlog token is 64 hex characters.';
      return;
    }
    sessionStorage.setItem(TOKEN_KEY, t);
    window.location.reload();
  });
  window.addEventListener('hashchange', route);
  if (!state.token) {
    setLive('off', 'no token');
    showLogin();
    return;
  }
  try {
    const health = await api('/api/health');
    $('[data-testid="db-path"]').textContent = health.db;
    state.lastSeq = health.lastSeq;
    await loadActors();
  } catch (err) {
    if (err.status !== 401) toast(`cannot reach the supervisor: ${err.message}`);
    return;
  }
  route();
  void stream();
}

void start();
