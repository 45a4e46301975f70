// What a network-granted sandbox is made of (the pure create body), the resolvers the proxy gets by default, and the
// steps an execution's history gets from what the proxy saw (ExecutionEgressSteps with a fake proxy host).
import { describe, expect, it } from 'vitest';
import {
  executionContainerBody,
  GVISOR_NETWORK_RUNTIME,
  type ExecutionContainerSpec,
} from '../../../src/adapters/docker/execution-container-body.ts';
import type { EgressProxyHost } from '../../../src/adapters/egress/egress-proxy-host.ts';
import type { EgressReport } from '../../../src/adapters/egress/control-client.ts';
import { resolversOf } from '../../../src/adapters/egress/host-resolvers.ts';
import type { NetworkGrant } from '../../../src/domain/at-run/egress-grant.ts';
import { ExecutionEgressSteps, MAX_EGRESS_STEPS } from '../../../src/supervisor/executions/execution-egress.ts';
import type { ExecutionEffectContext } from '../../../src/supervisor/executions/execution-progress.ts';

const spec: ExecutionContainerSpec = {
  policy: {
    image: `localhost:5000/at-run-sandbox@sha256:${'a'.repeat(64)}`,
    memoryBytes: 64 * 1024 * 1024,
    pidsLimit: 32,
    nanoCpus: 1e9,
    workTmpfsBytes: 1024 * 1024,
  },
  runtimeVolume: 'runlog-runtime-x',
  codeVolume: 'runlog-code-x',
  launcher: { path: 'bin/node', args: ['{entrypoint}'] },
  entrypoint: 'index.mjs',
  env: { HOME: '/opt/at-run/work' },
  labels: { 'runlog.kind': 'execution' },
  invocationId: 'exec_1',
};
const network = { name: 'runlog-egress-abc-exec_1', proxyAddress: '172.30.0.2', proxyPort: 3128 };

describe('the sandbox of a network-granted execution', () => {
  it('has no network at all without a grant', () => {
    const { body } = executionContainerBody(spec);
    expect(body.NetworkDisabled).toBe(true);
    expect(body.HostConfig?.NetworkMode).toBe('none');
    expect(body.HostConfig?.Dns).toBeUndefined();
    expect(body.Env?.some((e) => e.startsWith('HTTP_PROXY='))).toBe(false);
  });

  it('joins its own network, resolves through the proxy, has IPv6 off and is told where the proxy is', () => {
    const { body } = executionContainerBody({ ...spec, network });
    expect(body.NetworkDisabled).toBe(false);
    expect(body.HostConfig?.NetworkMode).toBe(network.name);
    expect(body.HostConfig?.Dns).toEqual(['172.30.0.2']);
    expect(body.HostConfig?.Sysctls).toMatchObject({ 'net.ipv6.conf.all.disable_ipv6': '1' });
    expect(body.Env).toEqual(
      expect.arrayContaining([
        'HTTP_PROXY=http://172.30.0.2:3128',
        'HTTPS_PROXY=http://172.30.0.2:3128',
        'NODE_USE_ENV_PROXY=1',
      ]),
    );
    // Everything else stays as hardened as without network.
    expect(body.HostConfig).toMatchObject({ CapDrop: ['ALL'], ReadonlyRootfs: true, Privileged: false });
  });

  it("runs under gVisor's networked runtime when gVisor is asked for, and under plain runsc without a network", () => {
    const gvisor = { ...spec, policy: { ...spec.policy, runtime: 'runsc' } };
    expect(executionContainerBody({ ...gvisor, network }).body.HostConfig?.Runtime).toBe(GVISOR_NETWORK_RUNTIME);
    expect(executionContainerBody(gvisor).body.HostConfig?.Runtime).toBe('runsc');
    expect(executionContainerBody({ ...spec, network }).body.HostConfig?.Runtime).toBeUndefined();
  });

  it('refuses a network on a pre-started sandbox, and a proxy address that is not IPv4', () => {
    expect(() =>
      executionContainerBody({ ...spec, invocationId: null, labels: { 'runlog.prestart': 'p1' }, network }),
    ).toThrow(/cannot create the execution container/);
    expect(() => executionContainerBody({ ...spec, network: { ...network, proxyAddress: 'proxy.local' } })).toThrow(
      /cannot create the execution container/,
    );
  });
});

describe("the proxy's default resolvers", () => {
  it("are the host's nameservers a container can reach: loopback ones are left out", () => {
    const conf =
      'search lan\nnameserver 127.0.0.53\nnameserver 10.255.255.53\n# nameserver 1.1.1.1\nnameserver 192.168.1.1\n';
    expect(resolversOf(conf)).toEqual(['10.255.255.53', '192.168.1.1']);
    expect(resolversOf('')).toEqual([]);
  });
});

