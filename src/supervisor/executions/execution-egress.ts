// A network-granted execution's network (decision 12): opened before its sandbox is made, closed once it answered,
// and what the egress proxy saw recorded in its history.
//
// Each connection the proxy allowed, refused or cut becomes an `execution.step` named `egress` (inspect, the
// inspector and the replay show steps), then one `egress.usage` step sums it up. The steps are bounded: a handler
// that tries ten thousand connections has its first MAX_EGRESS_STEPS recorded and the rest counted. The receipt
// carries the grant and the summary. Nothing here decides what is allowed: the proxy does, on its own.
import type { ExecutionEgress } from '../../adapters/atproto/receipts.ts';
import type { SandboxNetwork } from '../../adapters/docker/execution-container-body.ts';
import type { EgressClosed, EgressProxyHost } from '../../adapters/egress/egress-proxy-host.ts';
import type { NetworkGrant } from '../../domain/at-run/egress-grant.ts';
import { RunlogError } from '../../domain/errors.ts';
import type { Resolved } from '../../domain/execution-events.ts';
import type { ExecutionEffectContext } from './execution-progress.ts';

/** How many of an execution's connections are recorded one by one (the rest are counted in egress.usage). */
export const MAX_EGRESS_STEPS = 64;

/** The grant the execution was resolved with, or null when it has no network. */
export function grantOf(r: Resolved): NetworkGrant | null {
  const network = (r.limits as { network?: unknown }).network;
  return network && typeof network === 'object' ? (network as NetworkGrant) : null;
}

export class ExecutionEgressSteps {
  /** What each execution's network closed with, until its receipt is written. */
  private readonly closed = new Map<string, EgressClosed>();
  /** Executions whose network is there still (opened here, or found by a collect after a restart). */
  private readonly opened = new Set<string>();

  constructor(private readonly host: () => EgressProxyHost | null) {}

  /** The execution's own network, its only way out the proxy; NETWORK_NOT_ALLOWED when this runner has no proxy. */
  async open(executionId: string, grant: NetworkGrant): Promise<SandboxNetwork> {
    const host = this.host();
    if (!host)
      throw new RunlogError(
        'NETWORK_NOT_ALLOWED',
        'this execution was granted network, but this supervisor can run no egress proxy: ' +
          'the egress-proxy image is missing (run `npm run setup`), or no resolver is known ' +
          '(the host has none a container can reach: set createRunlog({ egress: { resolvers } }))',
      );
    const network = await host.open(executionId, grant);
    this.opened.add(executionId);
    return network;
  }

  /**
   * Removes the execution's network once it is done with it (its cleanup, after its container is removed: nothing
   * is then left to detach). A grant still registered (cancelled, failed to start) is removed first.
   */
  async release(executionId: string, containerId: string | null): Promise<void> {
    if (!this.opened.delete(executionId)) return;
    const host = this.host();
    if (!host) return;
    if (!this.closed.has(executionId)) await host.finish(executionId);
    this.closed.delete(executionId);
    await host.remove(executionId, containerId);
  }

  /**
   * Ends the execution's network (its grant removed, its connections cut) and records what the proxy saw; the
   * network itself goes at its cleanup (release), after the answer. Safe for an execution whose proxy is gone.
   */
  async close(executionId: string, ctx: ExecutionEffectContext): Promise<void> {
    const host = this.host();
    if (!host) return;
    this.opened.add(executionId); // after a restart too: its cleanup removes the network
    const closed = await host.finish(executionId);
    this.closed.set(executionId, closed);
    const recorded = closed.reports.slice(0, MAX_EGRESS_STEPS);
    for (const report of recorded) {
      const { seq: _seq, executionKey: _key, ...detail } = report;
      await ctx.dispatch({ type: 'execution.step', data: { name: 'egress', detail } });
    }
    await ctx.dispatch({
      type: 'execution.step',
      data: {
        name: 'egress.usage',
        detail: {
          ...(closed.usage ?? {}),
          reports: closed.reports.length,
          unrecorded: closed.reports.length - recorded.length + closed.lost + (closed.usage?.unreported ?? 0),
        },
      },
    });
  }

  /** The receipt's egress summary. */
  receipt(executionId: string, grant: NetworkGrant | null): ExecutionEgress | undefined {
    const closed = this.closed.get(executionId);
    if (!grant) return undefined;
    const u = closed?.usage;
    return {
      granted: grant.destinations.map((d) => ({ host: d.host, ports: [...d.ports] })),
      connections: u?.connections ?? 0,
      refused: u?.refused ?? 0,
      bytesUp: u?.bytesUp ?? 0,
      bytesDown: u?.bytesDown ?? 0,
      ...(u?.stopped ? { stopped: u.stopped } : {}),
    };
  }
}
