// Pre-started one-shot sandboxes. After an execution of a code record, the next sandbox for it (the same
// hardened create body: image, runtime/code/addition volumes, launcher, env, limits, isolation) is created and
// started ahead of time: its worker boots and blocks on stdin, waiting for one envelope. The next execution of
// that code still resolves strictly and materializes (re-checks) everything; only when what it would create is
// exactly what waits here (same key) does it take the sandbox instead of creating and starting one. A sandbox
// is taken once (claim removes it from the pool; StdinOnce closes its stdin after that one attach) and removed
// after its execution like any other.
//
// Bounds (operator policy `prestart`): per key, in total, and the memory their limits reserve; an idle one is
// removed after idleMs; a full pool makes room by removing the longest-waiting sandbox of another key.
//
// Every sandbox is a fact in the log before it exists (stream `sandbox-pool`): `pool.sandbox-prestarting` (before
// the create), `pool.sandbox-ready`, then `pool.sandbox-claimed` (by which execution) or `pool.sandbox-removed`
// (why). A supervisor that restarts removes every pre-started sandbox of its home that no live execution holds,
// and records it (recover()); the reconciler leaves the ones this pool holds alone (owns()).
import { randomBytes } from 'node:crypto';
import type { ContainerInfo, DockerEngine } from '../adapters/docker/docker-port.ts';
import { PRESTART_LABEL, type ExecutionContainerSpec, type ExecutionSandbox } from '../adapters/docker/execution-sandbox.ts';
import type { PrestartPolicy } from '../domain/at-run/operator-policy.ts';
import type { Clock } from '../domain/clock.ts';
import type { NewEvent, RecordedEvent } from '../domain/events.ts';
import { systemClock } from './system-clock.ts';

export const POOL_STREAM = 'sandbox-pool';
/** runlog.kind of a pre-started sandbox's container. */
export const PRESTART_KIND = 'prestart';

export interface PoolDeps {
  engine: DockerEngine;
  sandbox: ExecutionSandbox;
  /** The pool's bounds (which runtimes may be pre-started at all is the gate's: prestart-gate.ts). */
  policy: Omit<PrestartPolicy, 'publishers'>;
  /** Labels on every container (runlog.home, test labels). */
  labels: Readonly<Record<string, string>>;
  /** Appends facts to the pool's stream. */
  record(events: NewEvent[]): void;
  /** Reads the pool's stream (recovery). */
  read(): RecordedEvent[];
  log(msg: string): void;
  /** What a sandbox's waiting time and idle removal are measured on (default: the wall clock). */
  clock?: Clock;
}

/** What a pre-started sandbox is for: recorded, and compared by key only. */
export interface PoolTarget {
  key: string;
  uri: string;
  /** DID of the runtime's publisher: only a trusted one's runtime is pre-started (prestart-gate.ts). */
  publisher: string;
  codeCid: string;
  runtimeCid: string;
  memoryMb: number;
  /** The create spec, but for labels and invocation id (the pool sets those). */
  spec: Omit<ExecutionContainerSpec, 'labels' | 'invocationId' | 'name'>;
}

interface Entry {
  id: string;
  key: string;
  uri: string;
  memoryMb: number;
  containerId: string | null;
  /** waiting in the pool, claimed by an execution, or dropped (its removal under way). */
  state: 'waiting' | 'claimed' | 'dropped';
  ready: Promise<string | null>;
  since: number;
  /** Cancels the idle removal. */
  timer: (() => void) | null;
}

export interface Claimed {
  sandboxId: string;
  containerId: string;
  /** How long it had waited, started, for this execution. */
  waitedMs: number;
  /** The inspect that found it running (its invocation checks it again without another round trip). */
  info: ContainerInfo;
}

export class SandboxPool {
  readonly #entries = new Map<string, Entry>();
  /** The key each code URI was last served with: another key means the record or runtime changed. */
  readonly #lastKey = new Map<string, string>();
  readonly #work = new Set<Promise<unknown>>();
  #closed = false;
  readonly #clock: Clock;

  constructor(private readonly deps: PoolDeps) {
    this.#clock = deps.clock ?? systemClock;
  }

  get enabled(): boolean {
    return this.deps.policy.perCode > 0 && this.deps.policy.total > 0;
  }

