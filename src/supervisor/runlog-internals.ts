// What a Runlog is made of beneath its public calls: the store, the writer lock, the actor host, the bus, the metrics
// and the archiving capability. The public Runlog type (runlog-api.ts) is a facade of calls only, so a program never
// reaches the host or the store through it; runlog's own server, CLI, benches and tests reach them here. This module
// is not exported from src/index.ts.
import { RunlogError } from '../domain/errors.ts';
import type { Archiving } from '../store/capabilities.ts';
import type { EventStorePort } from '../store/port.ts';
import type { WriterLock } from '../store/sqlite/writer-lock.ts';
import type { ActorHost } from './host/actor-host.ts';
import type { Bus } from './host/bus.ts';
import type { RunlogMetrics } from './observability/metrics.ts';
import type { Runlog } from './runlog-api.ts';

/** The services under a Runlog facade that runlog's own code (server, CLI, benches, tests) works with. */
export interface RunlogInternals {
  /** The event log, through the store port (every read and append is asynchronous). */
  readonly store: EventStorePort;
  /** The log's writer lock (null when read-only or on PostgreSQL). */
  readonly writer: WriterLock | null;
  readonly host: ActorHost;
  readonly bus: Bus;
  /** Prometheus metrics of this supervisor (null when not supervising or turned off). */
  readonly metrics: RunlogMetrics | null;
  /** Archives ended actors' histories and removes them from the log (retention, `serve --retain`). */
  readonly archiving: Archiving;
}

// Keyed by the facade object: the internals live as long as the Runlog does, and nothing on the Runlog points at them.
const internals = new WeakMap<Runlog, RunlogInternals>();

/** Records what `runlog` is made of; called where a facade is built (runlog-facade.ts), and by tests' stand-ins. */
export function attachRunlogInternals<R extends Runlog>(runlog: R, parts: RunlogInternals): R {
  internals.set(runlog, parts);
  return runlog;
}

/** The services under a Runlog that createRunlog built. A Runlog made some other way: INTERNAL. */
export function runlogInternals(runlog: Runlog): RunlogInternals {
  const parts = internals.get(runlog);
  if (!parts) throw new RunlogError('INTERNAL', 'this Runlog was not made by createRunlog: it has no internals');
  return parts;
}
