// The retention figure of docs/guides/log-care.md (its conditions in bench/results/): the size of a log after a
// simulated year of 1,000 executions and 20 app instances a day, with and without a 30-day retention policy.
//
//   nice npx tsx scripts/retention-year.ts [--days 365] [--executions 1000] [--instances 20] [--retain-days 30]
//                                         [--only none|retain] [--json]
//
// (About 4 s per simulated day on a loaded 2-core machine: a year takes about half an hour per log; `--only` runs
// one of the two, so both can run side by side.)
//
// Every actor is a real history (the golden logs in test/fixtures/golden, renamed and moved to its day): executions
// mostly succeed (its 7-event history), one in ten fails (the failure histories, 2 to 6 events, one of each reason in
// turn); instances alternate the instance that crashed, restarted and was stopped (13 events) and the one adopted
// after a supervisor restart (3 events). They go through the real actor host and store (projection, a snapshot at
// each terminal state, the hash chain), with synchronous=NORMAL to write faster (the bytes on disk are the same).
// With retention, `archiveLog` runs once per simulated day with `before` = that day minus the retention, as
// `runlog serve --retain 30d` would. Sizes are of the .db file after a clean close (WAL checkpointed into it).
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { archiveLog } from '../src/supervisor/retention/retention.ts';
import { createRunlog } from '../src/supervisor/runlog.ts';
import type { History } from '../src/domain/history.ts';
import { readHistoryFile } from '../src/inspect/history-file.ts';
import { runlogInternals } from '../src/supervisor/runlog-internals.ts';

const { values } = parseArgs({
  options: {
    days: { type: 'string', default: '365' },
    executions: { type: 'string', default: '1000' },
    instances: { type: 'string', default: '20' },
    'retain-days': { type: 'string', default: '30' },
    json: { type: 'boolean', default: false },
    only: { type: 'string' },
  },
});
const DAYS = Number(values.days);
const EXECUTIONS = Number(values.executions);
const INSTANCES = Number(values.instances);
const RETAIN_DAYS = Number(values['retain-days']);
const DAY = 86_400_000;
const START = Date.parse('2026-01-01T00:00:00.000Z');

const golden = (name: string): History =>
  readHistoryFile(join(import.meta.dirname, '..', 'test', 'fixtures', 'golden', `${name}.jsonl`));
const SUCCEEDED = golden('execution-succeeded');
const FAILED = ['resolution', 'validation', 'materialization', 'runtime', 'timeout', 'cancelled', 'lost'].map((r) =>
  golden(`execution-failed-${r}`),
);
const INSTANCE = [golden('instance-crashed-restarted'), golden('instance-adopted')];

function historyFor(kind: 'execution' | 'instance', n: number): History {
  if (kind === 'instance') return INSTANCE[n % INSTANCE.length]!;
  return n % 10 === 9 ? FAILED[Math.floor(n / 10) % FAILED.length]! : SUCCEEDED;
}

async function writeActor(
  rl: Awaited<ReturnType<typeof createRunlog>>,
  h: History,
  id: string,
  startMs: number,
): Promise<void> {
  const first = h.events[0]!;
  const t0 = Date.parse(first.at);
  for (const [i, e] of h.events.entries()) {
    const at = new Date(startMs + (Date.parse(e.at) - t0)).toISOString();
    const data = JSON.parse(JSON.stringify(e.data).replaceAll(h.header.id, id)) as Record<string, unknown>;
    const event = { type: e.type, at, data, meta: e.meta } as never;
    if (i === 0) await runlogInternals(rl).host.create(h.header.kind, id, event);
    else await rl.send(h.header.kind, id, event);
  }
}

interface Result {
  retainDays: number | null;
  days: number;
  actors: number;
  events: number;
  dbBytes: number;
  archiveBytes: number;
  archives: number;
  seconds: number;
}

const mb = (n: number) => `${(n / 1e6).toFixed(1)} MB`;

async function simulate(retainDays: number | null): Promise<Result> {
  const home = mkdtempSync(join(tmpdir(), 'runlog-year-'));
  const t = performance.now();
  let actors = 0;
  let events = 0;
  try {
    let rl = await createRunlog({ home, supervise: false, readOnly: false, synchronous: 'NORMAL' });
    for (let d = 0; d < DAYS; d++) {
      const dayStart = START + d * DAY;
      const jobs: { kind: 'execution' | 'instance'; n: number }[] = [
        ...Array.from({ length: EXECUTIONS }, (_, n) => ({ kind: 'execution' as const, n })),
        ...Array.from({ length: INSTANCES }, (_, n) => ({ kind: 'instance' as const, n })),
      ];
      // Many actors at once: the host's group commit shares transactions between them, as under real load.
      for (let i = 0; i < jobs.length; i += 250) {
        await Promise.all(
          jobs.slice(i, i + 250).map(({ kind, n }, k) => {
            const h = historyFor(kind, n + d);
            const id = `${kind === 'execution' ? 'exec' : 'inst'}_d${String(d).padStart(3, '0')}_${String(n).padStart(4, '0')}`;
            events += h.events.length;
            actors += 1;
            return writeActor(rl, h, id, dayStart + Math.floor(((i + k) / jobs.length) * (DAY - 3_600_000)));
          }),
        );
      }
      if (retainDays !== null) {
        // The policy's daily run, at the end of the simulated day.
        const now = new Date(dayStart + DAY - 1).toISOString();
        await archiveLog(runlogInternals(rl).archiving, {
          before: new Date(Date.parse(now) - retainDays * DAY).toISOString(),
          home,
          now: () => now,
        });
      }
      if (!values.json && (d + 1) % 30 === 0) {
        const size =
          statSync(join(home, 'runlog.db')).size +
          (statSync(join(home, 'runlog.db-wal'), { throwIfNoEntry: false })?.size ?? 0);
        process.stderr.write(
          `  ${retainDays === null ? 'no retention' : `${retainDays}-day retention`}: day ${d + 1}, ` +
            `${events} events, log+wal ${mb(size)}, ${((performance.now() - t) / 1000).toFixed(0)} s\n`,
        );
      }
      if ((d + 1) % 60 === 0) {
        // Reopen now and then: a year-long supervisor restarts too, and the host then holds only live actors.
        await rl.close();
        rl = await createRunlog({ home, supervise: false, readOnly: false, synchronous: 'NORMAL' });
      }
    }
    await rl.close();
    const archiveDir = join(home, 'archives');
    let archiveBytes = 0;
    let archives = 0;
    try {
      for (const f of readdirSync(archiveDir)) {
        archiveBytes += statSync(join(archiveDir, f)).size;
        archives += 1;
      }
    } catch {
      /* no archives */
    }
    return {
      retainDays,
      days: DAYS,
      actors,
      events,
      dbBytes: statSync(join(home, 'runlog.db')).size,
      archiveBytes,
      archives,
      seconds: (performance.now() - t) / 1000,
    };
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

const results =
  values.only === 'none'
    ? [await simulate(null)]
    : values.only === 'retain'
      ? [await simulate(RETAIN_DAYS)]
      : [await simulate(null), await simulate(RETAIN_DAYS)];
if (values.json) console.log(JSON.stringify(results));
else {
  for (const r of results) {
    console.log(
      `${r.retainDays === null ? 'no retention      ' : `${r.retainDays}-day retention  `} ` +
        `${r.days} days, ${r.actors} actors, ${r.events} events: log ${mb(r.dbBytes)}` +
        (r.archives ? `, ${r.archives} archives ${mb(r.archiveBytes)}` : '') +
        ` (${r.seconds.toFixed(0)} s to simulate)`,
    );
  }
}
