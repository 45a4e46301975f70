// cluster.pause: what one node frozen in the middle of an append costs the others (target ≥ 0.8). Node c is a real
// process (PgHostStore as `runlog serve` runs it) holding leases on its actors and renewing them; on a word from
// here it appends to one of them and stops itself (SIGSTOP) at the `append-locked` fault point (supervisor/host/faults.ts):
// its client between statements of that append's transaction, for 2×TTL. Nodes a and b, in this process, append
// to their own actors meanwhile (fenced appends, several at a time). value: a and b's events/s while c is frozen;
// baseline: the same appends over the same time with c alive and idle, just before; ratio = value ÷ baseline.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { PgHostStore } from '../src/store/postgres/host-store.ts';
import { median, nowMs, sideBySide, sizes, type Bench } from './harness.ts';
import { benchPgUrl } from './pg-bench-fixture.ts';

const HOST_STORE = join(import.meta.dirname, '../src/store/postgres/host-store.ts');

/** Node c: creates its actors, says "ready"; a line on stdin makes it append to one and freeze at append-locked. */
const CHILD = `
import { PgHostStore } from ${JSON.stringify(HOST_STORE)};
const [url, schema, ttl] = process.argv.slice(1);
let armed = false;
const faults = () => { if (armed) { armed = false; process.kill(process.pid, 'SIGSTOP'); } };
const s = await PgHostStore.open({ url, schema, node: { name: 'c', leaseTtlMs: Number(ttl) }, pollMs: 0, faults });
await s.appendMany(
  Array.from({ length: 5 }, (_, i) => ({
    stream: 'instance-c' + i,
    events: [{ type: 'instance.requested', data: {} }],
    expectedVersion: 'no-stream',
  })),
);
s.leasing.startLeases({ lost() {}, taken() {} });
process.stdin.on('data', () => {
  armed = true;
  void s.appendToStream('instance-c0', [{ type: 'instance.noted', data: {} }], { expectedVersion: 'any' }).catch(() => {});
});
process.stdout.write('ready\\n');
`;

const procState = (pid: number): string => readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '')[0]!;

/** Events a and b commit in `ms`, WORKERS appends at a time each, one event per append, to their own actors. */
async function appendFor(nodes: PgHostStore[], workers: number, ms: number): Promise<number> {
  const end = nowMs() + ms;
  let events = 0;
  await Promise.all(
    nodes.flatMap((s, n) =>
      Array.from({ length: workers }, async (_, w) => {
        for (let i = 0; nowMs() < end; i++) {
          await s.appendToStream(`instance-${'ab'[n]}${w}`, [{ type: 'instance.noted', data: { i } }], {
            expectedVersion: 'any',
          });
          events += 1;
        }
      }),
    ),
  );
  return events;
}

export const clusterPauseBenches: Bench[] = [
  {
    name: 'cluster.pause',
    needs: 'PostgreSQL on 127.0.0.1:5432 (RUNLOG_PG_URL)',
    async run(opts) {
      const { rounds, log } = opts;
      const { TTL, WORKERS } = sizes(opts, { full: { TTL: 2000, WORKERS: 4 }, smoke: { TTL: 600, WORKERS: 2 } });
      const paused: number[] = [];
      const unpaused: number[] = [];
      for (let r = 0; r < Math.min(rounds, 3); r++) {
        const schema = `rlbench_pause_${process.pid}_${randomBytes(4).toString('hex')}`;
        let child: ChildProcess | undefined;
        const nodes: PgHostStore[] = [];
        try {
          child = spawn(
            process.execPath,
            ['--import', 'tsx', '--input-type=module', '-e', CHILD, benchPgUrl(), schema, String(TTL)],
            { stdio: ['pipe', 'pipe', 'inherit'] },
          );
          const c = child;
          await new Promise<void>((resolve, reject) => {
            c.stdout!.on('data', (d: Buffer) => d.toString().includes('ready') && resolve());
            c.on('exit', (code) => reject(new Error(`node c exited early (${code})`)));
          });
          for (const name of ['a', 'b']) {
            const s = await PgHostStore.open({ url: benchPgUrl(), schema, node: { name, leaseTtlMs: TTL }, pollMs: 0 });
            nodes.push(s);
            s.leasing!.startLeases({ lost() {}, taken() {} });
            await s.appendMany(
              Array.from({ length: WORKERS }, (_, w) => ({
                stream: `instance-${name}${w}`,
                events: [{ type: 'instance.requested', data: {} }],
                expectedVersion: 'no-stream',
              })),
            );
          }
          await appendFor(nodes, WORKERS, TTL / 2); // warm: connections open, statements prepared
          const calm = (await appendFor(nodes, WORKERS, 2 * TTL)) / ((2 * TTL) / 1000);
          c.stdin!.write('go\n');
          const t0 = nowMs();
          while (procState(c.pid!) !== 'T') {
            if (nowMs() - t0 > 30_000) throw new Error('node c did not stop at append-locked');
            await new Promise((res) => setTimeout(res, 5));
          }
          const frozen = (await appendFor(nodes, WORKERS, 2 * TTL)) / ((2 * TTL) / 1000);
          unpaused.push(calm);
          paused.push(frozen);
          log(
            `cluster.pause round ${r + 1}: a and b ${Math.round(frozen)} events/s with c frozen ` +
              `at append-locked for 2×TTL, ${Math.round(calm)} events/s with c idle (TTL ${TTL} ms)`,
          );
        } finally {
          if (child) {
            child.kill('SIGCONT');
            child.kill('SIGKILL');
          }
          for (const s of nodes) await s.close();
          const c = new pg.Client({ connectionString: benchPgUrl() });
          await c.connect();
          await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
          await c.end();
        }
      }
      return sideBySide('cluster.pause', 'events/s', median(paused), median(unpaused), {
        target: '≥ 0.8 (a and b while c is frozen ÷ while it is not)',
        ttlMs: TTL,
        appendsAtATime: WORKERS * 2,
      });
    },
  },
];
