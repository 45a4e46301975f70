// `runlog logs <id> --follow` through a node that does not own the instance: the owner streams its output over
// LISTEN/NOTIFY (supervisor/cluster/remote-follow.ts), never through the log. Three real supervisors (`runlog serve --store
// postgres://… --node a|b|c`) on the real PostgreSQL server (a schema of this test's), real container instances
// on the real Docker Engine, an app that prints `tick N` every 200 ms.
// - through b (CLI): every line a's instance prints, in order, none twice, starting with what a itself buffered; the
//   instance stopped, b's follow ends cleanly (exit 0); nothing of the stream is in the log;
// - the follower's client killed: b cancels, a stops publishing (its log says so);
// - the follower's node killed -9: its renewals stop, a stops publishing (no NOTIFY on that follow's channel after);
// - the owner killed -9 during a follow: b's follow ends with FOLLOW_LOST (typed, exit 1) in bounded time.
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdtempSync, appendFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { followChannel } from '../../../src/store/postgres/follow-channel.ts';
import { HELLO_APP_DIR, requireDockerAppBase, until } from '../../support/apps.ts';
import { cliArgs, REPO } from '../../support/cli.ts';
import { runCli } from '../../support/cli-process.ts';
import { cleanupClusters, createCluster, type ClusterNode } from '../../support/cluster-fixture.ts';
import { requirePostgres } from '../../support/postgres.ts';

const TTL = 5000;
const followers: ChildProcess[] = [];
afterAll(async () => {
  for (const f of followers) if (f.exitCode === null && f.signalCode === null) f.kill('SIGKILL');
  await cleanupClusters();
});

interface Follow {
  child: ChildProcess;
  out(): string;
  err(): string;
  ticks(): number[];
  exit: Promise<number | null>;
}

