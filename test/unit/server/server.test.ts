// The HTTP API against a real server on 127.0.0.1:0 and a real SQLite log written by createRunlog
// (fake effect handlers drive the actors; no Docker, no PDS).
import { request as httpRequest } from 'node:http';
import { chmodSync, statSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Runlog } from '../../../src/supervisor/runlog.ts';
import { IllegalEventError } from '../../../src/supervisor/host/actor-host.ts';
import { NotFoundError, RunlogError, ValidationError } from '../../../src/domain/errors.ts';
import { startServer, type RunningServer } from '../../../src/server/http-server.ts';
import { isLoopbackAddress, isLoopbackHostHeader, parseListen } from '../../../src/server/listen.ts';
import { bearerToken, ensureToken, tokenMatches } from '../../../src/server/token.ts';
import { CODE_CID, RUNTIME_CID, seededRunlog, type Seeded } from '../../support/browser.ts';
import { freshDirs } from '../../support/tmp.ts';
import { attachRunlogInternals, runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

const freshDir = freshDirs('runlog-server-', 'all');

/** A raw HTTP request (fetch may not set Host, and we want to see exactly what the server says). */
function raw(
  url: string,
  opts: { method?: string; headers?: Record<string, string>; body?: string | Buffer } = {},
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: opts.method ?? 'GET', headers: opts.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    if (opts.body !== undefined) req.end(opts.body);
    else req.end();
  });
}

describe('token file', () => {
  it('is created with mode 0600 (64 hex characters) and reused on the next start', () => {
    const home = freshDir();
    const first = ensureToken(home);
    expect(first.created).toBe(true);
    expect(first.token).toMatch(/^[0-9a-f]{64}$/);
    expect(statSync(first.path).mode & 0o777).toBe(0o600);
    const again = ensureToken(home);
    expect(again).toMatchObject({ created: false, token: first.token });
  });

  it('a token file with a looser mode is tightened to 0600; garbage is refused, not replaced', () => {
    const home = freshDir();
    const { path, token } = ensureToken(home);
    chmodSync(path, 0o644);
    const r = ensureToken(home);
    expect(r.tightenedFrom).toBe(0o644);
    expect(r.token).toBe(token);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    writeFileSync(path, 'not a token\n', { mode: 0o600 });
    expect(() => ensureToken(home)).toThrow(expect.objectContaining({ code: 'TOKEN_INVALID' }));
  });

  it('compares tokens in constant time and parses only Bearer credentials', () => {
    expect(tokenMatches('a'.repeat(64), 'a'.repeat(64))).toBe(true);
    expect(tokenMatches('a'.repeat(64), 'a'.repeat(63))).toBe(false);
    expect(bearerToken('Bearer abc')).toBe('abc');
    expect(bearerToken('bearer  abc ')).toBe('abc');
    expect(bearerToken('Basic abc')).toBeNull();
    expect(bearerToken(undefined)).toBeNull();
  });
});

