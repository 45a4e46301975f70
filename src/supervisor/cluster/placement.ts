// Spawns placed on another node of a cluster, handed over through the log (nodes need not know each other's
// addresses, only share the store). The node that takes the API call appends `placement.spawn-requested` to the
// target's stream `placement-<node>`; the target follows that stream (its copy of the log), prepares the app in
// its own workspace and creates the instance — taking the instance's lease in the transaction of its first event
// (PgHostStore's claim), so the spawn is recorded by, and owned by, the target. The caller follows the instance's
// stream in its own copy and answers once it has settled (running, or why not), like a local spawn. A target that
// cannot spawn it (no such app directory on its host, an id taken) records `placement.spawn-refused` with the
// typed error's code, which the caller throws. A request carries a deadline: a target that reads it later (it
// was down) does not act on it, so a caller that gave up (PLACEMENT_TIMEOUT) never has it spawned behind its back.
import { ERROR_CODES, type ErrorCode } from '../../domain/error-codes.ts';
import { RunlogError } from '../../domain/errors.ts';
import type { RecordedEvent } from '../../domain/events.ts';
import type { HostStore } from '../../store/host-store.ts';
import { inspectActor, type ActorView } from '../../inspect/inspection.ts';
import { placementStream } from './request-streams.ts';
import { spawnSettled } from '../host/settle-rules.ts';

export { placementStream };
export const SPAWN_REQUESTED = 'placement.spawn-requested';
export const SPAWN_REFUSED = 'placement.spawn-refused';

export interface PlacedSpawn {
  instanceId: string;
  appDir: string;
  sandbox?: 'proot' | 'container';
}

interface SpawnRequestData extends PlacedSpawn {
  from: string;
  deadline: string;
}

export interface PlacementDeps {
  store: HostStore;
  node: string;
  nowMs(): number;
  appendFact(stream: string, events: { type: string; data: Record<string, unknown> }[]): Promise<unknown>;
  /** Prepares the app here and records the instance (resolves once its first event is appended). */
  spawnHere(request: PlacedSpawn): Promise<unknown>;
  log(message: string): void;
}

export class Placement {
  private off: (() => void) | null = null;
  private readonly handling = new Set<string>();

  constructor(private readonly deps: PlacementDeps) {}

  /**
   * Asks `target` to spawn it and resolves with the instance once the target recorded it and it settled
   * (running, crashed, …). Rejects with the target's typed error when it refused, PLACEMENT_TIMEOUT when nothing
   * settled within `timeoutMs` (the request is not acted on after that).
   */
  async spawnOn(target: string, request: PlacedSpawn, timeoutMs: number): Promise<ActorView> {
    const { store } = this.deps;
    const stream = `instance-${request.instanceId}`;
    const requests = placementStream(target);
    let done: (r: { view?: ActorView; error?: Error }) => void = () => undefined;
    const outcome = new Promise<{ view?: ActorView; error?: Error }>((resolve) => (done = resolve));
    const check = (e: RecordedEvent | null) => {
      if (e && e.stream === requests && e.type === SPAWN_REFUSED && (e.data as { instanceId?: unknown }).instanceId === request.instanceId) {
        const d = e.data as { code?: string; message?: string };
        const code = (d.code && d.code in ERROR_CODES ? d.code : 'SPAWN_FAILED') as ErrorCode;
        done({ error: new RunlogError(code, `node ${target} did not spawn ${request.instanceId}: ${d.message ?? 'refused'}`, { node: target, instanceId: request.instanceId }) });
        return;
      }
      if (store.streamVersion(stream) === 0) return;
      const view = inspectActor(store, request.instanceId);
      if (spawnSettled(view)) done({ view });
    };
    // Following before the request is appended: nothing the target records can be missed.
    const unsubscribe = store.subscribe({}, (e) => {
      if (e.stream === stream || e.stream === requests) check(e);
    });
    const timer = setTimeout(() => {
      // Recorded (by the target, or a survivor of it) but not settled: a TIMEOUT saying the state the log has.
      if (store.streamVersion(stream) > 0) {
        const view = inspectActor(store, request.instanceId);
        done(spawnSettled(view) ? { view } : { error: new RunlogError('TIMEOUT', `instance ${request.instanceId} did not settle within ${timeoutMs} ms (state ${view.state})`) });
        return;
      }
      done({ error: new RunlogError('PLACEMENT_TIMEOUT', `node ${target} did not record the spawn of ${request.instanceId} within ${timeoutMs} ms (it is not acted on later)`, { node: target, instanceId: request.instanceId }) });
    }, timeoutMs);
    try {
      const data: SpawnRequestData = { ...request, from: this.deps.node, deadline: new Date(this.deps.nowMs() + timeoutMs).toISOString() };
      await this.deps.appendFact(requests, [{ type: SPAWN_REQUESTED, data: { ...data } }]);
      check(null);
      const r = await outcome;
      if (r.error) throw r.error;
      return r.view!;
    } finally {
      clearTimeout(timer);
      unsubscribe();
    }
  }

  /** Follows this node's placement stream: requests not past their deadline and not spawned yet are carried out. */
  start(): void {
    const { store, node } = this.deps;
    const mine = placementStream(node);
    const history = store.readRecent(mine);
    const answered = new Set(history.filter((e) => e.type === SPAWN_REFUSED).map((e) => (e.data as { instanceId: string }).instanceId));
    for (const e of history) {
      // why: events of this type are only ever appended by spawnOn() with this shape
      if (e.type === SPAWN_REQUESTED && !answered.has((e.data as unknown as SpawnRequestData).instanceId)) this.take(e);
    }
    this.off = store.subscribe({ afterSeq: store.lastSeq(), stream: mine }, (e) => {
      if (e.type === SPAWN_REQUESTED) this.take(e);
    });
  }

  stop(): void {
    this.off?.();
    this.off = null;
  }

  private take(e: RecordedEvent): void {
    // why: events of this type are only ever appended by spawnOn() with this shape
    const d = e.data as unknown as SpawnRequestData;
    const { store } = this.deps;
    if (this.handling.has(d.instanceId) || store.streamVersion(`instance-${d.instanceId}`) > 0) return;
    if (!(Date.parse(d.deadline) > this.deps.nowMs())) return; // its caller has given up
    this.handling.add(d.instanceId);
    void (async () => {
      try {
        await this.deps.spawnHere({ instanceId: d.instanceId, appDir: d.appDir, ...(d.sandbox ? { sandbox: d.sandbox } : {}) });
        this.deps.log(`spawned ${d.instanceId} placed here by ${d.from}`);
      } catch (err) {
        const code = err instanceof RunlogError ? err.code : 'SPAWN_FAILED';
        await this.deps
          .appendFact(placementStream(this.deps.node), [{ type: SPAWN_REFUSED, data: { instanceId: d.instanceId, from: d.from, code, message: (err as Error).message } }])
          .catch((e2: unknown) => this.deps.log(`could not record the refusal of ${d.instanceId}: ${(e2 as Error).message}`));
      } finally {
        this.handling.delete(d.instanceId);
      }
    })();
  }
}
