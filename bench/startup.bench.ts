// Start-up that does not grow with history (issue 15): a supervisor's start (open, rehydrate, reconcile with
// nothing running: reconcile off here, as there is no Docker state to compare) on logs of 100,000 / 1,000,000 /
// 5,000,000 events across 10,000 / 100,000 / 500,000 actors of which 200 are live. Baseline: opening the same
// file with better-sqlite3 and reading its live actors' event rows raw. Generated logs are cached under
// bench/.cache/ (gitignored): writing 5,000,000 events takes minutes on two shared cores, and they never change
// for a given schema. A smoke run (harness.ts `sizes`) writes small logs into its temporary directory instead.
import Database from 'better-sqlite3';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRunlog } from '../src/supervisor/runlog.ts';
import { encodeSnapshot } from '../src/inspect/snapshots.ts';
import { actorStatus, summarize } from '../src/machines/summary.ts';
import { machines, replay, stateName } from '../src/machines/runtime.ts';
import type { StreamAppend } from '../src/store/port.ts';
import { LATEST_SCHEMA } from '../src/store/sqlite/schema.ts';
import { SqlitePortStore } from '../src/store/sqlite/port-adapter.ts';
import { median, nowMs, sideBySide, sizes, type Bench } from './harness.ts';
import { runlogInternals } from '../src/supervisor/runlog-internals.ts';

const CACHE = join(import.meta.dirname, '.cache');
const at = (i: number) => new Date(Date.parse('2026-01-01T00:00:00.000Z') + i * 1000).toISOString();
const spec = (id: string) => ({
  instanceId: id,
  appId: 'com.example.hello',
  appDir: '/a',
  sandbox: 'proot',
  runtime: 'raw',
  tools: [],
  lifecycleBasePath: '',
  restart: { policy: 'on-failure', maxRestarts: 5, backoffMs: 1000, maxBackoffMs: 60000, resetAfterMs: 600000 },
});
const data = { pid: 4242, host: '127.0.0.1', port: 4100, containerId: null };

/** Ten events per actor: a crash and a restart; ended actors then stop, live ones keep running. */
export function history(id: string, live: boolean, t: number) {
  const tail = live
    ? [
        { type: 'instance.tool-granted', data: { tool: 'git' } },
        { type: 'instance.tool-revoked', data: { tool: 'git' } },
      ]
    : [
        { type: 'instance.stop-requested', data: { graceMs: null } },
        { type: 'instance.exited', data: { exitCode: 0 } },
      ];
  return [
    { type: 'instance.requested', data: { spec: spec(id) } },
    { type: 'instance.spawned', data },
    { type: 'instance.healthy', data: { identity: 'match' } },
    { type: 'instance.running', data: {} },
    { type: 'instance.crashed', data: { reason: 'exit', exitCode: 1 } },
    { type: 'instance.restart-scheduled', data: { attempt: 1, dueAt: at(t) } },
    { type: 'instance.restart-due', data: { attempt: 1 } },
    { type: 'instance.spawned', data },
    ...tail,
  ].map((e, i) => ({ ...e, at: at(t + i) }));
}

/** The log, as the supervisor would have written it (events, projection rows, snapshots at terminal states). */
async function generate(file: string, events: number, live: number, log: (m: string) => void): Promise<void> {
  const actors = events / 10;
  const tmp = `${file}.partial`;
  rmSync(tmp, { force: true });
  const store = new SqlitePortStore(tmp, { synchronous: 'NORMAL' });
  const machine = machines.instance;
  const liveEvery = Math.floor(actors / live);
  const t0 = nowMs();
  for (let a = 0; a < actors; a += 500) {
    const batch: StreamAppend[] = [];
    for (let k = a; k < Math.min(actors, a + 500); k++) {
      const id = `inst_${String(k).padStart(7, '0')}`;
      const stream = `instance-${id}`;
      const evs = history(id, k % liveEvery === 0, k * 10);
      const snapshot = replay(machine, evs);
      const createdAt = evs[0]!.at;
      const projection = {
        id,
        kind: 'instance',
        stream,
        state: stateName(snapshot),
        status: actorStatus(snapshot),
        version: 10,
        createdAt,
        updatedAt: evs[9]!.at,
        summary: summarize('instance', snapshot),
      };
      const terminal = projection.status === 'terminal';
      batch.push({
        stream,
        events: evs,
        expectedVersion: 'no-stream',
        row: projection,
        ...(terminal ? { snapshot: encodeSnapshot(machine, stream, 10, createdAt, snapshot) } : {}),
      });
    }
    await store.appendMany(batch);
    if (a % 50_000 === 0)
      log(`generating ${file}: ${a * 10}/${events} events (${Math.round((nowMs() - t0) / 1000)} s)`);
  }
  await store.close();
  renameSync(tmp, file);
  rmSync(`${tmp}-shutdown`, { force: true });
}