describe('--listen is loopback only', () => {
  it('accepts 127.0.0.0/8 and ::1, with or without a host', () => {
    expect(parseListen('127.0.0.1:0')).toEqual({ host: '127.0.0.1', port: 0 });
    expect(parseListen('127.4.5.6:8080')).toEqual({ host: '127.4.5.6', port: 8080 });
    expect(parseListen('[::1]:7000')).toEqual({ host: '::1', port: 7000 });
    expect(parseListen('9000')).toEqual({ host: '127.0.0.1', port: 9000 });
    expect(parseListen(undefined)).toEqual({ host: '127.0.0.1', port: 7420 });
  });

  it('accepts localhost as 127.0.0.1 (bound there, never resolved to another address)', () => {
    expect(parseListen('localhost:7420')).toEqual({ host: '127.0.0.1', port: 7420 });
    expect(parseListen('LocalHost:0')).toEqual({ host: '127.0.0.1', port: 0 });
    expect(() => parseListen('localhost.example.com:80')).toThrow(/loopback/);
  });

  it.each(['0.0.0.0:7420', '192.168.1.20:80', '[::]:7420', '[::ffff:10.0.0.1]:1', 'example.com:80', '10.0.0.1:0'])(
    'refuses %s with a usage error',
    (addr) => {
      expect(() => parseListen(addr)).toThrow(
        expect.objectContaining({ code: 'USAGE', message: expect.stringContaining('loopback') }),
      );
    },
  );

  it('refuses malformed addresses and ports', () => {
    expect(() => parseListen('127.0.0.1:99999')).toThrow(/port/);
    expect(() => parseListen('127.0.0.1')).toThrow(/address>:<port>/);
    expect(() => parseListen('::1:80')).toThrow(/address>:<port>/);
    expect(isLoopbackAddress('0:0:0:0:0:0:0:1')).toBe(true);
    expect(isLoopbackHostHeader('127.0.0.1:7420')).toBe(true);
    expect(isLoopbackHostHeader('[::1]:7420')).toBe(true);
    expect(isLoopbackHostHeader('evil.example:7420')).toBe(false);
  });

  it('startServer itself refuses a non-loopback host', async () => {
    await expect(startServer({ runlog: {} as Runlog, host: '0.0.0.0', port: 0, token: 'x' })).rejects.toMatchObject({
      code: 'USAGE',
    });
  });
});

