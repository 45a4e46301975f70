// `runlog verify`: checks a log read-only (verify-log.ts) and names the first bad position of each kind of damage.
// Exit 0 when sound, 4 (damaged log) when anything is damaged. It never changes the log, and runs beside a
// supervisor.
import { resolvePaths } from '../../config/paths.ts';
import type { Command } from '../command.ts';
import { EXIT, printJson } from '../output.ts';

export const verifyCommand: Command = {
  name: 'verify',
  summary: "check the log's hash chain, its files, the projection and the snapshots; name the first bad position",
  usage: 'runlog verify [--json] [--archives <dir>] [--store postgres://…]',
  options: {
    archives: {
      type: 'string',
      value: '<dir>',
      description: 'where archives moved from where runlog archive wrote them are (found by file name)',
    },
  },
  examples: [
    'runlog verify',
    'runlog verify --db /backup/runlog.db --json',
    'runlog verify --store postgres://runlog@db:5432/runlog',
  ],
  run: async (args, io) => {
    const { verifyLog, verifyPgLog } = await import('../../inspect/verify-log.ts');
    const dirs = args.values.archives !== undefined ? { archiveDirs: [args.values.archives as string] } : {};
    const report = args.store
      ? await verifyPgLog(args.store, dirs)
      : await verifyLog(resolvePaths({ home: args.home, db: args.db }).db, dirs);
    if (io.json) printJson(io, report);
    else {
      for (const f of report.findings)
        io.out(`${f.severity === 'damage' ? 'DAMAGE' : 'warning'} ${f.code}: ${f.message}`);
      if (report.ok) {
        io.out(
          `ok: ${report.events} events, ${report.actors} actors` +
            `${report.archives > 0 ? `, ${report.archives} archive(s)` : ''}; ` +
            `the chain ends at seq ${report.lastSeq ?? 0}${report.lastHash ? ` (${report.lastHash.slice(0, 16)}…)` : ''}`,
        );
      } else {
        io.out(
          `damaged: ${report.findings.filter((f) => f.severity === 'damage').length} finding(s); nothing was changed`,
        );
      }
    }
    return report.ok ? EXIT.ok : EXIT.damagedLog;
  },
};