function startupBench(name: string, fullEvents: number, smokeEvents: number): Bench {
  return {
    name,
    async run(opts) {
      const { rounds, log } = opts;
      const { events, LIVE } = sizes(opts, {
        full: { events: fullEvents, LIVE: 200 },
        smoke: { events: smokeEvents, LIVE: 20 },
      });
      const home = mkdtempSync(join(tmpdir(), 'runlog-bench-startup-'));
      const db = join(home, 'runlog.db');
      try {
        if (opts.smoke) await generate(db, events, LIVE, log);
        else {
          mkdirSync(CACHE, { recursive: true });
          const cached = join(CACHE, `startup-${events}-v${LATEST_SCHEMA}.db`);
          if (!existsSync(cached)) await generate(cached, events, LIVE, log);
          // Each run works on a copy (a supervisor writes its heartbeat): the cache stays as generated.
          copyFileSync(cached, db);
        }
        // One clean start and stop first: a copied file has no clean-shutdown record yet, so its first open walks
        // every page (PRAGMA quick_check); every start after a clean stop does not.
        let rl = await createRunlog({
          home,
          reconcile: false,
          engineWatch: false,
          watchApps: false,
          metrics: false,
          log: () => undefined,
        });
        if (runlogInternals(rl).host.live().length !== LIVE)
          throw new Error(`${runlogInternals(rl).host.live().length} live actors, expected ${LIVE}`);
        await rl.close();
        const ours: number[] = [];
        const raw: number[] = [];
        for (let r = 0; r < rounds; r++) {
          let t0 = nowMs();
          rl = await createRunlog({
            home,
            reconcile: false,
            engineWatch: false,
            watchApps: false,
            metrics: false,
            log: () => undefined,
          });
          ours.push(nowMs() - t0);
          const live = runlogInternals(rl).host.live().length;
          await rl.close();
          if (live !== LIVE) throw new Error(`${live} live actors, expected ${LIVE}`);
          t0 = nowMs();
          const raw0 = new Database(db, { readonly: true });
          const streams = raw0.prepare("SELECT stream FROM actors WHERE status = 'active'").pluck().all() as string[];
          const read = raw0.prepare('SELECT * FROM events WHERE stream = ? ORDER BY version');
          let rows = 0;
          for (const s of streams) rows += read.all(s).length;
          raw0.close();
          raw.push(nowMs() - t0);
          if (rows !== LIVE * 10) throw new Error(`raw read ${rows} rows`);
        }
        const v = median(ours);
        const b = median(raw);
        const target =
          name === 'startup.1m'
            ? '≤ 1000 ms'
            : name === 'startup.5m'
              ? '≤ 1.3× startup.100k'
              : 'the reference for startup.5m';
        return sideBySide(name, 'ms', v, b, { events, actors: events / 10, live: LIVE, target });
      } finally {
        rmSync(home, { recursive: true, force: true });
      }
    },
  };
}

export const startupBenches: Bench[] = [
  startupBench('startup.100k', 100_000, 1_000),
  startupBench('startup.1m', 1_000_000, 2_000),
  startupBench('startup.5m', 5_000_000, 5_000),
];
