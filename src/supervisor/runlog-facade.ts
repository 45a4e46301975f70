// The Runlog facade: the public calls over the services the composition root built (composed.ts), and the close
// that ends them in dependency order. The call groups with logic of their own (instances/instance-calls.ts,
// executions/execute-call.ts) live with their concern; this file only puts the facade together. The services
// themselves stay off the public type: runlog's own code reaches them through runlog-internals.ts.
import { supervision } from '../domain/supervision.ts';
import { actorEvents, inspectActor, listActors, rebuildProjection, replayActor } from '../inspect/inspection.ts';
import { RunlogError } from '../domain/errors.ts';
import { readNodes } from './cluster/nodes.ts';
import type { Composed } from './composed.ts';
import { executeCall } from './executions/execute-call.ts';
import { suspendOnStop } from './host/graceful-stop.ts';
import { changeAppTool } from './instances/app-tool-changes.ts';
import { instanceCalls } from './instances/instance-calls.ts';
import type { Runlog } from './runlog-api.ts';
import { attachRunlogInternals } from './runlog-internals.ts';

/** The Runlog facade: the public calls over the composed services. */
export function runlogFacade(c: Composed): Runlog {
  const { store, supervise, services, ops } = c;
  const { host, executions } = services;
  const requireSupervisor = (what: string) => {
    if (!supervise)
      throw new RunlogError('READ_ONLY', `${what} needs a supervising runlog (createRunlog({ supervise: true }))`);
  };
  const toolInputs = {
    store,
    leasing: c.leasing,
    host,
    instances: services.instances,
    toolSync: c.toolSync,
    clock: c.clock,
    selfNode: c.selfNode,
    inspectNow: ops.inspectNow,
  };
  const runlog: Runlog = {
    home: c.paths.home,
    dbPath: c.opened.kind === 'pg' ? store.description : c.paths.db,
    supervision: async () => supervision(await store.readHeartbeat(), c.now()),
    nodes: () => readNodes(store, c.opened.clusterRecords, c.now()),
    archive: (o) => c.opened.archiving.archiveEnded(o),
    policy: executions.policy,
    list: (filter) => listActors(store, filter),
    inspect: (id) => inspectActor(store, id),
    events: (id, range) => actorEvents(store, id, range),
    replay: (id, o) => replayActor(store, id, o?.to),
    rebuild: async () => {
      if (c.opened.kind !== 'sqlite')
        throw new RunlogError(
          'NOT_SUPPORTED',
          `rebuild works on a SQLite log; on PostgreSQL the store folds the actors projection in every append (${store.description})`,
        );
      return rebuildProjection(store);
    },
    reconcile: (o) => {
      requireSupervisor('reconcile');
      return c.reconcile(o);
    },
    on: (event, cb) => c.bus.on(event, cb),
    send: (kind, id, event) => host.dispatch(kind, id, event),
    ...instanceCalls(c, requireSupervisor),
    async grant(appId, tool) {
      requireSupervisor('grant');
      return changeAppTool(toolInputs, appId, tool, true);
    },
    async revoke(appId, tool) {
      requireSupervisor('revoke');
      return changeAppTool(toolInputs, appId, tool, false);
    },
    async execute(o) {
      requireSupervisor('execute');
      return executeCall(c, o);
    },
    async idle() {
      await host.idle();
      await executions.idle(); // the pool's starts and removals, which no actor's effect holds
    },
    close: () => closeRunlog(c),
  };
  // What runlog's own server, CLI and tests reach beneath the calls (runlog-internals.ts).
  return attachRunlogInternals(runlog, {
    store,
    writer: c.writer,
    host,
    bus: c.bus,
    metrics: c.metrics,
    archiving: c.opened.archiving,
  });
}

/** Closes in dependency order: the cluster's services, the watchers, the host and its supervisors, then the log. */
async function closeRunlog(c: Composed): Promise<void> {
  const { cluster, services, log } = c;
  const { host, instances, executions } = services;
  await c.jobs?.close(); // no job is taken once closing starts; its cursor is recorded while the log is open
  cluster?.stopSelfFence();
  await cluster?.placement.stop();
  await cluster?.handover.stop();
  cluster?.follows.close();
  await c.toolSync.stop();
  await cluster?.queue.stop();
  await c.engineWatch?.close();
  await executions.close(); // the pool's removals are recorded: before the host closes
  await c.waits.close();
  if (c.supervise) await suspendOnStop(host, (id) => instances.tracks(id), log); // before the runners stop the PRoot sandboxes
  await host.close();
  services.timers.close();
  await instances.close();
  // Effects still waiting on something that closing detached (an exit watcher) must not hold the process.
  await Promise.race([host.idle().catch(() => undefined), new Promise((r) => setTimeout(r, 5000).unref())]);
  c.tracing?.close();
  c.metrics?.close();
  await c.heartbeat?.stop();
  await c.store.close();
  c.writer?.release();
}
