// What a renewal's failure says about the PostgreSQL server (for the node's self-fence, supervisor/cluster/self-fence.ts, and
// the renewal's quick retries, postgres/leases.ts), and how long a starting node's leases have left.
//
// Only a refused connection (ECONNREFUSED) proves the server down in a way that makes the time safe for the node's
// leases. A refusal is a TCP reset answering the connection attempt, and it comes from the host the address names
// when nothing listens there: a network cut drops packets (a timeout, no answer at all) and never refuses, and a
// node partitioned from the server by a cut cannot be refused by it, whatever other address it can still reach.
// (A firewall set to reject with a reset would fake one: a partition made by a firewall must drop.) Nothing
// listening means no postmaster, so no session anywhere can take a lease over, and the next postmaster starts after
// the refusal and extends every lease to its start plus the TTL (postgres/leases.ts liveUntil): a lease of a node
// refused at t cannot be taken before t + TTL.
//
// The server's other words of unavailability move no lease's expiry, so they prove nothing for it (they are only
// a reason to try the renewal again soon):
// - 57P01 (admin shutdown) also ends one session the server keeps serving (pg_terminate_backend);
// - 57P02 (crash shutdown) and a session closed unexpectedly also come from one backend's crash, after which the
//   postmaster recovers in place: its start time stays, so no lease is extended;
// - 57P03 (cannot connect now) while shutting down comes while a smart shutdown still serves other sessions, and
//   while starting up or recovering comes after the postmaster's start, which a long recovery leaves further back
//   than the fence's margin.
// Timeouts, resets and unreachable hosts or networks say nothing of the server: they fence.

const UNAVAILABLE_SQLSTATES: ReadonlySet<string> = new Set(['57P01', '57P02', '57P03']);

/** Every error `err` is or wraps (`cause`, an AggregateError's `errors`), itself first. */
function* chain(err: unknown, depth = 0): Generator<object> {
  if (typeof err !== 'object' || err === null || depth > 5) return;
  yield err;
  if (err instanceof AggregateError) for (const e of err.errors) yield* chain(e, depth + 1);
  if ('cause' in err) yield* chain((err as { cause: unknown }).cause, depth + 1);
}

const codeOf = (err: object): string => ('code' in err ? String((err as { code: unknown }).code) : '');

/** True when `err` proves the server down: a refused connection (see above). */
export function provesServerDown(err: unknown): boolean {
  for (const e of chain(err)) if (codeOf(e) === 'ECONNREFUSED') return true;
  return false;
}

/**
 * True when the server said it is not serving (refused, shut down, crashed, starting, or it closed the session;
 * not a timeout: node-postgres' "Connection terminated due to connection timeout" is one): worth trying again soon.
 */
export function serverUnavailable(err: unknown): boolean {
  for (const e of chain(err)) {
    if (codeOf(e) === 'ECONNREFUSED' || UNAVAILABLE_SQLSTATES.has(codeOf(e))) return true;
    if (e instanceof Error && /Connection terminated unexpectedly/.test(e.message)) return true;
  }
  return false;
}

/**
 * How long the node's lease that expires first has left, on the server's clock (null: it holds none). A node
 * starting up asks once: its leases were reclaimed somewhere inside the store's open, and this says how recently.
 */
export async function leastLeaseLeftMs(
  sql: (text: string, params: unknown[]) => Promise<{ left_ms: number | null }[]>,
  node: string,
): Promise<number | null> {
  const [row] = await sql(
    'SELECT (extract(epoch FROM min(expires_at) - clock_timestamp()) * 1000)::float8 AS left_ms FROM leases WHERE node = $1',
    [node],
  );
  return row?.left_ms ?? null;
}
