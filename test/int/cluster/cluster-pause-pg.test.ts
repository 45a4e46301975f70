// A paused node never stalls the cluster: three real supervisors (`runlog serve --store postgres://… --node a|b|c`)
// on the real PostgreSQL server, with PRoot apps. c stops itself (SIGSTOP, RUNLOG_FAULT_ACTION=stop) at the fault
// point `append-locked` of its spawn's first append (supervisor/host/faults.ts): the last moment its client is between two
// statements of that append's transaction. For twice the lease TTL, while c is frozen there, a and b spawn apps:
// their appends commit, and no lease moves (a's and b's keep their node and token). After c wakes, a's and b's
// leases are still theirs.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { HELLO_APP_DIR, requireProot, until } from '../../support/apps.ts';
import { cliArgs } from '../../support/cli.ts';
import { REPO_ROOT } from '../../support/cli-process.ts';
import { cleanupClusters, createCluster, type ClusterNode } from '../../support/cluster-fixture.ts';

const TTL = 3000;
afterAll(cleanupClusters);

/** A process's state letter from /proc (T: stopped). */
const procState = (pid: number): string => readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '')[0]!;

/** `runlog spawn` of hello-app with PRoot on a node's home, not waited for: resolves with its exit code and output. */
function spawnApp(on: ClusterNode, id: string): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, cliArgs('spawn', HELLO_APP_DIR, '--sandbox', 'proot', '--id', id, '--json'), {
    cwd: REPO_ROOT,
    env: { ...process.env, RUNLOG_HOME: on.home },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const killer = setTimeout(() => child.kill('SIGKILL'), 120_000);
  return new Promise((resolve) =>
    child.on('exit', (code) => {
      clearTimeout(killer);
      resolve({ code, out });
    }),
  );
}

describe('a paused node and the append lock', () => {
  it(
    'a node frozen while its append is between statements does not stall the others: for 2×TTL they keep committing and no lease moves',
    { timeout: 300_000 },
    async () => {
      requireProot();
      const cluster = await createCluster({ tag: 'pause', ttlMs: TTL });
      // Each node gives its PRoot apps ports of its own (they spawn at the same time on one host).
      const a = await cluster.startNode('a', ['--ports', '5100-5199']);
      const b = await cluster.startNode('b', ['--ports', '5200-5299']);
      const c = await cluster.startNode('c', ['--ports', '5300-5399'], {
        env: { RUNLOG_FAULT: 'append-locked', RUNLOG_FAULT_EVENT: 'instance.requested', RUNLOG_FAULT_ACTION: 'stop' },
      });
      const tag = process.pid;
      for (const [n, id] of [
        [a, `pa1-${tag}`],
        [b, `pb1-${tag}`],
      ] as const) {
        const r = await spawnApp(n, id);
        expect(r.code, r.out).toBe(0);
      }
      type Lease = { stream: string; node: string; token: number };
      const leases = async (): Promise<Lease[]> =>
        (await cluster.sql<Lease>('SELECT stream, node, token::float8 AS token FROM leases ORDER BY stream')).filter(
          (l) => l.node !== 'c',
        );
      const before = await leases();
      expect(before.map((l) => l.node).sort()).toEqual(['a', 'b']);

      // c freezes in its spawn's first append.
      const cSpawn = spawnApp(c, `pc-${tag}`);
      await until('c stops itself at append-locked', () => procState(c.pid) === 'T', 60_000, 20);
      const head = (await cluster.sql<{ head: number }>('SELECT coalesce(max(seq), 0)::float8 AS head FROM events'))[0]!
        .head;
      const frozenAt = Date.now();

      // a and b go on: a spawn each while c is frozen.
      const others = [spawnApp(a, `pa2-${tag}`), spawnApp(b, `pb2-${tag}`)];
      const committed = async () =>
        (
          await cluster.sql<{ node: string; n: number }>(
            "SELECT meta->>'node' AS node, count(*)::integer AS n FROM events WHERE seq > $1 GROUP BY 1 ORDER BY 1",
            [head],
          )
        ).filter((r) => r.node !== 'c');
      await until('2×TTL have passed with c frozen', () => Date.now() - frozenAt >= 2 * TTL, 3 * TTL, 50);
      expect(procState(c.pid)).toBe('T');
      const during = await committed();
      const leasesDuring = await leases();
      c.signal('SIGCONT');

      expect(during.map((r) => r.node)).toEqual(['a', 'b']);
      for (const l of before)
        expect(
          leasesDuring.find((x) => x.stream === l.stream),
          l.stream,
        ).toEqual(l);
      for (const r of await Promise.all(others)) expect(r.code, r.out).toBe(0);
      await cSpawn;
      // Woken, c takes nothing of a's or b's: their leases are where they were.
      await new Promise((r) => setTimeout(r, TTL));
      const after = await leases();
      for (const l of before)
        expect(
          after.find((x) => x.stream === l.stream),
          l.stream,
        ).toEqual(l);
      expect(a.stderr()).not.toContain('lost the lease');
      expect(b.stderr()).not.toContain('lost the lease');
    },
  );
});
