// `cap grant`/`cap revoke` on a cluster: the change is one event on the app's stream (app-grants.ts), and every
// node brings the instances IT owns to the app's recorded words, whatever node took the call. No request and
// answer between nodes: each node follows the log and, when it sees an `app.tool-granted`/`-revoked`, when it
// takes instances over (or picks them up), after it spawns one, and at start-up, appends `instance.tool-granted`/`-revoked` to each
// instance it holds the lease of whose tools differ (toolChanges: none when they match).
//
// At most once per instance, never lost:
// - Only the lease holder appends (the host's appends are fenced): a node that lost an instance is refused.
// - One node brings its instances one at a time (a chain of syncs), reading each instance's tools after the
//   previous sync's events are in: a second look at the same change finds nothing to do.
// - The owner killed -9 before it applied the change: the survivor that takes the instance over has read everything
//   the dead owner committed (the store catches up before a takeover), so it applies only what is still missing.
// Each instance event's meta.cap names the app event it carries out (its seq), so a caller can tell which
// instances a change reached, and on which node (meta.node).
import { FencedError } from '../../domain/errors.ts';
import type { InstanceContext } from '../../machines/instance.machine.ts';
import type { EventStorePort, Subscription } from '../../store/port.ts';
import type { DispatchResult, LiveActor } from '../host/actor-host.ts';
import { APP_TOOL_GRANTED, APP_TOOL_REVOKED, readToolLog, toolChanges, type ToolLog } from './app-grants.ts';

export interface AppToolSyncDeps {
  store: Pick<EventStorePort, 'readStream' | 'subscribe' | 'lastSeq'>;
  /** The live actors of this node's host. */
  live(): LiveActor[];
  /** Whether this node holds the stream's lease (always, on one machine). */
  owns(stream: string): boolean;
  dispatch(
    instanceId: string,
    event: {
      type: 'instance.tool-granted' | 'instance.tool-revoked';
      data: { tool: string; via: string };
      meta: Record<string, unknown>;
    },
  ): Promise<DispatchResult>;
  log(message: string): void;
}

/** An instance event this node appended to carry out a `cap` change. */
export interface AppliedToolChange {
  instanceId: string;
  tool: string;
  granted: boolean;
  /** The app event it carries out. */
  seq: number;
}

export class AppToolSync {
  private chain: Promise<unknown> = Promise.resolve();
  private sub: Subscription | null = null;
  private stopped = false;

  constructor(private readonly deps: AppToolSyncDeps) {}

  /**
   * Follows the log from the head on (read first: what was recorded before it is syncAll's at start-up): every `cap`
   * change, whichever node recorded it, reaches the instances owned here. Resolves once it follows.
   */
  async start(): Promise<void> {
    const head = await this.deps.store.lastSeq();
    if (this.stopped) return;
    this.sub = this.deps.store.subscribe({ from: head + 1 }, (e) => {
      if (e.type !== APP_TOOL_GRANTED && e.type !== APP_TOOL_REVOKED) return;
      const appId = String(e.data.appId);
      void this.syncApp(appId).catch((err: unknown) =>
        this.deps.log(`cap change of ${appId}: ${(err as Error).message}`),
      );
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    const sub = this.sub;
    this.sub = null;
    await sub?.close();
  }

  /** Brings every instance of the app owned here to its recorded `cap` words. */
  syncApp(appId: string): Promise<AppliedToolChange[]> {
    return this.serial((spec) => spec.appId === appId);
  }

  /** Brings these streams' instances (just taken over or picked up) to their app's `cap` words. */
  syncStreams(streams: readonly string[]): Promise<AppliedToolChange[]> {
    const set = new Set(streams);
    return this.serial((_spec, actor) => set.has(actor.stream));
  }

  /**
   * An instance just spawned here (its first event committed, its lease held): a change recorded after its spawn
   * read the app's grants (instances.prepare) but before that event committed found it not yet owned, or without a
   * spec, and passed it by. Looked at once more now, after anything a look in that window did.
   */
  spawned(stream: string): Promise<AppliedToolChange[]> {
    return this.syncStreams([stream]);
  }

  /** Every instance owned here (at start-up: changes recorded while this node was down). */
  syncAll(): Promise<AppliedToolChange[]> {
    return this.serial(() => true);
  }

  private serial(
    pick: (spec: NonNullable<InstanceContext['spec']>, actor: LiveActor) => boolean,
  ): Promise<AppliedToolChange[]> {
    const run = this.chain.then(() => this.bring(pick));
    this.chain = run.catch(() => undefined);
    return run;
  }

  private async bring(
    pick: (spec: NonNullable<InstanceContext['spec']>, actor: LiveActor) => boolean,
  ): Promise<AppliedToolChange[]> {
    const applied: AppliedToolChange[] = [];
    const logs = new Map<string, ToolLog>();
    for (const actor of this.deps.live()) {
      if (actor.kind !== 'instance' || !this.deps.owns(actor.stream)) continue;
      const spec = (actor.snapshot.context as InstanceContext).spec;
      if (!spec || !pick(spec, actor)) continue;
      let log = logs.get(spec.appId);
      if (!log) logs.set(spec.appId, (log = await readToolLog(this.deps.store, spec.appId)));
      for (const c of toolChanges(spec.tools, log)) {
        try {
          const r = await this.deps.dispatch(actor.id, {
            type: c.granted ? 'instance.tool-granted' : 'instance.tool-revoked',
            data: { tool: c.tool, via: 'cap' },
            meta: { cap: c.seq },
          });
          if (r.accepted) applied.push({ instanceId: actor.id, tool: c.tool, granted: c.granted, seq: c.seq });
        } catch (err) {
          // Lost the lease meanwhile: the new owner applies it when it takes the instance over.
          if (err instanceof FencedError) break;
          this.deps.log(`${c.granted ? 'granting' : 'revoking'} ${c.tool} for ${actor.id}: ${(err as Error).message}`);
          break;
        }
      }
    }
    return applied;
  }
}