describe('HTTP API', () => {
  let seeded: Seeded;
  let rl: Runlog;
  let server: RunningServer;
  let token: string;
  /** The library calls the write endpoints made (the stub below records them). */
  const calls: unknown[][] = [];
  let failWith: unknown = new RunlogError('NOT_SUPPORTED', 'stop is not wired into this build yet');

  const api = (path: string, init: RequestInit = {}) =>
    fetch(new URL(path, server.url), {
      ...init,
      headers: { authorization: `Bearer ${token}`, ...(init.headers as Record<string, string>) },
    });
  const json = async (path: string, init: RequestInit = {}) => {
    const res = await api(path, init);
    return { status: res.status, body: (await res.json()) as any, headers: res.headers };
  };
  const post = (path: string, body: unknown, method = 'POST') =>
    json(path, { method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

  beforeAll(async () => {
    const home = freshDir();
    seeded = await seededRunlog(home);
    rl = seeded.rl;
    token = ensureToken(home).token;
    // The real library, with the write operations replaced by recorders, so the mapping of whatever
    // they throw is tested regardless of how far they are wired. The copy shares the real one's internals.
    const lib: Runlog = attachRunlogInternals(
      {
        ...rl,
        spawnApp: (o) => (calls.push(['spawnApp', o]), Promise.reject(failWith)),
        stop: (id, o) => (calls.push(['stop', id, o]), Promise.reject(failWith)),
        kill: (id) => (calls.push(['kill', id]), Promise.reject(failWith)),
        grant: (id, t) => (calls.push(['grant', id, t]), Promise.reject(failWith)),
        revoke: (id, t) => (calls.push(['revoke', id, t]), Promise.reject(failWith)),
        execute: (o) => (calls.push(['execute', o]), Promise.reject(failWith)),
      },
      runlogInternals(rl),
    );
    server = await startServer({ runlog: lib, host: '127.0.0.1', port: 0, token, pollMs: 20 });
  });

  afterAll(async () => {
    await server?.close();
    await rl?.close();
  });

  it('binds to 127.0.0.1 on the port the OS chose', () => {
    expect(server.port).toBeGreaterThan(0);
    expect(server.url).toBe(`http://127.0.0.1:${server.port}/`);
    expect(server.inspectorUrl).toBe(`${server.url}#token=${token}`);
  });

  it('answers 401 with a JSON error without a token, with a wrong one, or with another scheme', async () => {
    for (const headers of [
      {} as Record<string, string>,
      { authorization: `Bearer ${'0'.repeat(64)}` },
      { authorization: `Basic ${token}` },
      { authorization: 'Bearer' },
    ]) {
      const res = await fetch(new URL('/api/actors', server.url), { headers });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe('Bearer realm="runlog"');
      const body = (await res.json()) as any;
      expect(body).toMatchObject({ error: { code: 'UNAUTHORIZED' } });
      expect(JSON.stringify(body)).not.toContain(token);
    }
    // Every /api path, known or not, needs the token (health too).
    for (const path of ['/api/health', '/api/nope', '/api/events/stream', '/api']) {
      expect((await fetch(new URL(path, server.url))).status).toBe(401);
    }
    const q = await fetch(new URL(`/api/actors?token=${token}`, server.url));
    expect(q.status).toBe(401);
  });

  it('serves the inspector shell without the token; it holds no data and loads nothing from elsewhere', async () => {
    const res = await fetch(server.url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/html');
    const csp = res.headers.get('content-security-policy')!;
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("connect-src 'self'");
    const html = await res.text();
    expect(html).not.toContain(token);
    expect(html).not.toMatch(/https?:\/\//);
    for (const asset of ['/app.js', '/style.css', '/favicon.svg']) {
      const a = await fetch(new URL(asset, server.url));
      expect(a.status, asset).toBe(200);
      expect(await a.text()).not.toMatch(/(?:src|href|url)\(?\s*=?\s*["']?https?:\/\//);
    }
    expect((await fetch(new URL('/../etc/passwd', server.url))).status).toBe(404);
    expect((await fetch(new URL('/secret.db', server.url))).status).toBe(404);
  });

  it('refuses requests whose Host is not a loopback name (DNS rebinding)', async () => {
    const r = await raw(new URL('/api/health', server.url).href, {
      headers: { host: 'attacker.example', authorization: `Bearer ${token}` },
    });
    expect(r.status).toBe(403);
    expect(JSON.parse(r.body)).toMatchObject({ error: { code: 'FORBIDDEN_HOST' } });
  });

  it('GET /api/health', async () => {
    const r = await json('/api/health');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ ok: true, db: rl.dbPath, home: rl.home, live: 1 });
    expect(r.body.lastSeq).toBeGreaterThan(0);
  });

  it('GET /api/actors lists live actors; ?all and ?kind filter; bad filters are 400', async () => {
    const live = await json('/api/actors');
    expect(live.status).toBe(200);
    expect(live.body.actors.map((a: any) => [a.id, a.state])).toEqual([['inst_web', 'running']]);
    const all = await json('/api/actors?all=true');
    expect(all.body.actors.map((a: any) => a.id).sort()).toEqual(
      [seeded.executionId, seeded.failedExecutionId, 'inst_old', 'inst_web'].sort(),
    );
    expect(Object.keys(all.body.actors[0]).sort()).toEqual([
      'createdAt',
      'id',
      'kind',
      'state',
      'status',
      'stream',
      'summary',
      'updatedAt',
      'version',
    ]);
    const execs = await json('/api/actors?all=1&kind=execution');
    expect(execs.body.actors.map((a: any) => a.state).sort()).toEqual(['failed', 'succeeded']);
    const bad = await json('/api/actors?kind=robot&all=maybe');
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('INVALID_REQUEST');
    expect(bad.body.error.issues).toHaveLength(2);
  });

  it('GET /api/actors/:id inspects (unique prefixes work); unknown ids are 404', async () => {
    const r = await json('/api/actors/inst_w');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      id: 'inst_web',
      kind: 'instance',
      state: 'running',
      status: 'active',
      version: 11,
      context: { restarts: 1, spec: { tools: ['curl', 'git'] } },
    });
    const e = await json(`/api/actors/${seeded.executionId}`);
    expect(e.body.context.resolved).toMatchObject({ codeCid: CODE_CID, runtimeCid: RUNTIME_CID });
    const missing = await json('/api/actors/inst_nope');
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({
      error: { code: 'NOT_FOUND', message: 'actor not found: inst_nope', details: { what: 'actor', id: 'inst_nope' } },
    });
  });

  it('GET /api/actors/:id/events with ?from and ?to', async () => {
    const r = await json('/api/actors/inst_web/events?from=5&to=7');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ id: 'inst_web', kind: 'instance', version: 11 });
    expect(r.body.events.map((e: any) => [e.version, e.type])).toEqual([
      [5, 'instance.tool-granted'],
      [6, 'instance.crashed'],
      [7, 'instance.restart-scheduled'],
    ]);
    expect((await json('/api/actors/inst_web/events?from=-1')).status).toBe(400);
  });

  it('GET /api/events gives the latest events of the whole log, or those after ?afterSeq', async () => {
    const last = await json('/api/events?limit=3');
    expect(last.status).toBe(200);
    const seqs = last.body.events.map((e: any) => e.seq);
    expect(seqs).toHaveLength(3);
    expect(seqs[2]).toBe(await runlogInternals(rl).store.lastSeq());
    const after = await json('/api/events?afterSeq=2&limit=2');
    expect(after.body.events.map((e: any) => e.seq)).toEqual([3, 4]);
    expect((await json('/api/events?limit=5000')).status).toBe(400);
  });

  it('GET /api/actors/:id/replay?to=N gives state and context at N and the steps; to=0 is the initial state', async () => {
    const r = await json('/api/actors/inst_web/replay?to=6');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      id: 'inst_web',
      to: 6,
      version: 11,
      state: 'crashed.backoff',
      context: { lastCrash: { exitCode: 137 } },
    });
    expect(r.body.steps.map((s: any) => `${s.from}→${s.to}`)).toEqual([
      'new→spawning',
      'spawning→spawning',
      'spawning→healthy',
      'healthy→running',
      'running→running',
      'running→crashed.backoff',
    ]);
    expect(r.body.steps[5].effects.map((e: any) => e.type)).toEqual(['releasePort', 'announce', 'scheduleRestart']);
    const brief = await json('/api/actors/inst_web/replay?steps=brief');
    expect(brief.body.steps).toHaveLength(11);
    expect(brief.body.steps[0]).not.toHaveProperty('context');
    const none = await json('/api/actors/inst_web/replay?to=3&steps=none');
    expect(none.body).toMatchObject({ state: 'healthy', steps: [] });
    const zero = await json('/api/actors/inst_web/replay?to=0');
    expect(zero.body).toMatchObject({ to: 0, state: 'new', context: { spec: null, restarts: 0 } });
    const beyond = await json('/api/actors/inst_web/replay?to=99');
    expect(beyond.status).toBe(400);
    expect(beyond.body.error.code).toBe('REPLAY_TO_INVALID');
  });

  it('GET /api/machines/:kind describes the statechart: nesting, initial states, transitions, entry effects', async () => {
    const r = await json('/api/machines/instance');
    expect(r.status).toBe(200);
    expect(r.body.root.initial).toBe('new');
    const crashed = r.body.root.states.find((s: any) => s.key === 'crashed');
    expect(crashed).toMatchObject({
      path: 'crashed',
      type: 'compound',
      initial: 'down',
      entry: ['releasePort', 'announce'],
    });
    const backoff = crashed.states.find((s: any) => s.key === 'backoff');
    expect(backoff.path).toBe('crashed.backoff');
    expect(backoff.transitions).toContainEqual({
      event: 'instance.restart-due',
      targets: ['spawning'],
      actions: [],
      guard: null,
    });
    const running = r.body.root.states.find((s: any) => s.key === 'running');
    expect(running.transitions.filter((t: any) => t.event === 'instance.crashed')).toEqual([
      { event: 'instance.crashed', targets: ['crashed.backoff'], actions: ['recordCrash'], guard: 'restartPlanned' },
      { event: 'instance.crashed', targets: ['crashed.down'], actions: ['recordCrash'], guard: null },
    ]);
    expect(r.body.events).toContain('instance.tool-granted');
    const exec = await json('/api/machines/execution');
    expect(exec.body.root.states.map((s: any) => s.key)).toEqual([
      'new',
      'refusing',
      'resolving',
      'materializing',
      'starting',
      'running',
      'adopted',
      'succeeded',
      'failed',
    ]);
    expect((await json('/api/machines/robot')).status).toBe(404);
  });

  it('GET /api/events/stream delivers new events as server-sent events', async () => {
    const ctrl = new AbortController();
    const res = await api('/api/events/stream', { signal: ctrl.signal });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let buf = '';
    const next = async (match: RegExp): Promise<string> => {
      for (;;) {
        const frames = buf.split('\n\n');
        const hit = frames.find((f) => match.test(f));
        if (hit) return hit;
        const { value, done } = await reader.read();
        if (done) throw new Error(`stream ended; got: ${buf}`);
        buf += decoder.decode(value, { stream: true });
      }
    };
    await next(/runlog event stream/);
    const r = await rl.send('instance', 'inst_web', { type: 'instance.pause-requested', data: {} });
    const frame = await next(/instance\.pause-requested/);
    expect(frame).toContain(`id: ${r.event.seq}`);
    expect(frame).toContain('event: event');
    const data = JSON.parse(
      frame
        .split('\n')
        .find((l) => l.startsWith('data: '))!
        .slice(6),
    );
    expect(data).toMatchObject({
      seq: r.event.seq,
      stream: 'instance-inst_web',
      version: 12,
      type: 'instance.pause-requested',
    });
    ctrl.abort();
    await rl.send('instance', 'inst_web', { type: 'instance.resume-requested', data: {} });
  });

  it('GET /api/actors/:id/events/stream?afterSeq= replays from a point and keeps to one actor', async () => {
    const ctrl = new AbortController();
    const res = await api(`/api/actors/${seeded.executionId}/events/stream?afterSeq=0`, { signal: ctrl.signal });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let buf = '';
    while ((buf.match(/^event: event$/gm) ?? []).length < 7) {
      const { value } = await reader.read();
      buf += decoder.decode(value, { stream: true });
    }
    ctrl.abort();
    const types = [...buf.matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1]!)).map((e) => [e.stream, e.version]);
    expect(types).toEqual([1, 2, 3, 4, 5, 6, 7].map((v) => [`execution-${seeded.executionId}`, v]));
    expect((await json('/api/actors/nobody/events/stream')).status).toBe(404);
    expect((await json('/api/events/stream?afterSeq=x')).status).toBe(400);
  });

  it('POST/DELETE endpoints validate their bodies and list every problem (400)', async () => {
    calls.length = 0;
    const a = await post('/api/instances', { appDir: 'relative/dir', sandbox: 'vm', extra: true });
    expect(a.status).toBe(400);
    expect(a.body.error.code).toBe('INVALID_REQUEST');
    expect(a.body.error.issues).toEqual([
      "unknown field 'extra' (known: appDir, sandbox, instanceId, node)",
      'appDir "relative/dir" must be an absolute path',
      'sandbox must be one of proot, container',
    ]);
    const e = await post('/api/executions', { input: 1, timeoutMs: -5 });
    expect(e.status).toBe(400);
    expect(e.body.error.issues).toEqual(['uri is required', 'handler is required', 'timeoutMs must be at least 1']);
    expect((await post('/api/executions', { uri: 'https://example.com/x', handler: 'h' })).body.error.issues).toEqual([
      'uri "https://example.com/x" must be an at:// URI',
    ]);
    expect((await post('/api/actors/inst_web/stop', { graceMs: 'soon' })).status).toBe(400);
    expect((await post('/api/apps/com.example.web/tools', { tool: '../../bin/sh' })).status).toBe(400);
    expect((await json('/api/apps/com.example.web/tools/..%2Fetc', { method: 'DELETE' })).status).toBe(400);
    expect(calls).toEqual([]);
  });

  it('bodies must be JSON objects of at most 1 MiB', async () => {
    const notJson = await json('/api/instances', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"appDir":',
    });
    expect(notJson).toMatchObject({ status: 400, body: { error: { code: 'INVALID_JSON' } } });
    const text = await json('/api/instances', {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: '{}',
    });
    expect(text).toMatchObject({ status: 415, body: { error: { code: 'UNSUPPORTED_MEDIA_TYPE' } } });
    const arr = await json('/api/instances', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '[]',
    });
    expect(arr.status).toBe(400);
    const big = JSON.stringify({ appDir: '/x', pad: 'x'.repeat(1024 * 1024) });
    const r = await raw(new URL('/api/instances', server.url).href, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        'content-length': String(Buffer.byteLength(big)),
      },
      body: big,
    }).catch((err: Error) => ({ status: -1, body: err.message, headers: {} }));
    expect(r.status).toBe(413);
    expect(JSON.parse(r.body)).toMatchObject({ error: { code: 'PAYLOAD_TOO_LARGE' } });
  });

  it('write endpoints call the library with the validated values; NOT_SUPPORTED becomes a JSON 501', async () => {
    calls.length = 0;
    failWith = new RunlogError('NOT_SUPPORTED', 'stop is not wired into this build yet');
    const cases: [string, string, unknown][] = [
      ['POST', '/api/instances', { appDir: '/srv/apps/notes', sandbox: 'container' }],
      ['POST', '/api/actors/inst_web/stop', { graceMs: 2500 }],
      ['POST', '/api/actors/inst_web/kill', undefined],
      ['POST', '/api/apps/com.example.web/tools', { tool: 'git' }],
      ['DELETE', '/api/apps/com.example.web/tools/curl', undefined],
      [
        'POST',
        '/api/executions',
        {
          uri: 'at://did:plc:alice/dev.mainasara.at-run.beta.v2.code/add',
          handler: 'add',
          input: { a: 1 },
          timeoutMs: 5000,
        },
      ],
    ];
    for (const [method, path, body] of cases) {
      const r = body === undefined ? await json(path, { method }) : await post(path, body, method);
      expect(r.status, path).toBe(501);
      expect(r.body, path).toEqual({
        error: { code: 'NOT_SUPPORTED', message: 'stop is not wired into this build yet' },
      });
    }
    expect(calls).toEqual([
      ['spawnApp', { appDir: '/srv/apps/notes', sandbox: 'container' }],
      ['stop', 'inst_web', { graceMs: 2500 }],
      ['kill', 'inst_web'],
      ['grant', 'com.example.web', 'git'],
      ['revoke', 'com.example.web', 'curl'],
      [
        'execute',
        {
          uri: 'at://did:plc:alice/dev.mainasara.at-run.beta.v2.code/add',
          handler: 'add',
          input: { a: 1 },
          timeoutMs: 5000,
        },
      ],
    ]);
  });

  it(
    'maps library errors: NOT_FOUND 404, ILLEGAL_EVENT/CONCURRENCY 409, ' +
      'validation 400, anything unexpected 500 without details',
    async () => {
      const cases: [unknown, number, string][] = [
        [new NotFoundError('actor', 'inst_x'), 404, 'NOT_FOUND'],
        [new IllegalEventError('inst_web', 'stopped', 'instance.stop-requested'), 409, 'ILLEGAL_EVENT'],
        [new RunlogError('CONCURRENCY', 'stream moved'), 409, 'CONCURRENCY'],
        [new ValidationError('MANIFEST_INVALID', 'runlog.json is invalid', ['a', 'b']), 400, 'MANIFEST_INVALID'],
        [new RunlogError('SPAWN_INVALID', 'bad spawn'), 400, 'SPAWN_INVALID'],
        [new Error('secret internal detail at /root/x'), 500, 'INTERNAL'],
      ];
      for (const [err, status, code] of cases) {
        failWith = err;
        const r = await post('/api/actors/inst_web/stop', {});
        expect(r.status, code).toBe(status);
        expect(r.body.error.code).toBe(code);
        if (status === 500) expect(JSON.stringify(r.body)).not.toContain('secret');
      }
      failWith = new ValidationError('MANIFEST_INVALID', 'runlog.json is invalid', ['a', 'b']);
      expect((await post('/api/actors/inst_web/stop', {})).body.error.issues).toEqual(['a', 'b']);
    },
  );

  it('unknown endpoints are 404 and wrong methods 405, both JSON', async () => {
    const nf = await json('/api/nothing-here');
    expect(nf).toMatchObject({ status: 404, body: { error: { code: 'NOT_FOUND' } } });
    const wrong = await json('/api/actors', { method: 'DELETE' });
    expect(wrong).toMatchObject({ status: 405, body: { error: { code: 'METHOD_NOT_ALLOWED' } } });
    expect(wrong.headers.get('allow')).toBe('GET');
  });
});
