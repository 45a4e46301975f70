// When a node's leases were last renewed, as a signal for the node (actors/self-fence.ts): a renewal statement
// sent at t that PostgreSQL answered set every lease it names to expire at the server's time of running it plus
// the TTL, so none of them can expire before t + TTL (on this node's clock, give or take the clocks' rates, never
// their offsets). The signal is taken around Leases.renew, which the store's beat calls, so the lease code and its
// SQL stay as they are.
import type { Leases } from './pg-leases.ts';

/**
 * Calls `renewed(sentAtMs)` after each renewal of `leases` that PostgreSQL answered (one that failed or is still
 * waiting calls nothing), with the time it was sent by `nowMs`. Returns an undo.
 */
export function onRenewals(leases: Leases, nowMs: () => number, renewed: (sentAtMs: number) => void): () => void {
  const renew = leases.renew;
  const watched = async function (this: Leases): Promise<string[]> {
    const sentAtMs = nowMs();
    const lost = await renew.call(this);
    renewed(sentAtMs);
    return lost;
  };
  leases.renew = watched;
  return () => {
    if (leases.renew === watched) leases.renew = renew;
  };
}

/**
 * How long the node's lease that expires first has left, on the server's clock (null: it holds none). A node
 * starting up asks once: its leases were reclaimed somewhere inside the store's open, and this says how recently.
 */
export async function leastLeaseLeftMs(sql: (text: string, params: unknown[]) => Promise<{ left_ms: number | null }[]>, node: string): Promise<number | null> {
  const [row] = await sql('SELECT (extract(epoch FROM min(expires_at) - clock_timestamp()) * 1000)::float8 AS left_ms FROM leases WHERE node = $1', [node]);
  return row?.left_ms ?? null;
}
