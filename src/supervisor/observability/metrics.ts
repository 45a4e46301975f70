// Prometheus metrics of one supervisor, on a registry of its own (several runlogs in one process never share
// series). Almost everything is derived from what the host already announces on the bus, so the hot paths get
// no code of ours beyond a counter increment; the store reports append latency through its observer (Metered).
// Names and units follow Prometheus conventions (runlog_ prefix, _total counters, _seconds/_bytes units) and
// every label value comes from a bounded set: machine state names, failure reasons, step names, app ids and
// runtime names capped in number (no actor, execution or container ids).
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { httpObservers, type HttpObservation } from '../../adapters/atproto/index.ts';
import type { ActorKind } from '../../domain/events.ts';
import { msBetween } from '../../domain/time.ts';
import type { ExecutionContext } from '../../machines/execution.machine.ts';
import type { InstanceContext } from '../../machines/instance.machine.ts';
import { stateName } from '../../machines/runtime.ts';
import type { Metered } from '../../store/capabilities.ts';
import type { EventStorePort } from '../../store/port.ts';
import type { ActorHost } from '../host/actor-host.ts';
import type { Bus, TransitionNotice } from '../host/bus.ts';
import type { ReconcileReport } from '../recovery/reconcile-run.ts';
import { REMOVAL_REASONS, type PoolAccounts } from '../executions/pool/sandbox-pool.ts';

/** Execution states that are steps of the run, by the step name the duration histogram uses. */
const EXECUTION_STEPS: Record<string, string> = {
  resolving: 'resolve',
  materializing: 'materialize',
  starting: 'start',
  running: 'run',
};

/** Keeps a label's values bounded: the first `max` well-formed values pass, anything else is `other`. */
export class BoundedLabel {
  private readonly seen = new Set<string>();
  constructor(private readonly max: number) {}
  value(v: unknown): string {
    if (typeof v !== 'string' || !/^[A-Za-z0-9._-]{1,64}$/.test(v))
      return v === null || v === undefined ? 'unknown' : 'other';
    if (this.seen.has(v)) return v;
    if (this.seen.size >= this.max) return 'other';
    this.seen.add(v);
    return v;
  }
}

/** The XRPC method of a PDS request (bounded: our code names them), or what kind of request it was. */
export function pdsEndpoint(url: string): string {
  let path: string;
  try {
    path = new URL(url).pathname;
  } catch {
    return 'other';
  }
  const m = /^\/xrpc\/([A-Za-z0-9.-]{1,96})$/.exec(path);
  if (m) return m[1]!;
  if (path.startsWith('/did:')) return 'plc.resolve';
  if (path.startsWith('/.well-known/')) return 'well-known';
  return 'other';
}

function pdsOutcome(status: number | null): string {
  if (status === null) return 'error';
  if (status < 400) return 'ok';
  return status < 500 ? '4xx' : '5xx';
}

/**
 * Process metrics (CPU, memory, event loop, GC) are about the process, not one runlog: collected once per process
 * on a registry of their own (each collection installs event-loop and GC observers that are never removed).
 */
let processRegistry: Registry | undefined;
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

export interface MetricsOptions {
  /** The log (its head is the events gauge). */
  store: Pick<EventStorePort, 'lastSeq'>;
  /** What the store tells of its size and its appends. */
  metered: Metered;
  host: () => ActorHost;
  bus: Bus;
  /** The time of the supervisor's last heartbeat (absent when not supervising). */
  lastHeartbeat?: () => string | null;
  now: () => string;
  /** How app manifests are followed (absent when not supervising). */
  appWatch?: () => 'watching' | 'polling' | 'off';
  /** Process metrics (CPU, memory, event loop, GC) — default true. */
  processMetrics?: boolean;
  /** What the pre-started sandbox pool accounted (sandbox-pool.ts accounts()); absent: no pool, zeros. */
  prestart?: () => PoolAccounts | null;
}

export class RunlogMetrics {
  readonly registry = new Registry();
  private readonly offs: (() => void)[] = [];
  private readonly apps = new BoundedLabel(100);
  private readonly runtimes = new BoundedLabel(20);
  /** When each execution entered its current step / each instance started spawning (bounded by live actors). */
  private readonly entered = new Map<string, { state: string; at: string }>();

  private readonly transitions: Counter<'machine' | 'from' | 'to'>;
  private readonly rejected: Counter<'machine'>;
  private readonly crashes: Counter<'app' | 'reason'>;
  private readonly restarts: Counter<'app'>;
  private readonly spawnSeconds: Histogram<'sandbox' | 'outcome'>;
  private readonly executions: Counter<'runtime' | 'outcome' | 'reason'>;
  private readonly stepSeconds: Histogram<'step'>;
  private readonly reconcileActions: Counter<'kind' | 'action'>;
  private readonly reconcileRuns: Counter<'result'>;
  private readonly appendSeconds: Histogram;
  private readonly appendedEvents: Counter;
  private readonly pdsSeconds: Histogram<'endpoint' | 'outcome'>;
  private readonly process: Registry | null;

