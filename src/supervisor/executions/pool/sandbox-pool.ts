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
// What runs before the envelope is bounded in CPU too, and accounted to the pool. A worker boots and blocks on
// stdin; a runtime whose launcher loads work of its own (`--import=<file in the code>`) would burn CPU while it
// waits, charged to no execution. So while a sandbox waits, its CPU so far (its cgroup's counter, the engine's
// cpuUsageNs) is read every PRESTART_CPU_CHECK_MS, on the same unref'd clock timer as its idle removal; over
// `idleCpuMs` it is removed (`idle-cpu`) and its key is not pre-started again by this pool
// (`pool.prestart-stopped`): its runtime evidently runs work before any request. The CPU a sandbox used idle is
// read at its claim (beside the inspect, waited for no longer: the claim is no slower) and before its removal,
// recorded on the fact, and summed in accounts() (metrics).
//
// Every sandbox is a fact in the log before it exists (stream `sandbox-pool`): `pool.sandbox-prestarting` (before
// the create), `pool.sandbox-ready`, then `pool.sandbox-claimed` (by which execution) or `pool.sandbox-removed`
// (why). A supervisor that restarts removes every pre-started sandbox of its home that no live execution holds,
// and records it (recover()); the reconciler leaves the ones this pool holds alone (owns()).
import { randomBytes } from 'node:crypto';
import type { ContainerInfo, ContainerSummary, DockerEngine } from '../../../adapters/docker/docker-port.ts';
import { PRESTART_LABEL, type ExecutionContainerSpec } from '../../../adapters/docker/execution-container-body.ts';
import type { ExecutionSandbox } from '../../../adapters/docker/execution-sandbox.ts';
import type { PrestartPolicy } from '../../../domain/at-run/operator-policy.ts';
import type { Clock } from '../../../domain/clock.ts';
import type { NewEvent, RecordedEvent } from '../../../domain/events.ts';
import { systemClock } from '../../host/system-clock.ts';

export const POOL_STREAM = 'sandbox-pool';
/** runlog.kind of a pre-started sandbox's container. */
export const PRESTART_KIND = 'prestart';
/** How often a waiting sandbox's CPU is read: it may overshoot idleCpuMs by at most this much per CPU it may use. */
export const PRESTART_CPU_CHECK_MS = 2000;
/** Keys stopped for their idle CPU that this pool remembers (the oldest is forgotten beyond it). */
const MAX_STOPPED_KEYS = 1024;
/** Why a sandbox was removed, as a bounded set (the fact's reason may add free text after the kind). */
export const REMOVAL_REASONS = [
  'idle',
  'idle-cpu',
  'evicted',
  'superseded',
  'not-running',
  'gone',
  'failed',
  'shutdown',
  'supervisor-restart',
] as const;

/** The kind of a removal reason (`superseded: …` → superseded), `other` outside REMOVAL_REASONS. */
export function removalKind(reason: string): string {
  const head = reason.startsWith('not running') ? 'not-running' : (/^[a-z-]+/.exec(reason)?.[0] ?? '');
  return (REMOVAL_REASONS as readonly string[]).includes(head) ? head : 'other';
}

/** What the pool's sandboxes cost before their envelope, since this pool was made (monotonic: counters). */
export interface PoolAccounts {
  /** CPU used while waiting by every sandbox claimed or removed (as far as the Engine could say). */
  idleCpuMs: number;
  claimed: number;
  /** Removals by kind (REMOVAL_REASONS). */
  removed: Record<string, number>;
  /** Keys not pre-started any more because a sandbox of theirs went over idleCpuMs. */
  stoppedKeys: number;
}

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
  read(): Promise<RecordedEvent[]>;
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
  /** Cancels the next CPU reading or idle removal (null while a reading is under way). */
  timer: (() => void) | null;
}

export interface Claimed {
  sandboxId: string;
  containerId: string;
  /** How long it had waited, started, for this execution. */
  waitedMs: number;
  /** The inspect that found it running (its invocation checks it again without another round trip). */
  info: ContainerInfo;
  /** CPU it used while it waited (null: the Engine could not say). */
  idleCpuMs: number | null;
}

