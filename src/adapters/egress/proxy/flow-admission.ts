// The steps every proxied connection takes before a byte goes out, the same for CONNECT and plain HTTP: take a slot
// under the grant's limits, check the destination against the grant, resolve it with the proxy's own resolver,
// and check every address. A refusal at any step is reported once, with its code.
//
// The name is checked before it is resolved: a lookup of a name the grant does not cover would itself carry data
// out (through the resolver, to whoever serves that name).
import { checkTarget, decideConnection } from '../../../domain/at-run/egress-decision.ts';
import type { EgressRefusalCode } from '../../../domain/at-run/egress-codes.ts';
import type { Flow, Gate, GrantState } from './grant-state.ts';
import type { Resolve } from './resolver.ts';

export interface FlowContext {
  state: GrantState;
  resolve: Resolve;
  /** How long a connection to the checked address may take to open. */
  connectTimeoutMs: number;
}

export type Admission = { flow: Flow; address: string; family: 4 | 6 } | { refused: Gate };

/**
 * Admits a connection to `host`:`port` for `kind`, or refuses it (already reported). `destroy` ends whatever the
 * flow holds (the client's socket, the upstream one): the grant calls it when a limit cuts the flow.
 */
export async function admitFlow(
  ctx: FlowContext,
  kind: Flow['kind'],
  target: { host: string; port: number },
  destroy: () => void,
): Promise<Admission> {
  const { state } = ctx;
  const begun = state.begin(kind, target.host, target.port, destroy);
  if (!('phase' in begun)) {
    state.refuseAttempt(kind, target.host, target.port, begun.code, begun.reason);
    return { refused: begun };
  }
  const flow = begun;
  const refuse = (code: EgressRefusalCode, reason: string): Admission => {
    state.refuse(flow, code, reason);
    return { refused: { code, reason } };
  };
  const checked = checkTarget(state.grant, target);
  if (!checked.allow) return refuse(checked.code, checked.reason);
  const answer = await ctx.resolve(checked.host);
  // A limit may have ended the flow while the resolver answered (time up, bytes spent by another flow).
  if (flow.phase === 'done')
    return { refused: { code: state.usage.stopped ?? 'EGRESS_NO_GRANT', reason: 'the grant stopped' } };
  if (answer.addresses.length === 0)
    return refuse('EGRESS_RESOLVE_FAILED', `${checked.host} did not resolve (${answer.error ?? 'no address'})`);
  const decision = decideConnection(state.grant, target, answer.addresses);
  if (!decision.allow) return refuse(decision.code, decision.reason);
  state.allow(flow, decision.address);
  return { flow, address: decision.address, family: decision.family };
}

/** The HTTP status a refusal is answered with. */
export function refusalStatus(code: EgressRefusalCode): number {
  switch (code) {
    case 'EGRESS_REQUEST_INVALID':
      return 400;
    case 'EGRESS_CONNECTIONS_EXCEEDED':
      return 429;
    case 'EGRESS_RESOLVE_FAILED':
    case 'EGRESS_UPSTREAM_FAILED':
      return 502;
    default:
      return 403;
  }
}

/** The body of a refusal, the same for CONNECT and plain HTTP. */
export const refusalBody = (refused: Gate): string =>
  JSON.stringify({ error: { code: refused.code, message: refused.reason } });
