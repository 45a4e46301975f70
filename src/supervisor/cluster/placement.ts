// Spawns placed on another node of a cluster, handed over through the log (nodes need not know each other's
// addresses, only share the store). The node that takes the API call appends `placement.spawn-requested` to the
// target's stream `placement-<node>`; the target follows that stream (its copy of the log), prepares the app in
// its own workspace and creates the instance — taking the instance's lease in the transaction of its first event
// (the PostgreSQL store's claim), so the spawn is recorded by, and owned by, the target. The caller follows the instance's
// stream in its own copy and answers once it has settled (running, or why not), like a local spawn. A target that
// cannot spawn it (no such app directory on its host, an id taken) records `placement.spawn-refused` with the
// typed error's code, which the caller throws. A request carries a deadline: a target that reads it later (it
// was down) does not act on it, so a caller that gave up (PLACEMENT_TIMEOUT) never has it spawned behind its back.
import { ERROR_CODES, type ErrorCode } from '../../domain/error-codes.ts';
import { RunlogError } from '../../domain/errors.ts';
import type { RecordedEvent } from '../../domain/events.ts';
import type { EventStorePort, Subscription } from '../../store/port.ts';
import { inspectActor, type ActorView } from '../../inspect/inspection.ts';
import { placementStream } from './request-streams.ts';
import { spawnSettled } from '../host/settle-rules.ts';

export { placementStream };
export const SPAWN_REQUESTED = 'placement.spawn-requested';
export const SPAWN_REFUSED = 'placement.spawn-refused';
/** How soon a look at the log that found the store unreachable is tried again. */
const STORE_RETRY_MS = 1000;

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
  store: EventStorePort;
  node: string;
  nowMs(): number;
  appendFact(stream: string, events: { type: string; data: Record<string, unknown> }[]): Promise<unknown>;
  /** Prepares the app here and records the instance (resolves once its first event is appended). */
  spawnHere(request: PlacedSpawn): Promise<unknown>;
  log(message: string): void;
}