export class SandboxPool {
  readonly #entries = new Map<string, Entry>();
  /** The key each code URI was last served with: another key means the record or runtime changed. */
  readonly #lastKey = new Map<string, string>();
  readonly #work = new Set<Promise<unknown>>();
  #closed = false;
  readonly #clock: Clock;
  /** Keys whose sandboxes ran work before any request (over idleCpuMs): never pre-started again. */
  readonly #stopped = new Set<string>();
  readonly #accounts = { idleCpuMs: 0, claimed: 0, removed: new Map<string, number>() };

  constructor(private readonly deps: PoolDeps) {
    this.#clock = deps.clock ?? systemClock;
  }

  get enabled(): boolean {
    return this.deps.policy.perCode > 0 && this.deps.policy.total > 0;
  }

  /** Sandboxes waiting or being started, for inspection and tests. */
  list(): { sandboxId: string; key: string; uri: string; containerId: string | null }[] {
    return [...this.#entries.values()].map((e) => ({
      sandboxId: e.id,
      key: e.key,
      uri: e.uri,
      containerId: e.containerId,
    }));
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
    const entry = [...this.#entries.values()]
      .filter((e) => e.key === key)
      .sort((a, b) => (a.containerId ? 0 : 1) - (b.containerId ? 0 : 1) || a.since - b.since)[0];
    if (!entry) return null;
    this.#take(entry, 'claimed');
    const containerId = await entry.ready;
    if (!containerId) return null;
    // It must still be running, its worker waiting: a sandbox that died waiting is removed, never handed out.
    // Its CPU so far is read meanwhile, and waited for no longer than the inspect: the claim is no slower for it.
    const inspected = this.deps.engine.inspectContainer(containerId).catch(() => null);
    const cpu = await Promise.race([this.#cpuMs(containerId), inspected.then(() => undefined)]);
    const info = await inspected;
    if (!info?.state.running) {
      this.#remove(entry, info ? `not running (${info.state.status}, exit ${info.state.exitCode})` : 'gone');
      return null;
    }
    const idleCpuMs = cpu ?? null;
    this.#accounts.claimed += 1;
    this.#accounts.idleCpuMs += idleCpuMs ?? 0;
    // Used all the same (what it burned is spent), but its key is not pre-started again.
    if (idleCpuMs !== null && idleCpuMs > this.deps.policy.idleCpuMs) this.#stop(entry, idleCpuMs);
    this.deps.record([
      { type: 'pool.sandbox-claimed', data: { sandbox: entry.id, containerId, executionId, idleCpuMs } },
    ]);
    return { sandboxId: entry.id, containerId, waitedMs: this.#clock.nowMs() - entry.since, info, idleCpuMs };
  }

  /** What the pool's sandboxes cost before their envelope (metrics.ts). */
  accounts(): PoolAccounts {
    const a = this.#accounts;
    return {
      idleCpuMs: a.idleCpuMs,
      claimed: a.claimed,
      removed: Object.fromEntries(a.removed),
      stoppedKeys: this.#stopped.size,
    };
  }

  /** Starts the next sandbox for this target, in the background, when the policy has room. */
  fill(target: PoolTarget): void {
    if (!this.enabled || this.#closed || this.#stopped.has(target.key)) return;
    const p = this.deps.policy;
    const same = [...this.#entries.values()].filter((e) => e.key === target.key).length;
    if (same >= p.perCode) return;
    // Room: the longest-waiting sandboxes of other keys make way for the code that was just run.
    const overBudget = () => this.#entries.size + 1 > p.total || this.#memory() + target.memoryMb > p.maxMemoryMb;
    while (overBudget()) {
      const victim = [...this.#entries.values()]
        .filter((e) => e.key !== target.key && e.containerId !== null)
        .sort((a, b) => a.since - b.since)[0];
      if (!victim) return;
      this.#take(victim, 'dropped');
      this.#remove(victim, 'evicted');
    }
    const id = `pre_${Date.now().toString(36)}${randomBytes(6).toString('hex')}`;
    const name = `runlog-${id}`;
    // The fact first (rule 1): a supervisor that dies after the create finds it named in the log.
    this.deps.record([
      {
        type: 'pool.sandbox-prestarting',
        data: {
          sandbox: id,
          name,
          key: target.key,
          uri: target.uri,
          publisher: target.publisher,
          codeCid: target.codeCid,
          runtimeCid: target.runtimeCid,
          memoryMb: target.memoryMb,
        },
      },
    ]);
    const entry: Entry = {
      id,
      key: target.key,
      uri: target.uri,
      memoryMb: target.memoryMb,
      containerId: null,
      state: 'waiting',
      ready: Promise.resolve(null),
      since: this.#clock.nowMs(),
      timer: null,
    };
    entry.ready = this.#track(this.#start(entry, name, target));
    this.#entries.set(id, entry);
  }

  async #start(entry: Entry, name: string, target: PoolTarget): Promise<string | null> {
    const t0 = performance.now();
    let containerId: string | null = null;
    try {
      const created = await this.deps.sandbox.createExecutionContainer({
        ...target.spec,
        labels: {
          ...this.deps.labels,
          'runlog.kind': PRESTART_KIND,
          'runlog.stream': POOL_STREAM,
          [PRESTART_LABEL]: entry.id,
        },
        invocationId: null,
        name,
      });
      containerId = created.containerId;
      entry.containerId = containerId;
      await this.deps.engine.start(containerId);
      // A sandbox dropped (or the pool closed) meanwhile is removed by whoever dropped it, once this settles.
      this.#fact({
        type: 'pool.sandbox-ready',
        data: { sandbox: entry.id, containerId, ms: Math.round(performance.now() - t0) },
      });
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

  /** The next look at a waiting sandbox: its CPU reading, or its idle removal when that comes first. */
  #arm(entry: Entry): void {
    const left = Math.max(0, entry.since + this.deps.policy.idleMs - this.#clock.nowMs());
    entry.timer = this.#clock.after(Math.min(PRESTART_CPU_CHECK_MS, left), () => this.#tick(entry), { unref: true });
  }

  #tick(entry: Entry): void {
    entry.timer = null;
    if (entry.state !== 'waiting') return;
    if (this.#clock.nowMs() >= entry.since + this.deps.policy.idleMs) {
      this.#take(entry, 'dropped');
      this.#remove(entry, 'idle');
      return;
    }
    this.#track(this.#checkCpu(entry));
  }

  /** Removes a waiting sandbox over the CPU bound (and stops its key) or whose container is gone; else re-arms. */
  async #checkCpu(entry: Entry): Promise<void> {
    const used = await this.#cpuMs(entry.containerId!);
    if (entry.state !== 'waiting') return;
    const bound = this.deps.policy.idleCpuMs;
    if (used === null) {
      this.#take(entry, 'dropped');
      this.#remove(entry, 'gone');
    } else if (used !== undefined && used > bound) {
      this.#take(entry, 'dropped');
      this.#stop(entry, used);
      this.#remove(entry, 'idle-cpu', { idleCpuMs: used, idleCpuBoundMs: bound });
    } else this.#arm(entry); // a reading that failed (daemon busy) is tried again at the next one
  }

  /** This entry's key is not pre-started again: said once in the log and the supervisor's output. */
  #stop(entry: Entry, usedMs: number): void {
    if (this.#stopped.has(entry.key)) return;
    if (this.#stopped.size >= MAX_STOPPED_KEYS) this.#stopped.delete(this.#stopped.values().next().value!);
    this.#stopped.add(entry.key);
    const bound = this.deps.policy.idleCpuMs;
    this.deps.log(
      `a pre-started sandbox of ${entry.uri} used ${usedMs} ms of CPU before any request (idle-cpu bound ${bound} ms): ` +
        'its runtime runs work while it waits, so this code is not pre-started again by this supervisor',
    );
    this.#fact({
      type: 'pool.prestart-stopped',
      data: { key: entry.key, uri: entry.uri, reason: 'idle-cpu', idleCpuMs: usedMs, idleCpuBoundMs: bound },
    });
  }

  /** CPU (ms) a container has used so far: null when it is gone, undefined when the Engine could not say. */
  async #cpuMs(id: string): Promise<number | null | undefined> {
    try {
      const ns = await this.deps.engine.cpuUsageNs(id);
      return ns === null ? null : Math.round(ns / 1e6);
    } catch {
      return undefined;
    }
  }

  #account(reason: string, idleCpuMs: number | null): void {
    const kind = removalKind(reason);
    this.#accounts.removed.set(kind, (this.#accounts.removed.get(kind) ?? 0) + 1);
    this.#accounts.idleCpuMs += idleCpuMs ?? 0;
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

  /**
   * Removes an entry's container once its start has settled (a failed start removed it already) and records why.
   * `detail` goes on the fact; its idleCpuMs stands when the CPU cannot be read again before the removal.
   */
  #remove(entry: Entry, reason: string, detail?: { idleCpuMs: number; idleCpuBoundMs: number }): void {
    this.#track(
      (async () => {
        const id = await entry.ready;
        if (id) await this.#removeContainer(entry, id, reason, detail);
      })(),
    );
  }

  async #removeContainer(
    entry: Entry,
    idOrName: string,
    reason: string,
    detail?: { idleCpuMs: number; idleCpuBoundMs: number },
  ): Promise<void> {
    // What it used up to its removal: read last, so the account holds all of it.
    const idleCpuMs = (await this.#cpuMs(idOrName)) ?? detail?.idleCpuMs ?? null;
    try {
      await this.deps.engine.removeContainer(idOrName, { force: true });
      this.#account(reason, idleCpuMs);
      this.#fact({
        type: 'pool.sandbox-removed',
        data: { sandbox: entry.id, containerId: entry.containerId, reason, ...detail, idleCpuMs },
      });
    } catch (err) {
      this.deps.log(
        `could not remove pre-started sandbox ${entry.id}: ${err instanceof Error ? err.message : String(err)}`,
      );
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
   * (`inUse`: its actor's recovery decides). `listed`: this home's containers as the start-up reconcile listed
   * them, when it has (no second listing). Returns how many were removed.
   */
  async recover(inUse: ReadonlySet<string>, listed?: readonly ContainerSummary[]): Promise<number> {
    const home = this.deps.labels['runlog.home'];
    const prestarted = (): Promise<ContainerSummary[]> | ContainerSummary[] =>
      listed
        ? listed.filter((c) => c.labels['runlog.kind'] === PRESTART_KIND && c.labels['runlog.home'] === home)
        : home
          ? this.deps.engine.listContainers({ 'runlog.home': home, 'runlog.kind': PRESTART_KIND }, { all: true })
          : [];
    // The pool's history and Docker's list are independent: both asked at once.
    const [history, labelled] = await Promise.all([this.deps.read(), prestarted()]);
    const open = new Map<string, { name: string; containerId: string | null }>();
    for (const e of history) {
      const d = e.data as { sandbox?: string; name?: string; containerId?: string };
      if (!d.sandbox) continue;
      if (e.type === 'pool.sandbox-prestarting') open.set(d.sandbox, { name: d.name ?? '', containerId: null });
      else if (e.type === 'pool.sandbox-ready' && open.has(d.sandbox))
        open.get(d.sandbox)!.containerId = d.containerId ?? null;
      else if (e.type === 'pool.sandbox-claimed' || e.type === 'pool.sandbox-removed') open.delete(d.sandbox);
    }
    let removed = 0;
    const seen = new Set<string>();
    for (const c of labelled) {
      const sandbox = c.labels[PRESTART_LABEL] ?? c.id;
      seen.add(sandbox);
      if (inUse.has(c.id)) continue;
      const idleCpuMs = (await this.#cpuMs(c.id)) ?? null;
      await this.deps.engine.removeContainer(c.id, { force: true });
      removed += 1;
      this.#account('supervisor-restart', idleCpuMs);
      this.deps.record([
        {
          type: 'pool.sandbox-removed',
          data: { sandbox, containerId: c.id, reason: 'supervisor-restart', recorded: open.has(sandbox), idleCpuMs },
        },
      ]);
    }
    // Recorded but not found under the labels: gone already (or never created); closed in the log all the same.
    for (const [sandbox, o] of open) {
      if (seen.has(sandbox) || (o.containerId && inUse.has(o.containerId))) continue;
      const byName = o.name ? await this.deps.engine.inspectContainer(o.name).catch(() => null) : null;
      let idleCpuMs: number | null = null;
      if (byName && !inUse.has(byName.id)) {
        idleCpuMs = (await this.#cpuMs(byName.id)) ?? null;
        await this.deps.engine.removeContainer(byName.id, { force: true });
        removed += 1;
        this.#account('supervisor-restart', idleCpuMs);
      }
      this.deps.record([
        {
          type: 'pool.sandbox-removed',
          data: {
            sandbox,
            containerId: byName?.id ?? o.containerId,
            reason: 'supervisor-restart',
            observed: byName ? 'found by name' : 'gone',
            idleCpuMs,
          },
        },
      ]);
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
