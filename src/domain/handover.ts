// Operations on an instance another cluster node owns (stop, kill, its logs), handed over through the log like
// placement: the node that takes the API call appends `handover.requested` to the owner's stream
// `placement-<owner>`; whoever holds the instance's lease acts and appends `handover.answered` to the same stream;
// the caller follows that stream and gives the answer the owner gave. Pure: what a request and an answer look
// like, where a request goes, and which requests are still pending (test/unit/cluster/handover.test.ts). The actors side
// is src/supervisor/cluster/handover.ts.
import { ERROR_CODES, type ErrorCode } from './error-codes.ts';
import { RunlogError } from './errors.ts';
import type { LogLine } from './log-line.ts';

export const HANDOVER_REQUESTED = 'handover.requested';
export const HANDOVER_ANSWERED = 'handover.answered';

export const HANDOVER_ACTIONS = ['stop', 'kill', 'logs'] as const;
export type HandoverAction = (typeof HANDOVER_ACTIONS)[number];

export interface HandoverRequest {
  requestId: string;
  action: HandoverAction;
  instanceId: string;
  /** stop's grace period (null: the owner's default). */
  graceMs: number | null;
  /** The node that took the call. */
  from: string;
  /** The node that owned the instance when the call was taken. */
  to: string;
  /** After this time nobody acts on it (its caller has answered HANDOVER_TIMEOUT). */
  deadline: string;
}

export interface HandoverAnswer {
  requestId: string;
  /** The node that acted (the owner, or the survivor that took the instance over). */
  by: string;
  ok: boolean;
  /** The instance's state once the action settled (ok answers of stop and kill). */
  state?: string;
  /** logs: the owner's buffered lines, the newest that fit in MAX_LOG_BYTES. */
  lines?: LogLine[];
  /** logs: older lines were left out to stay under MAX_LOG_BYTES. */
  truncated?: boolean;
  /** A refusal: the owner's typed error. */
  code?: string;
  message?: string;
}

/** The most log output one answer carries (it is an event in the log, kept like every other). */
export const MAX_LOG_BYTES = 256 * 1024;

const isString = (v: unknown): v is string => typeof v === 'string' && v.length > 0;

/** A request read back from the log, or null when the event does not hold one (events are read defensively). */
export function parseRequest(data: unknown): HandoverRequest | null {
  if (!data || typeof data !== 'object') return null;
  const d = data as Record<string, unknown>;
  if (
    !isString(d.requestId) ||
    !isString(d.instanceId) ||
    !isString(d.from) ||
    !isString(d.to) ||
    !isString(d.deadline)
  )
    return null;
  if (!HANDOVER_ACTIONS.includes(d.action as HandoverAction)) return null;
  if (!(d.graceMs === null || d.graceMs === undefined || (Number.isInteger(d.graceMs) && (d.graceMs as number) >= 0)))
    return null;
  if (Number.isNaN(Date.parse(d.deadline))) return null;
  return {
    requestId: d.requestId,
    action: d.action as HandoverAction,
    instanceId: d.instanceId,
    graceMs: (d.graceMs as number | null | undefined) ?? null,
    from: d.from,
    to: d.to,
    deadline: d.deadline,
  };
}

/** The requests among these events (one node's stream) that nobody answered and whose deadline has not passed. */
export function pendingRequests(events: readonly { type: string; data: unknown }[], nowMs: number): HandoverRequest[] {
  const answered = new Set(
    events.filter((e) => e.type === HANDOVER_ANSWERED).map((e) => (e.data as { requestId?: unknown }).requestId),
  );
  const out: HandoverRequest[] = [];
  for (const e of events) {
    if (e.type !== HANDOVER_REQUESTED) continue;
    const r = parseRequest(e.data);
    if (r && !answered.has(r.requestId) && Date.parse(r.deadline) > nowMs) out.push(r);
  }
  return out;
}

/** The instance's lease as PostgreSQL has it now (expiry judged on the server's clock). */
export interface LeaseNow {
  node: string;
  expiresInMs: number;
}

export type Route = { here: true } | { here: false; owner: string };

/**
 * Where a request about a live instance goes: here when this node holds its lease, to its owner when that node is
 * live. NODE_UNAVAILABLE when nobody owns it (being taken over) or its owner is not live (its lease expires and a
 * survivor takes it over; the caller retries then).
 */
export function routeRequest(id: string, lease: LeaseNow | null, live: ReadonlySet<string>, self: string): Route {
  if (lease?.node === self) return { here: true };
  if (!lease)
    throw new RunlogError(
      'NODE_UNAVAILABLE',
      `no node owns ${id} right now (its lease is being taken over): retry in a moment`,
      { id, owner: null },
    );
  if (!live.has(lease.node)) {
    const when =
      lease.expiresInMs > 0
        ? `its lease expires in ${Math.ceil(lease.expiresInMs)} ms, then a live node takes it over`
        : 'a live node is taking it over';
    throw new RunlogError(
      'NODE_UNAVAILABLE',
      `${id} is owned by node ${lease.node}, which is not live (stopped, or its heartbeat is stale): ${when}; retry then`,
      { id, owner: lease.node },
    );
  }
  return { here: false, owner: lease.node };
}

/** The error an answer carries, as the owner threw it (its code; an unknown one becomes HANDOVER_FAILED). */
export function answerError(a: HandoverAnswer, instanceId: string): RunlogError {
  const code = (a.code && a.code in ERROR_CODES ? a.code : 'HANDOVER_FAILED') as ErrorCode;
  return new RunlogError(code, a.message ?? `node ${a.by} refused`, { id: instanceId, node: a.by });
}

/** The newest lines that fit in `maxBytes` of JSON (the oldest are left out first). */
export function boundLines(
  lines: readonly LogLine[],
  maxBytes = MAX_LOG_BYTES,
): { lines: LogLine[]; truncated: boolean } {
  let size = 0;
  let i = lines.length;
  while (i > 0) {
    const next = JSON.stringify(lines[i - 1]).length + 1;
    if (size + next > maxBytes) break;
    size += next;
    i -= 1;
  }
  return { lines: lines.slice(i), truncated: i > 0 };
}
