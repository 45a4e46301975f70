// Retention policy around the store's archive (store/sqlite/archive.ts, store/postgres/archive.ts): what `--before` and `--retain` mean, where
// an archive goes by default, and the schedule `runlog serve --retain <duration>` runs it on.
import { join, resolve } from 'node:path';
import { ensurePrivateDirectory } from '../../adapters/files/local-files.ts';
import { RunlogError, UsageError } from '../../domain/errors.ts';
import { archiveEnded, type ArchiveResult, type ArchiveStep } from '../../store/sqlite/archive.ts';
import { SqliteEventStore } from '../../store/sqlite/event-store.ts';

const UNITS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 7 * 86_400_000 };

/** A duration such as `30d`, `12h`, `90m`, `2w`, `45s`, in ms; null when the text is not one. */
export function parseDuration(text: string): number | null {
  const m = /^(\d+)([smhdw])$/.exec(text.trim());
  return m ? Number(m[1]) * UNITS[m[2]!]! : null;
}

/** `--before`: an ISO date or time (`2026-11-01`, `2026-11-01T12:00:00Z`), or a duration back from now (`30d`). */
export function parseBefore(text: string, now: string): string {
  const ms = parseDuration(text);
  if (ms !== null) return new Date(Date.parse(now) - ms).toISOString();
  if (/^\d{4}-\d{2}-\d{2}/.test(text) && !Number.isNaN(Date.parse(text))) return new Date(Date.parse(text)).toISOString();
  throw new UsageError(`--before must be a date (2026-11-01, 2026-11-01T12:00:00Z) or a duration back from now (30d, 12h, 90m, 2w), not '${text}'`);
}

/** `<home>/archives/runlog-<time>.jsonl.gz` (the directory created 0700). */
export function defaultArchiveFile(home: string, now: string): string {
  const dir = join(home, 'archives');
  ensurePrivateDirectory(dir);
  return join(dir, `runlog-${now.replace(/[:.]/g, '-')}.jsonl.gz`);
}

export interface ArchiveRunOptions {
  before: string;
  out?: string;
  home: string;
  now?: () => string;
  /** SQLite calls it synchronously; PostgreSQL awaits a promise it returns. */
  onStep?: (step: ArchiveStep) => void | Promise<void>;
}

/** One archive run: the events of actors that ended before `before` move to `out` (default under `<home>/archives`). */
export function archiveLog(store: SqliteEventStore, options: ArchiveRunOptions): ArchiveResult {
  const now = options.now ?? (() => new Date().toISOString());
  const out = options.out ? resolve(options.out) : defaultArchiveFile(options.home, now());
  const onStep = options.onStep;
  return archiveEnded(store, { before: options.before, out, now, ...(onStep ? { onStep: (s: ArchiveStep) => void onStep(s) } : {}) });
}

export interface RetentionPolicy {
  /** Actors that ended longer ago than this are archived. */
  retainMs: number;
  /** How often the policy runs (default: every hour, and once at start). */
  everyMs?: number;
}

/** `--retain <duration>`: how long ended actors stay in the log. */
export function parseRetain(text: string): number {
  const ms = parseDuration(text);
  if (ms === null || ms <= 0) throw new UsageError(`--retain must be a duration (30d, 12h, 2w), not '${text}'`);
  return ms;
}

/** A PostgreSQL log as the supervisor holds it (postgres/host-store.ts): its event store. */
interface PgLog {
  pg: import('../../store/postgres/event-store.ts').PgEventStore;
}

async function asPgLog(store: unknown): Promise<PgLog | null> {
  if (typeof store !== 'object' || store === null || !('pg' in store)) return null;
  const { PgEventStore } = await import('../../store/postgres/event-store.ts');
  return (store as { pg: unknown }).pg instanceof PgEventStore ? (store as PgLog) : null;
}

/**
 * One archive run on either store: SQLite (sqlite/archive.ts, synchronous) or PostgreSQL (postgres/archive.ts:
 * safe beside other nodes appending; a second archiver anywhere gets ARCHIVE_BUSY).
 */
