// cluster.failover: the time from kill -9 of a cluster node to all of its actors owned by survivors, beside the
// lease TTL (target ≤ TTL + 1 s). The dying node is a real process holding leases on N live actors' streams and
// renewing them (PgHostStore as `runlog serve` runs it, without Docker: what is measured is the lease hand-over,
// not the apps); two survivors in this process beat as serve does (every TTL/3) and take over what expires. The
// ratio is measured ÷ TTL; it can be a little below 1 (the last renewal came up to a beat, TTL/3, before the kill;
// nothing is taken before it expires).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import pg from 'pg';
import { PgHostStore } from '../src/store/postgres/host-store.ts';
import { median, nowMs, round, sizes, type Bench } from './harness.ts';
import { benchPgUrl } from './pg-bench-fixture.ts';

const TTL = 2000;
const HOST_STORE = join(import.meta.dirname, '../src/store/postgres/host-store.ts');

/** The dying node: creates ACTORS actors under its leases, says "ready", and renews until it is killed. */
const CHILD = `
import { PgHostStore } from ${JSON.stringify(HOST_STORE)};
const [url, schema, n, ttl] = process.argv.slice(1);
const s = await PgHostStore.open({ url, schema, node: { name: 'a', leaseTtlMs: Number(ttl) }, pollMs: 0 });
await s.appendMany(
  Array.from({ length: Number(n) }, (_, i) => ({
    stream: 'instance-f' + i,
    events: [{ type: 'instance.requested', data: {} }],
    expectedVersion: 'no-stream',
  })),
);
s.leasing.startLeases({ lost() {}, taken() {} });
process.stdout.write('ready\\n');
setInterval(() => {}, 1 << 30);
`;

export const clusterBenches: Bench[] = [
  {
    name: 'cluster.failover',
    needs: 'PostgreSQL on 127.0.0.1:5432 (RUNLOG_PG_URL)',
    async run(opts) {
      const { rounds, log } = opts;
      const { ACTORS } = sizes(opts, { full: { ACTORS: 50 }, smoke: { ACTORS: 5 } });
      const times: number[] = [];
      for (let r = 0; r < Math.min(rounds, 5); r++) {
        const schema = `rlbench_fo_${process.pid}_${randomBytes(4).toString('hex')}`;
        const child = spawn(
          process.execPath,
          ['--import', 'tsx', '--input-type=module', '-e', CHILD, benchPgUrl(), schema, String(ACTORS), String(TTL)],
          { stdio: ['ignore', 'pipe', 'inherit'] },
        );
        const survivors: PgHostStore[] = [];
        try {
          await new Promise<void>((resolve, reject) => {
            child.stdout!.on('data', (c: Buffer) => c.toString().includes('ready') && resolve());
            child.on('exit', (code) => reject(new Error(`the dying node exited early (${code})`)));
          });
          let taken = 0;
          let done: (() => void) | undefined;
          const all = new Promise<void>((resolve) => (done = resolve));
          for (const name of ['b', 'c']) {
            const s = await PgHostStore.open({ url: benchPgUrl(), schema, node: { name, leaseTtlMs: TTL }, pollMs: 0 });
            survivors.push(s);
            s.leasing!.startLeases({
              lost() {},
              taken(leases) {
                taken += leases.length;
                if (taken >= ACTORS) done!();
              },
            });
          }
          const t0 = nowMs();
          child.kill('SIGKILL');
          await all;
          const ms = nowMs() - t0;
          times.push(ms);
          log(
            `cluster.failover round ${r + 1}: ${ACTORS} actors owned by survivors ${Math.round(ms)} ms after kill -9 (TTL ${TTL} ms)`,
          );
        } finally {
          child.kill('SIGKILL');
          for (const s of survivors) await s.close();
          const c = new pg.Client({ connectionString: benchPgUrl() });
          await c.connect();
          await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
          await c.end();
        }
      }
      const v = median(times);
      return {
        name: 'cluster.failover',
        value: round(v),
        unit: 'ms',
        baseline: TTL,
        ratio: round(v / TTL),
        notes: { target: `≤ ${TTL + 1000} ms (TTL + 1 s)`, actors: ACTORS },
      };
    },
  },
];
