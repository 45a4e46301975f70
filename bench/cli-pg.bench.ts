// cli.pg.ps: `runlog ps --json --store postgres://…` (the compiled CLI, a fresh process each run) on a log of 20,000
// ended actors (the golden histories, about 100,000 events) and 100 live instances, beside a `node` process that
// connects with node-postgres, selects the live actors' rows (their documents without the machine snapshot) and
// prints them as JSON. What ps adds: the open of the log copy it reads through (the rows of every actor, a summary
// row per ended actor, the live actors' events: src/cli/inspection-log.ts), the heartbeats and the leases.
// Notes: `psAllMs`, `runlog ps --all --json` on the same log. Works in a schema of its own, dropped afterwards.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { actorsProjection } from '../src/supervisor/host/actors-projection.ts';
import { PgEventStore } from '../src/store/postgres/event-store.ts';
import { endedHistories } from '../test/support/pg-ended-log.ts';
import { median, nowMs, round, sideBySide, sizes, type Bench } from './harness.ts';
import { benchPgUrl, withEndedLog } from './pg-bench-fixture.ts';

const REPO = resolve(import.meta.dirname, '..');
const BIN = join(REPO, 'bin/runlog.js');

/** The first two events of a golden instance history (requested, spawned), renamed: `n` instances that have not ended. */
async function writeLive(url: string, schema: string, n: number): Promise<void> {
  const h = endedHistories().find((x) => x.header.kind === 'instance' && x.events[0]!.type === 'instance.requested')!;
  const store = await PgEventStore.open({ url, schema, projections: [actorsProjection()] });
  try {
    const appends = Array.from({ length: n }, (_, k) => {
      const id = `live${String(k).padStart(6, '0')}`;
      const events = h.events.slice(0, 2).map((e) => ({
        type: e.type,
        at: e.at,
        data: JSON.parse(JSON.stringify(e.data).replaceAll(h.header.id, id)) as Record<string, unknown>,
        meta: e.meta,
      }));
      return { stream: `instance-${id}`, events, expectedVersion: 'no-stream' as const };
    });
    for (const o of await store.appendMany(appends)) if (!o.ok) throw o.error;
  } finally {
    await store.close();
  }
}

const RAW_PS = `
const pg = require('pg');
(async () => {
  const c = new pg.Client({ connectionString: process.argv[1], options: '-c search_path=' + process.argv[2] });
  await c.connect();
  const { rows } = await c.query(
    "SELECT d.doc - 'snapshot' - 'rev' AS doc FROM projection_documents d " +
      "WHERE d.projection = 'actors' AND d.doc->>'status' = 'active' ORDER BY d.doc->>'createdAt', d.id",
  );
  const ps = rows.map((r) => ({
    id: r.doc.id,
    kind: r.doc.kind,
    state: r.doc.state,
    status: r.doc.status,
    version: r.doc.version,
    createdAt: r.doc.createdAt,
    updatedAt: r.doc.updatedAt,
    summary: r.doc.summary,
  }));
  process.stdout.write(JSON.stringify(ps, null, 2) + '\\n');
  await c.end();
})();
`;

function timeRun(args: string[]): { ms: number; stdout: string } {
  const t0 = nowMs();
  const r = spawnSync(process.execPath, args, { cwd: REPO, encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
  const ms = nowMs() - t0;
  if (r.status !== 0) throw new Error(`node ${args.slice(0, 3).join(' ')} exited ${r.status}: ${r.stderr}`);
  return { ms, stdout: r.stdout };
}

export const cliPgBenches: Bench[] = [
  {
    name: 'cli.pg.ps',
    needs: 'the compiled CLI (npm run build) and PostgreSQL on 127.0.0.1:5432 (RUNLOG_PG_URL)',
    async run(opts) {
      const { rounds, log } = opts;
      const { ENDED, LIVE, samples } = sizes(opts, {
        full: { ENDED: 20_000, LIVE: 100, samples: Math.max(5, rounds * 2) },
        smoke: { ENDED: 300, LIVE: 10, samples: 1 },
      });
      if (!existsSync(join(REPO, 'dist/cli/main.js')))
        throw new Error('the compiled CLI (dist/cli/main.js) is missing: run `npm run build` first');
      return withEndedLog(
        'ps',
        ENDED,
        (m) => log(`cli.pg.ps: ${m}`),
        async ({ schema, url: store, actors, events: endedEvents }) => {
          await writeLive(benchPgUrl(), schema, LIVE);
          const events = endedEvents + 2 * LIVE;
          const ps = [BIN, 'ps', '--json', '--store', store];
          const psAll = [BIN, 'ps', '--all', '--json', '--store', store];
          const raw = ['-e', RAW_PS, benchPgUrl(), schema];
          // Same actors, or the comparison means nothing.
          const a = JSON.parse(timeRun(ps).stdout) as { id: string; version: number }[];
          const b = JSON.parse(timeRun(raw).stdout) as { id: string; version: number }[];
          const key = (rows: { id: string; version: number }[]) =>
            JSON.stringify(rows.map((r) => [r.id, r.version]).sort());
          if (a.length !== LIVE || key(a) !== key(b))
            throw new Error(`runlog ps --json (${a.length} rows) and the raw query (${b.length}) disagree`);
          if ((JSON.parse(timeRun(psAll).stdout) as unknown[]).length !== actors.length + LIVE)
            throw new Error('runlog ps --all --json does not list every actor');
          const ours: number[] = [];
          const all: number[] = [];
          const base: number[] = [];
          for (let i = 0; i < samples; i++) {
            ours.push(timeRun(ps).ms);
            all.push(timeRun(psAll).ms);
            base.push(timeRun(raw).ms);
          }
          log(`cli.pg.ps: ${samples} runs each`);
          return sideBySide('cli.pg.ps', 'ms', median(ours), median(base), {
            endedActors: ENDED,
            liveActors: LIVE,
            events,
            psAllMs: round(median(all)),
            runs: samples,
          });
        },
      );
    },
  },
];