  constructor(private readonly opts: MetricsOptions) {
    const registers = [this.registry];
    this.process = (opts.processMetrics ?? true) ? processMetrics() : null;
    const host = opts.host;
    new Gauge({
      name: 'runlog_actors',
      help: 'Live actors (loaded by this supervisor, not terminal) by kind and state.',
      labelNames: ['kind', 'state'],
      registers,
      collect() {
        this.reset();
        const counts = new Map<string, number>();
        for (const a of host().live()) {
          const key = `${a.kind}\u0000${stateName(a.snapshot)}`;
          counts.set(key, (counts.get(key) ?? 0) + 1);
        }
        for (const [key, n] of counts) {
          const [kind, state] = key.split('\u0000') as [string, string];
          this.set({ kind, state }, n);
        }
      },
    });
    const appWatch = opts.appWatch;
    new Gauge({
      name: 'runlog_app_watch_polling',
      help: '1 when the apps workspace is polled because the kernel refused to watch it (inotify instances or watches used up), else 0.',
      registers,
      collect() {
        this.set(appWatch?.() === 'polling' ? 1 : 0);
      },
    });
    this.prestartMetrics(registers, opts.prestart);
    this.transitions = new Counter({
      name: 'runlog_transitions_total',
      help: 'Accepted events that moved an actor, by machine and states.',
      labelNames: ['machine', 'from', 'to'],
      registers,
    });
    this.rejected = new Counter({
      name: 'runlog_events_rejected_total',
      help: 'Events an actor could not take in its state (recorded as <kind>.rejected).',
      labelNames: ['machine'],
      registers,
    });
    this.crashes = new Counter({
      name: 'runlog_instance_crashes_total',
      help: 'App instance crashes by app and reason.',
      labelNames: ['app', 'reason'],
      registers,
    });
    this.restarts = new Counter({
      name: 'runlog_instance_restarts_total',
      help: 'App instance restarts (a backoff timer came due) by app.',
      labelNames: ['app'],
      registers,
    });
    this.spawnSeconds = new Histogram({
      name: 'runlog_instance_spawn_duration_seconds',
      help: 'From spawn requested to running (or failed), by sandbox.',
      labelNames: ['sandbox', 'outcome'],
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.executions = new Counter({
      name: 'runlog_executions_total',
      help: 'Finished executions by runtime, outcome and failure reason.',
      labelNames: ['runtime', 'outcome', 'reason'],
      registers,
    });
    this.stepSeconds = new Histogram({
      name: 'runlog_execution_step_duration_seconds',
      help: 'Time an execution spent in each step (resolve, materialize, start, run).',
      labelNames: ['step'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.reconcileActions = new Counter({
      name: 'runlog_reconcile_actions_total',
      help: 'What reconciliation did, by kind and action (adopted, crashed, lost, removed, …).',
      labelNames: ['kind', 'action'],
      registers,
    });
    this.reconcileRuns = new Counter({
      name: 'runlog_reconcile_runs_total',
      help: 'Reconciliation runs, by whether every part could be asked.',
      labelNames: ['result'],
      registers,
    });
    this.appendSeconds = new Histogram({
      name: 'runlog_store_append_duration_seconds',
      help: 'Durable append (one transaction, fsync included) latency.',
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers,
    });
    this.appendedEvents = new Counter({
      name: 'runlog_store_appended_events_total',
      help: 'Events appended to the log by this process.',
      registers,
    });
    const { store, metered } = opts;
    new Gauge({
      name: 'runlog_store_events',
      help: 'Events in the log (its last sequence number).',
      registers,
      async collect() {
        this.set(await store.lastSeq());
      },
    });
    new Gauge({
      name: 'runlog_store_size_bytes',
      help: 'The event log on disk: database file and WAL.',
      registers,
      async collect() {
        this.set(await metered.sizeBytes());
      },
    });
    this.pdsSeconds = new Histogram({
      name: 'runlog_pds_request_duration_seconds',
      help: 'Requests to PDSes and the PLC directory, by XRPC method and outcome (ok, 4xx, 5xx, error = no answer).',
      labelNames: ['endpoint', 'outcome'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
      registers,
    });
    const { lastHeartbeat, now } = opts;
    if (lastHeartbeat) {
      new Gauge({
        name: 'runlog_supervisor_heartbeat_age_seconds',
        help: "Seconds since this supervisor last recorded its heartbeat in the log's database.",
        registers,
        collect() {
          const at = lastHeartbeat();
          if (at) this.set(Math.max(0, msBetween(at, now()) / 1000));
        },
      });
    }

    this.offs.push(opts.bus.on('actor:transition', (t) => this.onTransition(t)));
    const onHttp = (o: HttpObservation) =>
      this.pdsSeconds.observe({ endpoint: pdsEndpoint(o.url), outcome: pdsOutcome(o.status) }, o.seconds);
    httpObservers.add(onHttp);
    this.offs.push(() => httpObservers.delete(onHttp));
    metered.observeAppends((seconds, events) => {
      this.appendSeconds.observe(seconds);
      this.appendedEvents.inc(events);
    });
    this.offs.push(() => metered.observeAppends(undefined));
  }

  /**
   * The pool's own totals, read at each scrape: the CPU pre-started sandboxes used before any request (charged to
   * no execution), removals by reason (REMOVAL_REASONS, else `other`), and keys stopped for their idle CPU.
   */
  private prestartMetrics(registers: Registry[], accounts: MetricsOptions['prestart']): void {
    const read = () => accounts?.() ?? null;
    new Counter({
      name: 'runlog_prestart_idle_cpu_seconds_total',
      help: 'CPU used by pre-started sandboxes while they waited for a request (claimed or removed ones), charged to no execution.',
      registers,
      collect() {
        this.reset();
        this.inc((read()?.idleCpuMs ?? 0) / 1000);
      },
    });
    const known = new Set<string>(REMOVAL_REASONS);
    new Counter({
      name: 'runlog_prestart_sandboxes_removed_total',
      help: 'Pre-started sandboxes removed unused, by reason (idle, idle-cpu, evicted, superseded, shutdown, …).',
      labelNames: ['reason'],
      registers,
      collect() {
        this.reset();
        for (const [reason, n] of Object.entries(read()?.removed ?? {}))
          if (n > 0) this.inc({ reason: known.has(reason) ? reason : 'other' }, n);
      },
    });
    new Gauge({
      name: 'runlog_prestart_stopped_keys',
      help: 'Codes no longer pre-started because a sandbox of theirs used more than prestart.idleCpuMs of CPU while it waited.',
      registers,
      collect() {
        this.set(read()?.stoppedKeys ?? 0);
      },
    });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The exposition text (what /metrics answers). */
  async text(): Promise<string> {
    const own = await this.registry.metrics();
    return this.process ? `${await this.process.metrics()}\n${own}` : own;
  }

  /** Counts what one reconciliation run did. */
  reconciled(report: ReconcileReport): void {
    if (report.dryRun) return;
    this.reconcileRuns.inc({ result: report.unreachable.length > 0 ? 'partial' : 'complete' });
    for (const a of report.actions) this.reconcileActions.inc({ kind: a.kind, action: a.action });
  }

  close(): void {
    for (const off of this.offs.splice(0)) off();
    this.entered.clear();
  }

  private onTransition(t: TransitionNotice): void {
    if (!t.accepted) {
      this.rejected.inc({ machine: t.kind });
      return;
    }
    if (t.from !== t.to) this.transitions.inc({ machine: t.kind, from: t.from, to: t.to });
    if (t.kind === 'instance') this.onInstance(t);
    else this.onExecution(t);
  }

  private context<C>(kind: ActorKind, id: string): C | undefined {
    return this.opts.host().get(kind, id)?.snapshot.context as C | undefined;
  }

  private onInstance(t: TransitionNotice): void {
    const type = t.event.type;
    if (type === 'instance.crashed') {
      const c = this.context<InstanceContext>('instance', t.id);
      this.crashes.inc({
        app: this.apps.value(c?.spec?.appId),
        reason: String(t.event.data.reason ?? 'unknown').slice(0, 64),
      });
    } else if (type === 'instance.restart-due') {
      const c = this.context<InstanceContext>('instance', t.id);
      this.restarts.inc({ app: this.apps.value(c?.spec?.appId) });
    }
    if (t.to === 'spawning' && t.from !== 'spawning') this.entered.set(t.id, { state: 'spawning', at: t.event.at });
    const since = this.entered.get(t.id);
    if (since && (t.to === 'running' || t.to.startsWith('crashed') || t.to === 'stopped' || t.to === 'lost')) {
      this.entered.delete(t.id);
      const c = this.context<InstanceContext>('instance', t.id);
      this.spawnSeconds.observe(
        { sandbox: c?.spec?.sandbox ?? 'unknown', outcome: t.to === 'running' ? 'running' : 'failed' },
        Math.max(0, msBetween(since.at, t.event.at) / 1000),
      );
    }
  }

  private onExecution(t: TransitionNotice): void {
    if (t.from !== t.to) {
      const since = this.entered.get(t.id);
      const step = since ? EXECUTION_STEPS[since.state] : undefined;
      if (since && step) this.stepSeconds.observe({ step }, Math.max(0, msBetween(since.at, t.event.at) / 1000));
      if (EXECUTION_STEPS[t.to]) this.entered.set(t.id, { state: t.to, at: t.event.at });
      else this.entered.delete(t.id);
    }
    if ((t.to === 'succeeded' || t.to === 'failed') && t.from !== t.to) {
      const c = this.context<ExecutionContext>('execution', t.id);
      this.executions.inc({
        runtime: this.runtimes.value(c?.resolved?.runtimeName),
        outcome: t.to,
        reason: t.to === 'failed' ? (c?.failure?.reason ?? 'unknown') : 'none',
      });
    }
  }
}