/** `runlog logs <id> --follow` on a node's home, read as it goes. */
function follow(via: ClusterNode, id: string): Follow {
  const child = spawn(process.execPath, cliArgs('logs', id, '--follow'), {
    cwd: REPO,
    env: { ...process.env, RUNLOG_HOME: via.home },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  followers.push(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exit = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return {
    child,
    out: () => out,
    err: () => err,
    ticks: () => [...out.matchAll(/^tick (\d+)$/gm)].map((m) => Number(m[1])),
    exit,
  };
}

describe('logs --follow of an instance another cluster node owns', () => {
  it(
    'streams through any node, ends with the instance, lets go of a follower that is gone, fails typed when the owner dies',
    { timeout: 900_000 },
    async () => {
      await requireDockerAppBase();
      const url = await requirePostgres();
      const cluster = await createCluster({ tag: 'follow', ttlMs: TTL });
      // The hello app, printing a numbered line every 200 ms.
      const appDir = join(mkdtempSync(join(cluster.root, 'app-')), 'ticker');
      cpSync(HELLO_APP_DIR, appDir, { recursive: true });
      appendFileSync(
        join(appDir, 'server.mjs'),
        '\nlet tick = 0;\nsetInterval(() => console.log(`tick ${++tick}`), 200);\n',
      );
      const [a, b, c] = [await cluster.startNode('a'), await cluster.startNode('b'), await cluster.startNode('c')];
      const cli = (via: ClusterNode, args: string[]) =>
        runCli([...args, '--json'], { home: via.home, timeoutMs: 180_000 });
      const tag = process.pid;
      const spawnOnA = (id: string) => {
        const r = cli(b, ['spawn', appDir, '--sandbox', 'container', '--id', id, '--node', 'a']);
        expect(r.code, r.stdout + r.stderr).toBe(0);
        expect(JSON.parse(r.stdout)).toMatchObject({ id, state: 'running' });
      };
      const [i1, i2, i3, i4] = [`f1-${tag}`, `f2-${tag}`, `f3-${tag}`, `f4-${tag}`];

      // 1. Through b: a's lines as a prints them, in order, none twice; the instance stopped, the follow ends cleanly.
      spawnOnA(i1);
      const f1 = follow(b, i1);
      await until('b follows ticks of a', () => f1.ticks().length >= 3 || null, 60_000, 100);
      const seenAtStart = Math.max(...f1.ticks());
      await until(
        'ticks printed after the follow began arrive',
        () => Math.max(...f1.ticks()) >= seenAtStart + 10 || null,
        60_000,
        100,
      );
      // What a itself has of it (its buffer, read on a while it runs).
      const own = runCli(['logs', i1], { home: a.home, timeoutMs: 60_000 });
      expect(own.code, own.stderr).toBe(0);
      expect(own.stdout).toMatch(/^tick \d+$/m);
      const stopped = cli(b, ['stop', i1]);
      expect(stopped.code, stopped.stdout + stopped.stderr).toBe(0);
      expect(await f1.exit, f1.err()).toBe(0);
      const ticks = f1.ticks();
      expect(ticks.length).toBeGreaterThan(13);
      expect(ticks).toEqual(Array.from({ length: ticks.length }, (_, k) => ticks[0]! + k)); // in order, none missed or twice
      // Every line a had buffered, in the same order, then those it printed until the stop.
      expect(f1.out().startsWith(own.stdout)).toBe(true);
      expect(f1.out().length).toBeGreaterThan(own.stdout.length);
      // Nothing of the stream went into the log (only the instance's own events).
      const streamed = await cluster.sql<{ n: number }>(
        "SELECT count(*)::int AS n FROM events WHERE data::text LIKE '%tick %'",
      );
      expect(streamed[0]!.n).toBe(0);
      expect(a.stderr()).toMatch(new RegExp(`follow [0-9a-f]{32} of ${i1} for node b: ended \\(exited\\)`));

      // 2. The follower's client killed: b cancels the follow, a stops publishing.
      spawnOnA(i2);
      const f2 = follow(b, i2);
      await until('b follows i2', () => f2.ticks().length >= 2 || null, 60_000, 100);
      f2.child.kill('SIGKILL');
      await until(
        'a ends the follow b cancelled',
        () => new RegExp(`follow [0-9a-f]{32} of ${i2} for node b: ended \\(cancelled\\)`).test(a.stderr()) || null,
        30_000,
        100,
      );

      // 3. The follower's node killed -9 (c): no renewal comes, a stops publishing on that follow's channel.
      spawnOnA(i3);
      const f3 = follow(c, i3);
      await until('c follows i3', () => f3.ticks().length >= 2 || null, 60_000, 100);
      const followId = new RegExp(`follow ([0-9a-f]{32}) of ${i3} for node c: publishing`).exec(a.stderr())![1]!;
      const listener = new pg.Client({ connectionString: url });
      await listener.connect();
      try {
        let heard = 0;
        listener.on('notification', () => (heard += 1));
        await listener.query(`LISTEN "${followChannel(followId)}"`);
        await until('a publishes the follow', () => heard > 0 || null, 10_000, 50);
        await c.kill();
        await until(
          'a lets go of the follow c no longer renews',
          () => a.stderr().includes(`follow ${followId} of ${i3} for node c: no renewal`) || null,
          60_000,
          200,
        );
        const at = heard;
        // Four heartbeat periods: a follow still published would have sent heartbeats and lines (a tick every 200 ms).
        await new Promise((r) => setTimeout(r, 8000));
        expect(heard).toBe(at);
      } finally {
        await listener.end();
      }

      // 4. The owner killed -9 during a follow through b: b's follow ends with FOLLOW_LOST, typed, in bounded time.
      spawnOnA(i4);
      const f4 = follow(b, i4);
      await until('b follows i4', () => f4.ticks().length >= 2 || null, 60_000, 100);
      await a.kill();
      const code = await Promise.race([
        f4.exit,
        new Promise<string>((r) => setTimeout(() => r('still following'), 30_000)),
      ]);
      expect(code, f4.err()).toBe(1);
      expect(f4.err()).toContain('FOLLOW_LOST');
      expect(f4.err()).toContain('follow again');
    },
  );
});