export async function archiveAnyLog(store: unknown, options: ArchiveRunOptions): Promise<ArchiveResult> {
  if (store instanceof SqliteEventStore) return archiveLog(store, options);
  const log = await asPgLog(store);
  if (!log) throw new RunlogError('NOT_SUPPORTED', 'retention (runlog archive, --retain) works on a SQLite or a PostgreSQL log');
  const { archiveEndedPg } = await import('../../store/postgres/archive.ts');
  const now = options.now ?? (() => new Date().toISOString());
  const out = options.out ? resolve(options.out) : defaultArchiveFile(options.home, now());
  return archiveEndedPg(log.pg, { before: options.before, out, now, ...(options.onStep ? { onStep: options.onStep } : {}) });
}

/** `runlog archive --store postgres://…`: one run on the log at that URL (`?schema=` names its schema), beside its supervisors. */
export async function archiveStoreUrl(url: string, options: ArchiveRunOptions): Promise<ArchiveResult> {
  const [{ PgEventStore }, { splitStoreUrl }] = await Promise.all([import('../../store/postgres/event-store.ts'), import('../../store/postgres/host-store.ts')]);
  const split = splitStoreUrl(url);
  const pg = await PgEventStore.open({ url: split.url, schema: split.schema ?? 'runlog', maxConnections: 2 });
  try {
    return await archiveAnyLog({ pg }, options);
  } finally {
    await pg.close();
  }
}

/** The policy on a supervisor's log, SQLite or PostgreSQL. */
export async function startRetentionOn(store: unknown, home: string, policy: RetentionPolicy, log: (message: string) => void): Promise<() => void> {
  if (store instanceof SqliteEventStore) return startRetention(store, home, policy, log);
  if (!(await asPgLog(store))) throw new RunlogError('NOT_SUPPORTED', 'retention (runlog archive, --retain) works on a SQLite or a PostgreSQL log');
  return startRetentionAsync(store, home, policy, log);
}

/**
 * `serve --retain` on PostgreSQL: the same schedule, runs asynchronous (the supervisor keeps working while the
 * archive is written; the removal's short transaction holds appends, on every node, until it commits). A run
 * still going when the next is due is not doubled; a run another node is doing (ARCHIVE_BUSY) is skipped.
 */
export function startRetentionAsync(store: unknown, home: string, policy: RetentionPolicy, log: (message: string, result?: ArchiveResult) => void, now: () => string = () => new Date().toISOString()): () => void {
  let running = false;
  const run = async (): Promise<void> => {
    if (running) return;
    running = true;
    try {
      const before = new Date(Date.parse(now()) - policy.retainMs).toISOString();
      const r = await archiveAnyLog(store, { before, home, now });
      if (r.file) log(`retention: archived ${r.actors} actors (${r.events} events) that ended before ${before} to ${r.file}; log ${r.sizeBefore} → ${r.sizeAfter} bytes`, r);
    } catch (err) {
      if (err instanceof RunlogError && err.code === 'ARCHIVE_BUSY') log('retention: another node is archiving this log; this run is skipped');
      else log(`retention: archive run failed, nothing removed: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      running = false;
    }
  };
  const first = setTimeout(() => void run(), 0);
  const timer = setInterval(() => void run(), policy.everyMs ?? 3_600_000);
  first.unref();
  timer.unref();
  return () => {
    clearTimeout(first);
    clearInterval(timer);
  };
}

/**
 * Runs the policy once now and then every `everyMs` in this process (`runlog serve --retain`). A run is synchronous:
 * it holds the supervisor's loop while it writes the archive and removes the events. A failed run is logged and
 * changes nothing (sqlite/archive.ts); the next one tries again.
 */
export function startRetention(store: SqliteEventStore, home: string, policy: RetentionPolicy, log: (message: string, result?: ArchiveResult) => void, now: () => string = () => new Date().toISOString()): () => void {
  const run = (): void => {
    try {
      const before = new Date(Date.parse(now()) - policy.retainMs).toISOString();
      const r = archiveLog(store, { before, home, now });
      if (r.file) log(`retention: archived ${r.actors} actors (${r.events} events) that ended before ${before} to ${r.file}; log ${r.sizeBefore} → ${r.sizeAfter} bytes`, r);
    } catch (err) {
      log(`retention: archive run failed, nothing removed: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
  const first = setTimeout(run, 0);
  const timer = setInterval(run, policy.everyMs ?? 3_600_000);
  first.unref();
  timer.unref();
  return () => {
    clearTimeout(first);
    clearInterval(timer);
  };
}
