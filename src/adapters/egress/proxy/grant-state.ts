// One execution's grant inside the proxy: its limits as they are spent, the connections it holds open, and the
// reports its traffic makes.
//
// Every connection is a flow, taken before its name is resolved (so resolutions in flight count against the
// connection limit too) and reported once when decided (allowed or refused) and once when it ends (closed or cut).
// The byte budget is shared by all of an execution's flows, both ways: the chunk that would overspend it is not
// forwarded, and every flow is cut, since none could move another byte. When the time is up every flow is cut the
// same way. A grant reports at most `maxReports` times: a sandbox that floods the proxy with attempts is counted
// (`unreported`) rather than allowed to crowd other executions' reports out of the ring.
import type { EgressRefusalCode } from '../../../domain/at-run/egress-codes.ts';
import type { NetworkGrant } from '../../../domain/at-run/egress-grant.ts';
import type { NewReport, ReportKind, ReportLog } from './reports.ts';

export interface Flow {
  kind: 'connect' | 'http';
  host: string;
  port: number;
  address?: string;
  up: number;
  down: number;
  phase: 'pending' | 'allowed' | 'done';
  /** Ends the flow's sockets at once. */
  destroy: () => void;
}

export interface Usage {
  bytesUp: number;
  bytesDown: number;
  /** Connections allowed. */
  connections: number;
  /** Connections and requests refused. */
  refused: number;
  dnsQueries: number;
  /** The limit that stopped the execution's network, if one did. */
  stopped: EgressRefusalCode | null;
  /** Reports not made because the grant reached its report limit. */
  unreported: number;
  openedAt: string;
  closedAt?: string;
}

export interface Gate {
  code: EgressRefusalCode;
  reason: string;
}

export interface GrantState {
  readonly key: string;
  readonly address: string;
  readonly grant: NetworkGrant;
  readonly usage: Usage;
  /** A new flow, or why none may open now (time over, bytes spent, as many open as allowed). */
  begin(kind: Flow['kind'], host: string, port: number, destroy: () => void): Flow | Gate;
  allow(flow: Flow, address: string): void;
  refuse(flow: Flow, code: EgressRefusalCode, reason: string): void;
  /** A refusal before any flow: an unreadable request, a DNS query. */
  refuseAttempt(kind: ReportKind, host: string, port: number, code: EgressRefusalCode, reason: string): void;
  /** Counts `n` bytes; false when that would overspend the budget (and then every flow is cut). */
  charge(flow: Flow, direction: 'up' | 'down', n: number): boolean;
  /** The flow ended by itself (or failed upstream, with a code). */
  end(flow: Flow, code?: EgressRefusalCode, reason?: string): void;
  /** Cuts every flow, stops the clock and returns the usage: the grant is gone. */
  stop(reason: string): Usage;
}

export function createGrantState(opts: {
  key: string;
  address: string;
  grant: NetworkGrant;
  reports: ReportLog;
  maxReports: number;
  now?: () => Date;
}): GrantState {
  const { key, address, grant, reports } = opts;
  const now = opts.now ?? (() => new Date());
  const usage: Usage = {
    bytesUp: 0,
    bytesDown: 0,
    connections: 0,
    refused: 0,
    dnsQueries: 0,
    stopped: null,
    unreported: 0,
    openedAt: now().toISOString(),
  };
  const flows = new Set<Flow>();
  let made = 0;

  const report = (r: Omit<NewReport, 'executionKey'>): void => {
    if (made >= opts.maxReports) {
      usage.unreported++;
      return;
    }
    made++;
    reports.add({ executionKey: key, ...r });
  };
  const flowReport = (flow: Flow, decision: NewReport['decision'], code?: EgressRefusalCode, reason?: string) =>
    report({
      kind: flow.kind,
      host: flow.host,
      port: flow.port,
      ...(flow.address !== undefined ? { address: flow.address } : {}),
      decision,
      ...(code !== undefined ? { code } : {}),
      ...(reason !== undefined ? { reason } : {}),
      bytesUp: flow.up,
      bytesDown: flow.down,
    });

  /** Ends every open flow with `code`: the allowed ones are cut, the pending ones refused. */
  function cutAll(code: EgressRefusalCode, reason: string): void {
    for (const flow of [...flows]) {
      flows.delete(flow);
      if (flow.phase === 'allowed') flowReport(flow, 'cut', code, reason);
      else {
        usage.refused++;
        flowReport(flow, 'refused', code, reason);
      }
      flow.phase = 'done';
      flow.destroy();
    }
  }

  const stopWith = (code: EgressRefusalCode, reason: string): void => {
    if (usage.stopped === null) usage.stopped = code;
    cutAll(code, reason);
  };

  const timer = setTimeout(
    () => stopWith('EGRESS_TIME_EXCEEDED', `the grant's ${grant.limits.seconds} s are over`),
    grant.limits.seconds * 1000,
  );
  timer.unref();

  return {
    key,
    address,
    grant,
    usage,
    begin(kind, host, port, destroy) {
      if (usage.stopped === 'EGRESS_TIME_EXCEEDED')
        return { code: usage.stopped, reason: `the grant's ${grant.limits.seconds} s are over` };
      if (usage.stopped !== null)
        return { code: usage.stopped, reason: `the grant's ${grant.limits.bytes} bytes are spent` };
      if (flows.size >= grant.limits.connections)
        return {
          code: 'EGRESS_CONNECTIONS_EXCEEDED',
          reason: `${flows.size} connections are open, the grant allows ${grant.limits.connections}`,
        };
      const flow: Flow = { kind, host, port, up: 0, down: 0, phase: 'pending', destroy };
      flows.add(flow);
      return flow;
    },
    allow(flow, at) {
      if (flow.phase !== 'pending') return;
      flow.phase = 'allowed';
      flow.address = at;
      usage.connections++;
      flowReport(flow, 'allowed');
    },
    refuse(flow, code, reason) {
      if (flow.phase === 'done') return;
      flows.delete(flow);
      flow.phase = 'done';
      usage.refused++;
      flowReport(flow, 'refused', code, reason);
    },
    refuseAttempt(kind, host, port, code, reason) {
      if (kind === 'dns') usage.dnsQueries++;
      else usage.refused++;
      report({ kind, host, port, decision: 'refused', code, reason });
    },
    charge(flow, direction, n) {
      if (flow.phase === 'done') return false;
      if (usage.bytesUp + usage.bytesDown + n > grant.limits.bytes) {
        stopWith('EGRESS_BYTES_EXCEEDED', `the grant's ${grant.limits.bytes} bytes are spent`);
        return false;
      }
      if (direction === 'up') {
        flow.up += n;
        usage.bytesUp += n;
      } else {
        flow.down += n;
        usage.bytesDown += n;
      }
      return true;
    },
    end(flow, code, reason) {
      if (flow.phase === 'done') return;
      flows.delete(flow);
      const wasAllowed = flow.phase === 'allowed';
      flow.phase = 'done';
      if (wasAllowed) flowReport(flow, 'closed', code, reason);
      else {
        usage.refused++;
        flowReport(flow, 'refused', code ?? 'EGRESS_UPSTREAM_FAILED', reason);
      }
    },
    stop(reason) {
      clearTimeout(timer);
      for (const flow of [...flows]) {
        flows.delete(flow);
        if (flow.phase === 'allowed') flowReport(flow, 'closed', undefined, reason);
        else flowReport(flow, 'refused', 'EGRESS_NO_GRANT', reason);
        flow.phase = 'done';
        flow.destroy();
      }
      usage.closedAt = now().toISOString();
      return { ...usage };
    },
  };
}
