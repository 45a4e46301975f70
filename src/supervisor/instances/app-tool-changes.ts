// `cap grant` and `cap revoke`: a tool granted to or revoked from an app is recorded in the app's stream, applied to
// this node's running instances at once, and the answer says how far it reached the other nodes' within a few
// seconds (app-grants.ts, app-tool-sync.ts).
import type { Clock } from '../../domain/clock.ts';
import { NotFoundError, ValidationError } from '../../domain/errors.ts';
import { isValidAppId } from '../../domain/manifest.ts';
import type { InstanceContext } from '../../machines/instance.machine.ts';
import type { Leasing } from '../../store/capabilities.ts';
import { collect, type EventStorePort } from '../../store/port.ts';
import type { ActorHost } from '../host/actor-host.ts';
import { appStream, assertAppId, assertToolName, capReach, recordToolChange } from './app-grants.ts';
import type { AppToolSync } from './app-tool-sync.ts';
import { inspectActor, type ActorView } from '../../inspect/inspection.ts';
import type { InstanceSupervisor } from './instances.ts';
import type { AppToolsView } from '../runlog-api.ts';

/** How long a `cap` call waits for the other nodes' owners to apply the change before it answers what is pending. */
const CAP_REACH_WAIT_MS = 5000;

export interface AppToolInputs {
  store: EventStorePort;
  /** The cluster node's leases (who owns an instance now); null on one machine. */
  leasing: Leasing | null;
  host: ActorHost;
  instances: InstanceSupervisor;
  toolSync: AppToolSync;
  clock: Clock;
  selfNode: string;
  inspectNow(id: string): Promise<ActorView>;
}

export async function changeAppTool(
  i: AppToolInputs,
  appId: string,
  tool: string,
  grant: boolean,
): Promise<AppToolsView> {
  const { store, host, instances, clock } = i;
  assertToolName(tool);
  if (!isValidAppId(appId)) {
    // The old meaning took an instance id: say what the command takes now, and why.
    let instance: ActorView | null = null;
    try {
      instance = await i.inspectNow(appId);
    } catch {
      /* not an actor either */
    }
    const app = (instance?.summary as { appId?: string } | undefined)?.appId;
    if (app)
      throw new ValidationError(
        'CAP_TAKES_APP_ID',
        `cap ${grant ? 'grant' : 'revoke'} takes an app id, not an instance id: ${appId} is an instance of ${app}; ` +
          `grants apply to every instance of the app (runlog cap ${grant ? 'grant' : 'revoke'} ${app} ${tool})`,
        [`${appId} is an instance of ${app}`],
      );
    assertAppId(appId);
  }
  const installed = instances.installedTools(appId);
  const ofApp = async () => (await store.listActors({ kind: 'instance' })).filter((r) => r.summary.appId === appId);
  const known =
    installed !== null ||
    (await store.streamVersion(appStream(appId))) > 0 ||
    (await store.listActors({ kind: 'instance', all: true })).some((r) => r.summary.appId === appId);
  if (!known)
    throw new NotFoundError(
      'app',
      `${appId} (spawn it once, or install it into the workspace, before granting it tools)`,
    );
  const event = await recordToolChange(store, appId, tool, grant);
  // This node's instances now; other nodes' owners apply it as they read it (app-tool-sync.ts).
  await i.toolSync.syncApp(appId);
  await host.idle();
  const toolsOf = async (id: string) =>
    ((await inspectActor(store, id)).context as InstanceContext | undefined)?.spec?.tools ?? null;
  const { leasing } = i;
  const reach = async () =>
    capReach(
      await Promise.all(
        (await ofApp()).map(async (r) => ({
          instanceId: r.id,
          tools: await toolsOf(r.id),
          events: await collect(store.readStream(r.stream)),
          owner: leasing ? (await leasing.placement(r.stream)).owner : null,
        })),
      ),
      tool,
      grant,
      event.seq,
      i.selfNode,
    );
  // What the other owners did is read from the log, for a few seconds at most: the answer says what is pending.
  let r = await reach();
  for (
    const until = clock.nowMs() + CAP_REACH_WAIT_MS;
    leasing && r.pending.length > 0 && clock.nowMs() < until;
    r = await reach()
  ) {
    await new Promise<void>((done) => clock.after(100, done));
  }
  const latest = (await ofApp()).at(-1);
  const base = installed ?? (latest ? ((await toolsOf(latest.id)) ?? []) : []);
  return {
    appId,
    tool,
    granted: grant,
    tools: await instances.allowlist(appId, base),
    instances: r.changed.map((c) => c.instanceId),
    changed: r.changed,
    pending: r.pending,
    seq: event.seq,
  };
}
