// Fault injection for recovery tests: the supervisor kills itself (SIGKILL, no cleanup) when it
// reaches a named point. Set RUNLOG_FAULT="<point>" or "<point>:<n>" (the n-th time it is reached),
// optionally scoped to one event type with RUNLOG_FAULT_EVENT.

export const FAULT_POINTS = [
  'before-append',
  'after-append',
  'after-effect',
  'mid-materialization',
  'mid-invocation',
] as const;
export type FaultPoint = (typeof FAULT_POINTS)[number];

export type FaultHook = (point: FaultPoint, detail: { eventType?: string; effect?: string }) => void;

export const noFaults: FaultHook = () => {};

export function faultsFromEnv(env: NodeJS.ProcessEnv = process.env): FaultHook {
  const spec = env.RUNLOG_FAULT;
  if (!spec) return noFaults;
  const [point, nth] = spec.split(':');
  if (!FAULT_POINTS.includes(point as FaultPoint)) throw new Error(`RUNLOG_FAULT: unknown point '${point}' (known: ${FAULT_POINTS.join(', ')})`);
  const eventFilter = env.RUNLOG_FAULT_EVENT;
  let remaining = nth ? Number(nth) : 1;
  return (p, detail) => {
    if (p !== point) return;
    if (eventFilter && detail.eventType !== eventFilter && detail.effect !== eventFilter) return;
    remaining -= 1;
    if (remaining > 0) return;
    process.stderr.write(`[runlog] fault injection: SIGKILL at ${p} (${detail.eventType ?? detail.effect ?? ''})\n`);
    process.kill(process.pid, 'SIGKILL');
  };
}