  /** Sandboxes waiting or being started, for inspection and tests. */
  list(): { sandboxId: string; key: string; uri: string; containerId: string | null }[] {
    return [...this.#entries.values()].map((e) => ({ sandboxId: e.id, key: e.key, uri: e.uri, containerId: e.containerId }));
  }

  owns(containerId: string): boolean {
    for (const e of this.#entries.values()) if (e.containerId === containerId) return true;
    return false;
  }

  /**
   * The sandbox waiting for exactly this key (one being started is waited for: it is nearer than a new one),
   * taken out of the pool; null when there is none, or it died. Sandboxes of the same URI under another key are
   * removed: what they were started for is no longer what the records say.
   */
  async claim(uri: string, key: string, executionId: string): Promise<Claimed | null> {
    this.#supersede(uri, key);
    if (!this.enabled || this.#closed) return null;
    const entry = [...this.#entries.values()].filter((e) => e.key === key).sort((a, b) => (a.containerId ? 0 : 1) - (b.containerId ? 0 : 1) || a.since - b.since)[0];
    if (!entry) return null;
    this.#take(entry, 'claimed');
    const containerId = await entry.ready;
    if (!containerId) return null;
    // It must still be running, its worker waiting: a sandbox that died waiting is removed, never handed out.
    const info = await this.deps.engine.inspectContainer(containerId).catch(() => null);
    if (!info?.state.running) {
      this.#remove(entry, info ? `not running (${info.state.status}, exit ${info.state.exitCode})` : 'gone');
      return null;
    }
    this.deps.record([{ type: 'pool.sandbox-claimed', data: { sandbox: entry.id, containerId, executionId } }]);
    return { sandboxId: entry.id, containerId, waitedMs: this.#clock.nowMs() - entry.since, info };
  }

  /** Starts the next sandbox for this target, in the background, when the policy has room. */
  fill(target: PoolTarget): void {
    if (!this.enabled || this.#closed) return;
    const p = this.deps.policy;
    const same = [...this.#entries.values()].filter((e) => e.key === target.key).length;
    if (same >= p.perCode) return;
    // Room: the longest-waiting sandboxes of other keys make way for the code that was just run.
    const overBudget = () => this.#entries.size + 1 > p.total || this.#memory() + target.memoryMb > p.maxMemoryMb;
    while (overBudget()) {
      const victim = [...this.#entries.values()].filter((e) => e.key !== target.key && e.containerId !== null).sort((a, b) => a.since - b.since)[0];
      if (!victim) return;
      this.#take(victim, 'dropped');
      this.#remove(victim, 'evicted');
    }
    const id = `pre_${Date.now().toString(36)}${randomBytes(6).toString('hex')}`;
    const name = `runlog-${id}`;
    // The fact first (rule 1): a supervisor that dies after the create finds it named in the log.
    this.deps.record([{ type: 'pool.sandbox-prestarting', data: { sandbox: id, name, key: target.key, uri: target.uri, publisher: target.publisher, codeCid: target.codeCid, runtimeCid: target.runtimeCid, memoryMb: target.memoryMb } }]);
    const entry: Entry = { id, key: target.key, uri: target.uri, memoryMb: target.memoryMb, containerId: null, state: 'waiting', ready: Promise.resolve(null), since: this.#clock.nowMs(), timer: null };
    entry.ready = this.#track(this.#start(entry, name, target));
    this.#entries.set(id, entry);
  }

  async #start(entry: Entry, name: string, target: PoolTarget): Promise<string | null> {
    const t0 = performance.now();
    let containerId: string | null = null;
    try {
      const created = await this.deps.sandbox.createExecutionContainer({
        ...target.spec,
        labels: { ...this.deps.labels, 'runlog.kind': PRESTART_KIND, 'runlog.stream': POOL_STREAM, [PRESTART_LABEL]: entry.id },
        invocationId: null,
        name,
      });
      containerId = created.containerId;
      entry.containerId = containerId;
      await this.deps.engine.start(containerId);
      // A sandbox dropped (or the pool closed) meanwhile is removed by whoever dropped it, once this settles.
      this.#fact({ type: 'pool.sandbox-ready', data: { sandbox: entry.id, containerId, ms: Math.round(performance.now() - t0) } });
      entry.since = this.#clock.nowMs();
      if (entry.state === 'waiting') this.#arm(entry);
      return containerId;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      this.deps.log(`pre-starting a sandbox for ${target.uri} failed: ${message}`);
      if (entry.state === 'waiting') this.#take(entry, 'dropped');
      await this.#removeContainer(entry, containerId ?? name, `failed: ${message}`);
      return null;
    }
  }

  #take(entry: Entry, state: 'claimed' | 'dropped'): void {
    this.#entries.delete(entry.id);
    entry.state = state;
    entry.timer?.();
    entry.timer = null;
  }

  #arm(entry: Entry): void {
    entry.timer = this.#clock.after(
      this.deps.policy.idleMs,
      () => {
        if (entry.state !== 'waiting') return;
        this.#take(entry, 'dropped');
        this.#remove(entry, 'idle');
      },
      { unref: true },
    );
  }

  #supersede(uri: string, key: string): void {
    const last = this.#lastKey.get(uri);
    this.#lastKey.set(uri, key);
    if (last === undefined || last === key) return;
    for (const e of [...this.#entries.values()]) {
      if (e.uri !== uri || e.key === key) continue;
      this.#take(e, 'dropped');
      this.#remove(e, 'superseded: the code record or its runtime changed');
    }
  }

  #memory(): number {
    let sum = 0;
    for (const e of this.#entries.values()) sum += e.memoryMb;
    return sum;
  }

  /** Removes an entry's container once its start has settled (a failed start removed it already) and records why. */
  #remove(entry: Entry, reason: string): void {
    this.#track(
      (async () => {
        const id = await entry.ready;
        if (id) await this.#removeContainer(entry, id, reason);
      })(),
    );
  }

  async #removeContainer(entry: Entry, idOrName: string, reason: string): Promise<void> {
    try {
      await this.deps.engine.removeContainer(idOrName, { force: true });
      this.#fact({ type: 'pool.sandbox-removed', data: { sandbox: entry.id, containerId: entry.containerId, reason } });
    } catch (err) {
      this.deps.log(`could not remove pre-started sandbox ${entry.id}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  /** A fact, unless the log is already closed (close() records before it closes). */
  #fact(event: NewEvent): void {
    try {
      this.deps.record([event]);
    } catch (err) {
      this.deps.log(`pool fact ${event.type} not recorded: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  #track<T>(p: Promise<T>): Promise<T> {
    this.#work.add(p);
    void p.finally(() => this.#work.delete(p)).catch(() => undefined);
    return p;
  }

  /**
   * At start, before reconciliation: every pre-started sandbox of this home (by label, and every one the log
   * says was started and not claimed or removed) is removed and recorded, unless a live execution runs in it
   * (`inUse`: its actor's recovery decides). Returns how many were removed.
   */
  async recover(inUse: ReadonlySet<string>): Promise<number> {
    const open = new Map<string, { name: string; containerId: string | null }>();
    for (const e of this.deps.read()) {
      const d = e.data as { sandbox?: string; name?: string; containerId?: string };
      if (!d.sandbox) continue;
      if (e.type === 'pool.sandbox-prestarting') open.set(d.sandbox, { name: d.name ?? '', containerId: null });
      else if (e.type === 'pool.sandbox-ready' && open.has(d.sandbox)) open.get(d.sandbox)!.containerId = d.containerId ?? null;
      else if (e.type === 'pool.sandbox-claimed' || e.type === 'pool.sandbox-removed') open.delete(d.sandbox);
    }
    const home = this.deps.labels['runlog.home'];
    const labelled = home ? await this.deps.engine.listContainers({ 'runlog.home': home, 'runlog.kind': PRESTART_KIND }, { all: true }) : [];
    let removed = 0;
    const seen = new Set<string>();
    for (const c of labelled) {
      const sandbox = c.labels[PRESTART_LABEL] ?? c.id;
      seen.add(sandbox);
      if (inUse.has(c.id)) continue;
      await this.deps.engine.removeContainer(c.id, { force: true });
      removed += 1;
      this.deps.record([{ type: 'pool.sandbox-removed', data: { sandbox, containerId: c.id, reason: 'supervisor-restart', recorded: open.has(sandbox) } }]);
    }
    // Recorded but not found under the labels: gone already (or never created); closed in the log all the same.
    for (const [sandbox, o] of open) {
      if (seen.has(sandbox) || (o.containerId && inUse.has(o.containerId))) continue;
      const byName = o.name ? await this.deps.engine.inspectContainer(o.name).catch(() => null) : null;
      if (byName && !inUse.has(byName.id)) {
        await this.deps.engine.removeContainer(byName.id, { force: true });
        removed += 1;
      }
      this.deps.record([{ type: 'pool.sandbox-removed', data: { sandbox, containerId: byName?.id ?? o.containerId, reason: 'supervisor-restart', observed: byName ? 'found by name' : 'gone' } }]);
    }
    return removed;
  }

  /** Resolves when no start or removal is under way (what waits stays waiting): idle(), tests, benchmarks. */
  async settled(): Promise<void> {
    while (this.#work.size > 0) await Promise.allSettled([...this.#work]);
  }

  /** Removes every waiting sandbox and waits for the pool's work (starts, removals) to end. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const e of [...this.#entries.values()]) {
      this.#take(e, 'dropped');
      this.#remove(e, 'shutdown');
    }
    while (this.#work.size > 0) await Promise.allSettled([...this.#work]);
  }
}
