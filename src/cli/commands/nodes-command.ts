// `runlog nodes`: the supervisors sharing a log (a cluster's, on PostgreSQL), each one's last heartbeat and its
// age, whether it is live, and the actors it owns (lease token and expiry). Read-only, like ps: it opens the log
// as the inspection commands do and works with no supervisor running.
import type { Command } from '../command.ts';
import { withInspectionLog } from '../inspection-log.ts';
import { EXIT, printJson, table } from '../output.ts';

const seconds = (ms: number | null): string => (ms === null ? '-' : `${(ms / 1000).toFixed(1)}s`);

export const nodesCommand: Command = {
  name: 'nodes',
  summary: 'the supervisors sharing the log: heartbeats, and the actors each owns',
  usage: 'runlog nodes [--json]',
  examples: ['runlog nodes --store postgres://runlog:runlog@127.0.0.1:5432/runlog'],
  run: async (args, io) => {
    const { readNodes } = await import('../../supervisor/cluster/nodes.ts');
    return withInspectionLog(args, async ({ store, cluster }) => {
      const view = await readNodes(store, cluster, new Date().toISOString());
      if (io.json) {
        printJson(io, view);
        return EXIT.ok;
      }
      if (view.nodes.length === 0) {
        io.err('no supervisor has run on this log');
        return EXIT.ok;
      }
      io.out(
        table(
          view.nodes.map((n) => [
            n.node,
            n.live ? 'live' : n.stoppedAt ? 'stopped' : 'gone',
            n.host ?? '-',
            n.pid === null ? '-' : String(n.pid),
            n.beatAt ?? '-',
            seconds(n.ageMs),
            String(n.owns.length),
          ]),
          ['NODE', 'STATUS', 'HOST', 'PID', 'HEARTBEAT', 'AGE', 'OWNS'],
        ),
      );
      const leases = view.nodes.flatMap((n) =>
        n.owns.map((a) => [
          a.id,
          a.kind,
          a.state ?? '?',
          n.node,
          String(a.token),
          a.expired ? `expired ${seconds(-a.expiresInMs)} ago` : `in ${seconds(a.expiresInMs)}`,
        ]),
      );
      if (leases.length > 0)
        io.out(`\n${table(leases, ['ACTOR', 'KIND', 'STATE', 'OWNER', 'TOKEN', 'LEASE EXPIRES'])}`);
      if (view.unowned.length > 0)
        io.err(
          `live actors no node owns (their lease was given back or never taken): ${view.unowned.map((a) => a.id).join(', ')}`,
        );
      return EXIT.ok;
    });
  },
};
