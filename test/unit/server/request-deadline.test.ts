// A request's deadline (runlog-deadline): the supervisor refuses one that has passed before it acts, and the CLI's
// calls carry one and fail with TIMEOUT when the supervisor does not answer by then.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Runlog } from '../../../src/supervisor/runlog.ts';
import { callApi } from '../../../src/cli/client.ts';
import { ANSWERS } from '../../../src/cli/api-answers.ts';
import { requestTimeout } from '../../../src/cli/request-timeout.ts';
import { RunlogError } from '../../../src/domain/errors.ts';
import { assertBeforeDeadline, DEADLINE_HEADER, requestDeadline } from '../../../src/server/deadline.ts';
import { startServer, type RunningServer } from '../../../src/server/http-server.ts';
import { ensureToken } from '../../../src/server/token.ts';
import { seededRunlog } from '../../support/browser.ts';
import { freshDirs } from '../../support/tmp.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

const freshDir = freshDirs('runlog-deadline-', 'all');

function thrown(fn: () => unknown): RunlogError {
  try {
    fn();
  } catch (err) {
    return err as RunlogError;
  }
  throw new Error('did not throw');
}

describe('the runlog-deadline header', () => {
  it('is read as whole epoch milliseconds; a request without one has no deadline', () => {
    expect(requestDeadline({})).toBeNull();
    expect(requestDeadline({ [DEADLINE_HEADER]: '1764806400000' })).toBe(1764806400000);
    for (const bad of ['', 'soon', '-5', '1.5', '1e12', '99999999999999999999']) {
      expect(thrown(() => requestDeadline({ [DEADLINE_HEADER]: bad })).code, bad).toBe('DEADLINE_INVALID');
    }
  });

  it('refuses at and after the deadline with DEADLINE_PASSED, and passes before it', () => {
    const h: IncomingHttpHeaders = { [DEADLINE_HEADER]: '1000' };
    expect(() => assertBeforeDeadline(h, 999)).not.toThrow();
    expect(thrown(() => assertBeforeDeadline(h, 1000)).code).toBe('DEADLINE_PASSED');
    expect(thrown(() => assertBeforeDeadline(h, 5000))).toMatchObject({
      code: 'DEADLINE_PASSED',
      details: { deadlineMs: 1000, nowMs: 5000 },
    });
    expect(() => assertBeforeDeadline({}, 5000)).not.toThrow();
  });
});

describe('the supervisor refuses a request whose deadline has passed, before it acts', () => {
  let rl: Runlog;
  let server: RunningServer;
  let token: string;

  beforeAll(async () => {
    const home = freshDir();
    rl = (await seededRunlog(home)).rl;
    token = ensureToken(home).token;
    server = await startServer({ runlog: rl, host: '127.0.0.1', port: 0, token, pollMs: 20 });
  });

  afterAll(async () => {
    await server?.close();
    await rl?.close();
  });

  const stop = (deadline: string) =>
    fetch(new URL('/api/actors/inst_web/stop', server.url), {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', [DEADLINE_HEADER]: deadline },
      body: JSON.stringify({ graceMs: 0 }),
    });

  it('a stop whose deadline passed is answered 504 DEADLINE_PASSED and appends nothing; a malformed one is 400', async () => {
    const before = await runlogInternals(rl).store.lastSeq();
    const late = await stop(String(Date.now() - 1));
    expect(late.status).toBe(504);
    expect(((await late.json()) as { error: { code: string } }).error.code).toBe('DEADLINE_PASSED');
    const bad = await stop('tomorrow');
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe('DEADLINE_INVALID');
    expect(await runlogInternals(rl).store.lastSeq()).toBe(before);
    expect((await rl.inspect('inst_web')).state).toBe('running');
  });

  it('the same stop with its deadline ahead is acted on', async () => {
    const ok = await stop(String(Date.now() + 60_000));
    expect(ok.status).toBe(200);
    expect((await rl.inspect('inst_web')).state).not.toBe('running');
  });
});

describe('the CLI client bounds its wait', () => {
  let silent: Server;
  let url: string;
  const seen: IncomingHttpHeaders[] = [];

  beforeAll(async () => {
    // A server that takes requests and never answers: a supervisor stopped with SIGSTOP looks like this.
    silent = createServer((req) => void seen.push(req.headers));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/`;
  });

  afterAll(async () => {
    silent.closeAllConnections();
    await new Promise((r) => silent.close(r));
  });

  it('fails with TIMEOUT when no answer comes, and sends its deadline with the request', async () => {
    const sentAt = Date.now();
    const err = await callApi(
      { url, pid: process.pid, token: 't' },
      'POST',
      '/api/instances',
      { appDir: '/x' },
      ANSWERS.actor,
      2000,
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RunlogError);
    expect(err).toMatchObject({ code: 'TIMEOUT', details: { timeoutMs: 2000 } });
    expect(seen).toHaveLength(1);
    const deadline = Number(seen[0]![DEADLINE_HEADER]);
    expect(deadline).toBeGreaterThanOrEqual(sentAt + 2000);
    expect(deadline).toBeLessThanOrEqual(Date.now() + 2000);
  });

  it('--timeout takes a whole number of ms; anything else is a usage error', () => {
    const args = (timeout?: string) => ({ positionals: [], values: { timeout }, db: undefined, home: undefined });
    expect(requestTimeout(args(), 120_000)).toBe(120_000);
    expect(requestTimeout(args('2500'), 120_000)).toBe(2500);
    for (const bad of ['0', '-1', '1.5', 'soon', '99999999999'])
      expect(thrown(() => requestTimeout(args(bad), 1)).code, bad).toBe('USAGE');
  });
});