export class Placement {
  private sub: Subscription | null = null;
  private stopped = false;
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
    const check = async (e: RecordedEvent | null): Promise<void> => {
      if (
        e &&
        e.stream === requests &&
        e.type === SPAWN_REFUSED &&
        (e.data as { instanceId?: unknown }).instanceId === request.instanceId
      ) {
        const d = e.data as { code?: string; message?: string };
        const code = (d.code && d.code in ERROR_CODES ? d.code : 'SPAWN_FAILED') as ErrorCode;
        done({
          error: new RunlogError(
            code,
            `node ${target} did not spawn ${request.instanceId}: ${d.message ?? 'refused'}`,
            { node: target, instanceId: request.instanceId },
          ),
        });
        return;
      }
      try {
        if ((await store.streamVersion(stream)) === 0) return;
        const view = await inspectActor(store, request.instanceId);
        if (spawnSettled(view)) done({ view });
      } catch {
        // Not readable now (the store briefly unreachable): the next event, or the deadline, looks again.
      }
    };
    const timer = setTimeout(() => {
      void (async () => {
        // Recorded (by the target, or a survivor of it) but not settled: a TIMEOUT saying the state the log has.
        if ((await store.streamVersion(stream).catch(() => 0)) > 0) {
          const view = await inspectActor(store, request.instanceId).catch(() => null);
          if (view) {
            done(
              spawnSettled(view)
                ? { view }
                : {
                    error: new RunlogError(
                      'TIMEOUT',
                      `instance ${request.instanceId} did not settle within ${timeoutMs} ms (state ${view.state})`,
                    ),
                  },
            );
            return;
          }
        }
        done({
          error: new RunlogError(
            'PLACEMENT_TIMEOUT',
            `node ${target} did not record the spawn of ${request.instanceId} within ${timeoutMs} ms (it is not acted on later)`,
            { node: target, instanceId: request.instanceId },
          ),
        });
      })();
    }, timeoutMs);
    let sub: Subscription | null = null;
    try {
      // Following from the log's head before the request is appended: nothing the target records can be missed.
      const head = await store.lastSeq();
      sub = store.subscribe({ from: head + 1 }, async (e) => {
        if (e.stream === stream || e.stream === requests) await check(e);
      });
      const data: SpawnRequestData = {
        ...request,
        from: this.deps.node,
        deadline: new Date(this.deps.nowMs() + timeoutMs).toISOString(),
      };
      await this.deps.appendFact(requests, [{ type: SPAWN_REQUESTED, data: { ...data } }]);
      await check(null);
      const r = await outcome;
      if (r.error) throw r.error;
      return r.view!;
    } finally {
      clearTimeout(timer);
      await sub?.close();
    }
  }

  /**
   * Follows this node's placement stream: requests not past their deadline and not spawned yet are carried out
   * (those up to the log's head read first, then the stream followed from the next position on). Resolves once it
   * follows.
   */
  async start(): Promise<void> {
    const { store, node } = this.deps;
    const mine = placementStream(node);
    const head = await store.lastSeq();
    const history = (await store.readRecent(mine)).filter((e) => e.seq <= head);
    const answered = new Set(
      history.filter((e) => e.type === SPAWN_REFUSED).map((e) => (e.data as { instanceId: string }).instanceId),
    );
    for (const e of history) {
      // why: events of this type are only ever appended by spawnOn() with this shape
      if (e.type === SPAWN_REQUESTED && !answered.has((e.data as unknown as SpawnRequestData).instanceId)) this.take(e);
    }
    if (this.stopped) return;
    this.sub = store.subscribe({ from: head + 1, stream: mine }, (e) => {
      if (e.stream === mine && e.type === SPAWN_REQUESTED) this.take(e);
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    const sub = this.sub;
    this.sub = null;
    await sub?.close();
  }

  /** Carries the request out in the background, unless it is being carried out, was, or is past its deadline. */
  private take(e: RecordedEvent): void {
    // why: events of this type are only ever appended by spawnOn() with this shape
    const d = e.data as unknown as SpawnRequestData;
    if (this.handling.has(d.instanceId)) return;
    if (!(Date.parse(d.deadline) > this.deps.nowMs())) return; // its caller has given up
    this.handling.add(d.instanceId);
    void (async () => {
      try {
        if (await this.spawnedAlready(d)) return;
        await this.deps.spawnHere({
          instanceId: d.instanceId,
          appDir: d.appDir,
          ...(d.sandbox ? { sandbox: d.sandbox } : {}),
        });
        this.deps.log(`spawned ${d.instanceId} placed here by ${d.from}`);
      } catch (err) {
        const code = err instanceof RunlogError ? err.code : 'SPAWN_FAILED';
        await this.deps
          .appendFact(placementStream(this.deps.node), [
            {
              type: SPAWN_REFUSED,
              data: { instanceId: d.instanceId, from: d.from, code, message: (err as Error).message },
            },
          ])
          .catch((e2: unknown) =>
            this.deps.log(`could not record the refusal of ${d.instanceId}: ${(e2 as Error).message}`),
          );
      } finally {
        this.handling.delete(d.instanceId);
      }
    })();
  }

  /**
   * Whether the instance is in the log already (spawned before, here or by a node that had the request first). A
   * read cut off (the store briefly unreachable) is tried again until the request's deadline; past it, it is
   * left alone (its caller has given up).
   */
  private async spawnedAlready(d: SpawnRequestData): Promise<boolean> {
    for (;;) {
      try {
        return (await this.deps.store.streamVersion(`instance-${d.instanceId}`)) > 0;
      } catch (err) {
        if (this.stopped || !(Date.parse(d.deadline) > this.deps.nowMs() + STORE_RETRY_MS)) {
          this.deps.log(`placed spawn of ${d.instanceId} not taken: ${(err as Error).message}`);
          return true;
        }
        await new Promise((r) => setTimeout(r, STORE_RETRY_MS));
      }
    }
  }
}
