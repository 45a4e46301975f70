// Fault injection for recovery tests: the supervisor kills itself (SIGKILL, no cleanup, no flush) when it
// reaches a named point. Set RUNLOG_FAULT="<point>" or "<point>:<n>" (the n-th time it is reached),
// optionally scoped to one event type or effect with RUNLOG_FAULT_EVENT. RUNLOG_FAULT_ACTION=stop makes it stop
// itself instead (SIGSTOP: frozen as a whole, with its connections open, until someone sends SIGCONT); the
// default, `kill`, is SIGKILL.
//
//   before-append        an event was decided (transition computed) but is not on disk yet
//   after-append         the event is on disk; none of its effects has started
//   before-result        an effect did its work (container created, started, record fetched, …) and is about to
//                        report it: its result event is not on disk yet
//   after-effect         an effect handler returned (its result events, if any, are on disk)
//   mid-materialization  a volume and its carrier container exist; the archive upload is about to start
//   mid-invocation       the sandbox runs the handler: the envelope was delivered and a frame came back
//   mid-reconcile        recovery itself: the reconciler recorded one of its findings (and acted on it)
//   append-locked        PostgreSQL store: the last moment the client is between two statements of a fenced or
//                        projected append's transaction (postgres/append.ts): claims, fence check and its actors'
//                        locks done, documents folded; the one query that takes the global append lock, writes
//                        and commits is next. The lock itself is never held by a client between statements, so a
//                        process stopped here holds only its own actors' rows and locks. Reached once per event of
//                        the batch, with its type (RUNLOG_FAULT_EVENT picks one).

export const FAULT_POINTS = [
  'before-append',
  'after-append',
  'before-result',
  'after-effect',
  'mid-materialization',
  'mid-invocation',
  'mid-reconcile',
  'append-locked',
] as const;
export type FaultPoint = (typeof FAULT_POINTS)[number];

export interface FaultDetail {
  eventType?: string;
  effect?: string;
}

export type FaultHook = (point: FaultPoint, detail: FaultDetail) => void;

export const noFaults: FaultHook = () => {};

export interface FaultSpec {
  point: FaultPoint;
  /** Fire the n-th time the point is reached (default 1). */
  nth?: number;
  /** Only count hits whose event type or effect is this. */
  event?: string;
}

/** SIGKILL of this very process: nothing after it runs (no finally, no exit handlers, no flush). */
export const sigkillSelf = (point: FaultPoint, detail: FaultDetail): void => {
  process.stderr.write(`[runlog] fault injection: SIGKILL at ${point} (${detail.eventType ?? detail.effect ?? ''})\n`);
  process.kill(process.pid, 'SIGKILL');
};

/** SIGSTOP of this very process: it freezes where it is (sockets open, locks held) until SIGCONT, then goes on. */
export const sigstopSelf = (point: FaultPoint, detail: FaultDetail): void => {
  process.stderr.write(`[runlog] fault injection: SIGSTOP at ${point} (${detail.eventType ?? detail.effect ?? ''})\n`);
  process.kill(process.pid, 'SIGSTOP');
};

export const FAULT_ACTIONS = { kill: sigkillSelf, stop: sigstopSelf } as const;

/** A hook that calls `fire` (by default: SIGKILL of this process) once, at the n-th matching hit of the point. */
export function faultHook(
  spec: FaultSpec,
  fire: (point: FaultPoint, detail: FaultDetail) => void = sigkillSelf,
): FaultHook {
  if (!FAULT_POINTS.includes(spec.point))
    throw new Error(`unknown fault point '${spec.point}' (known: ${FAULT_POINTS.join(', ')})`);
  const nth = spec.nth ?? 1;
  if (!Number.isSafeInteger(nth) || nth < 1)
    throw new Error(`fault '${spec.point}': n must be a positive integer, got ${spec.nth}`);
  let remaining = nth;
  return (p, detail) => {
    if (p !== spec.point || remaining <= 0) return;
    if (spec.event && detail.eventType !== spec.event && detail.effect !== spec.event) return;
    remaining -= 1;
    if (remaining === 0) fire(p, detail);
  };
}

export function parseFaultSpec(text: string, event?: string): FaultSpec {
  const [point, nth] = text.split(':');
  if (!FAULT_POINTS.includes(point as FaultPoint))
    throw new Error(`RUNLOG_FAULT: unknown point '${point}' (known: ${FAULT_POINTS.join(', ')})`);
  const n = nth === undefined || nth === '' ? 1 : Number(nth);
  if (!Number.isSafeInteger(n) || n < 1)
    throw new Error(`RUNLOG_FAULT: '${text}': the count after ':' must be a positive integer`);
  return { point: point as FaultPoint, nth: n, ...(event ? { event } : {}) };
}

export function faultsFromEnv(env: NodeJS.ProcessEnv = process.env): FaultHook {
  const spec = env.RUNLOG_FAULT;
  if (!spec) return noFaults;
  const action = env.RUNLOG_FAULT_ACTION || 'kill';
  if (action !== 'kill' && action !== 'stop')
    throw new Error(`RUNLOG_FAULT_ACTION: '${action}' is neither 'kill' nor 'stop'`);
  return faultHook(parseFaultSpec(spec, env.RUNLOG_FAULT_EVENT || undefined), FAULT_ACTIONS[action]);
}
