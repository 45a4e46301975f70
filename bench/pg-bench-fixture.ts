// What the PostgreSQL benches share: the server's URL, and a log of many ended actors in a schema of its own
// (written fast through PgEventStore.appendMany: test/support/pg-ended-log.ts), dropped when the bench is done.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { writeEndedActors, type EndedActor } from '../test/support/pg-ended-log.ts';

/** The server the benches use: RUNLOG_PG_URL, or the one `npm run setup` starts. */
export function benchPgUrl(): string {
  return process.env.RUNLOG_PG_URL ?? 'postgres://runlog:runlog@127.0.0.1:5432/runlog';
}

export interface EndedLog {
  schema: string;
  /** The store URL (`?schema=` the log's schema), as `--store` and PgHostStore take it. */
  url: string;
  /** A plain client with that schema first on its search_path (raw primitives, VACUUM, checks). */
  admin: pg.Client;
  actors: EndedActor[];
  /** How many events the ended actors wrote. */
  events: number;
}

/**
 * Writes `count` ended actors into a fresh schema (`rlbench_<tag>_…`), analyses the events table so plans are the
 * ones a settled log gets, runs `body`, and drops the schema whatever happens.
 */
export async function withEndedLog<T>(
  tag: string,
  count: number,
  log: (msg: string) => void,
  body: (l: EndedLog) => Promise<T>,
): Promise<T> {
  const schema = `rlbench_${tag}_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: benchPgUrl(), options: `-c search_path=${schema}` });
  await admin.connect();
  try {
    const url = `${benchPgUrl()}?schema=${schema}`;
    const t0 = Date.now();
    const actors = await writeEndedActors(url, count, { batch: 500 });
    const events = actors.reduce((n, a) => n + a.events, 0);
    log(`${count} ended actors, ${events} events, written in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    await admin.query('VACUUM ANALYZE events');
    return await body({ schema, url, admin, actors, events });
  } finally {
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await admin.end();
  }
}

/**
 * A log kept between runs in a schema of its own (`write` fills it, once): a full run of a bench over a long history
 * writes it the first time only. A schema left half-written by an interrupted run is dropped and written again; a
 * `bench_generated` table marks one that is complete.
 */
export async function cachedSchema(admin: pg.Client, schema: string, write: () => Promise<void>): Promise<void> {
  const done = await admin.query(
    `SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'bench_generated'`,
    [schema],
  );
  if (done.rows.length > 0) return;
  await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await write();
  await admin.query(`CREATE TABLE ${schema}.bench_generated (done boolean NOT NULL DEFAULT true)`);
}
