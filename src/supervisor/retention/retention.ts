// Retention policy around a store's archiving (the Archiving capability: store/sqlite/archive.ts,
// store/postgres/archive.ts): what `--before` and `--retain` mean, where an archive goes by default, and the schedule
// `runlog serve --retain <duration>` runs it on. The store is handed in by its opener as an Archiving; nothing here
// asks which store it is.
import { join, resolve } from 'node:path';
import { ensurePrivateDirectory } from '../../adapters/files/local-files.ts';
import { RunlogError, UsageError } from '../../domain/errors.ts';
import type { ArchiveResult, ArchiveStep, Archiving } from '../../store/capabilities.ts';

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
  if (/^\d{4}-\d{2}-\d{2}/.test(text) && !Number.isNaN(Date.parse(text)))
    return new Date(Date.parse(text)).toISOString();
  throw new UsageError(
    `--before must be a date (2026-11-01, 2026-11-01T12:00:00Z) or a duration back from now (30d, 12h, 90m, 2w), not '${text}'`,
  );
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
  /** Told where the run stands; awaited when it returns a promise. */
  onStep?: (step: ArchiveStep) => void | Promise<void>;
}

/** One archive run: the events of actors that ended before `before` move to `out` (default under `<home>/archives`). */
export async function archiveLog(archiving: Archiving, options: ArchiveRunOptions): Promise<ArchiveResult> {
  const now = options.now ?? (() => new Date().toISOString());
  const out = options.out ? resolve(options.out) : defaultArchiveFile(options.home, now());
  return archiving.archiveEnded({
    before: options.before,
    out,
    now,
    ...(options.onStep ? { onStep: options.onStep } : {}),
  });
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

/**
 * `runlog archive --store postgres://…`: one run on the log at that URL (`?schema=` names its schema), beside its
 * supervisors (one archiver at a time across the cluster: a second gets ARCHIVE_BUSY). This is the command's
 * opener: it opens the PostgreSQL event store alone and archives through it.
 */
export async function archiveStoreUrl(url: string, options: ArchiveRunOptions): Promise<ArchiveResult> {
  const [{ PgEventStore }, { splitStoreUrl }, { archiveEndedPg }] = await Promise.all([
    import('../../store/postgres/event-store.ts'),
    import('../../store/postgres/url.ts'),
    import('../../store/postgres/archive.ts'),
  ]);
  const split = splitStoreUrl(url);
  const pg = await PgEventStore.open({ url: split.url, schema: split.schema ?? 'runlog', maxConnections: 2 });
  try {
    return await archiveLog({ archiveEnded: (o) => archiveEndedPg(pg, o) }, options);
  } finally {
    await pg.close();
  }
}

/**
 * Runs the policy once now and then every `everyMs` in this process (`runlog serve --retain`), on either store. The
 * supervisor keeps working while a run writes the archive (on SQLite the removal's transaction, on PostgreSQL its
 * short one, holds appends until it commits). A run still going when the next is due is not doubled; a run another
 * node is doing (ARCHIVE_BUSY) is skipped; a failed run is logged and changes nothing, and the next one tries again.
 */
export function startRetention(
  archiving: Archiving,
  home: string,
  policy: RetentionPolicy,
  log: (message: string, result?: ArchiveResult) => void,
  now: () => string = () => new Date().toISOString(),
): () => void {
  let running = false;
  const run = async (): Promise<void> => {
    if (running) return;
    running = true;
    try {
      const before = new Date(Date.parse(now()) - policy.retainMs).toISOString();
      const r = await archiveLog(archiving, { before, home, now });
      if (r.file)
        log(
          `retention: archived ${r.actors} actors (${r.events} events) that ended before ${before} to ${r.file}; ` +
            `log ${r.sizeBefore} → ${r.sizeAfter} bytes`,
          r,
        );
    } catch (err) {
      if (err instanceof RunlogError && err.code === 'ARCHIVE_BUSY')
        log('retention: another node is archiving this log; this run is skipped');
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
