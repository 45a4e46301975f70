// A supervisor stopped with SIGSTOP while the CLI waits on it: `runlog spawn` and `runlog stop` fail with TIMEOUT
// within their --timeout, and once the supervisor is continued it refuses both (their deadline has passed):
// nothing is appended for them, the running instance keeps running and no second one appears.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HELLO_APP_DIR, requireProot } from '../../support/apps.ts';
import { runCli, startServe, type Served } from '../../support/cli-process.ts';

let home: string;
let serve: Served;
let token: string;

beforeAll(async () => {
  requireProot();
  home = mkdtempSync(join(tmpdir(), 'runlog-stopped-'));
  serve = await startServe(home);
  if (!serve.info) throw new Error(`runlog serve did not start:\n${serve.output()}`);
  token = readFileSync(serve.info.tokenFile, 'utf8').trim();
}, 60_000);

afterAll(async () => {
  if (serve?.child.exitCode === null) {
    serve.child.kill('SIGCONT');
    serve.child.kill('SIGTERM');
    await serve.exit;
  }
  if (home) rmSync(home, { recursive: true, force: true });
});

const api = async <T>(path: string, init: RequestInit = {}): Promise<T> => {
  const res = await fetch(new URL(path, serve.info!.url), {
    ...init,
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      ...(init.headers as Record<string, string>),
    },
  });
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
};

const lastSeq = async (): Promise<number> => (await api<{ lastSeq: number }>('/api/health')).lastSeq;

describe('a supervisor stopped with SIGSTOP', () => {
  it(
    'spawn and stop fail with TIMEOUT by their --timeout, ' +
      'exec by its --wait; continued, the supervisor acts on none of them',
    async () => {
      const spawned = runCli(['spawn', HELLO_APP_DIR, '--id', 'inst_first', '--json'], { home, timeoutMs: 120_000 });
      expect(spawned.code, spawned.stderr).toBe(0);
      const before = await lastSeq();

      serve.child.kill('SIGSTOP');
      let stop: ReturnType<typeof runCli>;
      let spawn: ReturnType<typeof runCli>;
      let exec: ReturnType<typeof runCli>;
      try {
        stop = runCli(['stop', 'inst_first', '--timeout', '1500', '--json'], { home, timeoutMs: 30_000 });
        spawn = runCli(['spawn', HELLO_APP_DIR, '--id', 'inst_late', '--timeout', '1500', '--json'], {
          home,
          timeoutMs: 30_000,
        });
        // exec's --timeout is the run's deadline; --wait bounds the wait for the supervisor's answer.
        exec = runCli(
          [
            'exec',
            'at://did:plc:aaaaaaaaaaaaaaaaaaaaaaaa/dev.mainasara.at-run.beta.v2.code/late',
            'main',
            '--wait',
            '1500',
            '--json',
          ],
          { home, timeoutMs: 30_000 },
        );
      } finally {
        serve.child.kill('SIGCONT');
      }
      for (const r of [stop, spawn, exec]) {
        expect(r.code, r.stderr).toBe(1);
        expect(JSON.parse(r.stderr.trim().split('\n').at(-1)!)).toMatchObject({
          error: { code: 'TIMEOUT', details: { timeoutMs: 1500 } },
        });
      }

      // Both requests reached the supervisor before it was continued, so it routes them before anything sent now:
      // once it answers again, for a few seconds nothing may be appended (a stale stop or spawn acted on would
      // append within milliseconds).
      await lastSeq();
      for (let i = 0; i < 15; i++) {
        expect(
          (await api<{ events: { type: string; stream: string }[] }>(`/api/events?afterSeq=${before}&limit=1000`))
            .events,
        ).toEqual([]);
        await new Promise((r) => setTimeout(r, 200));
      }
      const actors = await api<{ actors: { id: string; state: string }[] }>('/api/actors?all=1');
      expect(actors.actors.map((a) => [a.id, a.state])).toEqual([['inst_first', 'running']]);
    },
    180_000,
  );
});
