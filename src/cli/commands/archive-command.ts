// `runlog archive`: retention by hand. The events of actors that ended before a time move into a gzip JSONL
// archive (a history per actor, in `runlog export`'s format) and leave the log; each actor keeps a tombstone row,
// so `ps --all` and the inspector still list it and say where it went. Live actors are never archived. Takes the
// log's writer lock (not beside a running supervisor: `runlog serve --retain` runs the same thing on a schedule).
// On PostgreSQL (`--store postgres://…`) it runs beside the cluster's supervisors, one archiver at a time
// (store/postgres/archive.ts: a second one gets ARCHIVE_BUSY).
import { resolvePaths } from '../../config/paths.ts';
import { UsageError } from '../../domain/errors.ts';
import type { Command } from '../command.ts';
import { EXIT, printJson } from '../output.ts';
import { withWritableLog } from '../writable-log.ts';

export const archiveCommand: Command = {
  name: 'archive',
  summary: 'move the events of actors that ended before a time into a compressed archive; tombstones stay in the log',
  usage: 'runlog archive --before <date|duration> [--out <file.jsonl.gz>] [--db <path> | --store <url>] [--json]',
  options: {
    before: {
      type: 'string',
      value: '<date|duration>',
      description: 'archive actors that ended before this date (2026-11-01) or this long ago (30d, 12h)',
    },
    out: {
      type: 'string',
      value: '<file>',
      description: 'the archive to create (never overwritten)',
      defaultText: '<home>/archives/runlog-<time>.jsonl.gz',
    },
  },
  examples: [
    'runlog archive --before 30d',
    'runlog archive --before 2026-11-01 --out /backup/runlog-2026-10.jsonl.gz',
    'runlog replay --file /backup/runlog-2026-10.jsonl.gz exec_01J9Z',
  ],
  run: async (args, io) => {
    const text = args.values.before as string | undefined;
    if (text === undefined) throw new UsageError(`--before is required\nusage: ${archiveCommand.usage}`);
    const { archiveLog, archiveStoreUrl, parseBefore } = await import('../../supervisor/retention/retention.ts');
    const before = parseBefore(text, new Date().toISOString());
    const home = resolvePaths({ home: args.home, db: args.db }).home;
    const out = args.values.out !== undefined ? { out: args.values.out as string } : {};
    const report = (r: Awaited<ReturnType<typeof archiveStoreUrl>>): number => {
      if (io.json) printJson(io, { before, ...r });
      else if (!r.file) io.out(`nothing to archive: no actor ended before ${before}`);
      else {
        io.out(
          `archived ${r.actors} actors (${r.events} events) that ended before ${before} to ${r.file} ` +
            `(${r.bytes} bytes, ends at seq ${r.lastSeq}, ${r.lastHash!.slice(0, 16)}…)`,
        );
        io.out(
          `log ${r.sizeBefore} → ${r.sizeAfter} bytes (${r.vacuum} vacuum); replay one with: runlog replay --file ${r.file} <id>`,
        );
      }
      return EXIT.ok;
    };
    if (args.store) {
      // PostgreSQL: beside running supervisors (other nodes keep appending); one archiver at a time (ARCHIVE_BUSY).
      return report(await archiveStoreUrl(args.store, { before, home, ...out }));
    }
    return withWritableLog(args, 'runlog archive', async (log) =>
      report(await archiveLog(log.archiving, { before, home, ...out })),
    );
  },
};