const grant: NetworkGrant = {
  destinations: [{ host: 'api.test', ports: [443] }],
  allowRanges: [],
  limits: { bytes: 1000, seconds: 10, connections: 2 },
};

function report(seq: number): EgressReport {
  return {
    seq,
    executionKey: 'exec_1',
    kind: 'connect',
    host: 'other.test',
    port: 443,
    decision: 'refused',
    code: 'EGRESS_HOST_NOT_GRANTED',
    bytesUp: 0,
    bytesDown: 0,
    at: '2026-01-01T00:00:00.000Z',
  };
}

function fakeHost(reports: EgressReport[]): { host: EgressProxyHost; closed: string[]; removed: string[] } {
  const closed: string[] = [];
  const removed: string[] = [];
  const host: EgressProxyHost = {
    open: async () => network,
    remove: async (id) => void removed.push(id),
    finish: async (id) => {
      closed.push(id);
      return {
        usage: {
          bytesUp: 10,
          bytesDown: 20,
          connections: 1,
          refused: reports.length,
          dnsQueries: 0,
          stopped: null,
          unreported: 5,
          openedAt: '2026-01-01T00:00:00.000Z',
        },
        reports,
        lost: 2,
      };
    },
    sweep: async () => undefined,
    stop: async () => undefined,
    owns: () => false,
  };
  return { host, closed, removed };
}

describe("an execution's history of what the proxy saw", () => {
  it('records one egress step per report up to the bound, then the usage with what was not recorded', async () => {
    const many = Array.from({ length: MAX_EGRESS_STEPS + 10 }, (_, i) => report(i + 1));
    const { host } = fakeHost(many);
    const steps = new ExecutionEgressSteps(() => host);
    const dispatched: { type: string; data: { name: string; detail: Record<string, unknown> } }[] = [];
    const ctx = { dispatch: async (e: never) => void dispatched.push(e) } as unknown as ExecutionEffectContext;
    await steps.open('exec_1', grant);
    await steps.close('exec_1', ctx);
    const names = dispatched.map((e) => e.data.name);
    expect(names.filter((n) => n === 'egress')).toHaveLength(MAX_EGRESS_STEPS);
    expect(names.at(-1)).toBe('egress.usage');
    expect(dispatched[0]!.data.detail).toMatchObject({ host: 'other.test', code: 'EGRESS_HOST_NOT_GRANTED' });
    expect(dispatched[0]!.data.detail).not.toHaveProperty('executionKey');
    // 10 past the bound, 2 the proxy's ring lost, 5 it never reported.
    expect(dispatched.at(-1)!.data.detail).toMatchObject({ reports: MAX_EGRESS_STEPS + 10, unrecorded: 17 });
    expect(steps.receipt('exec_1', grant)).toEqual({
      granted: [{ host: 'api.test', ports: [443] }],
      connections: 1,
      refused: MAX_EGRESS_STEPS + 10,
      bytesUp: 10,
      bytesDown: 20,
    });
  });

  it('removes a network once, after the answer; a grant never closed is removed first', async () => {
    const { host, closed, removed } = fakeHost([]);
    const steps = new ExecutionEgressSteps(() => host);
    await steps.release('exec_9', null);
    expect([closed, removed]).toEqual([[], []]);
    // Cancelled before it answered: its grant, then its network.
    await steps.open('exec_1', grant);
    await steps.release('exec_1', 'c1');
    await steps.release('exec_1', 'c1');
    expect([closed, removed]).toEqual([['exec_1'], ['exec_1']]);
    // Answered: the grant went with the answer, the network goes at the cleanup.
    const ctx = { dispatch: async () => undefined } as unknown as ExecutionEffectContext;
    await steps.open('exec_2', grant);
    await steps.close('exec_2', ctx);
    expect(removed).toEqual(['exec_1']);
    await steps.release('exec_2', null);
    expect([closed, removed]).toEqual([
      ['exec_1', 'exec_2'],
      ['exec_1', 'exec_2'],
    ]);
  });

  it('removes the network of an execution collected after a restart (opened by the supervisor before)', async () => {
    const { host, removed } = fakeHost([]);
    const steps = new ExecutionEgressSteps(() => host);
    await steps.close('exec_3', { dispatch: async () => undefined } as unknown as ExecutionEffectContext);
    await steps.release('exec_3', null);
    expect(removed).toEqual(['exec_3']);
  });

  it('says NETWORK_NOT_ALLOWED when this runner has no proxy to open a network through', async () => {
    const steps = new ExecutionEgressSteps(() => null);
    await expect(steps.open('exec_1', grant)).rejects.toMatchObject({ code: 'NETWORK_NOT_ALLOWED' });
  });
});
