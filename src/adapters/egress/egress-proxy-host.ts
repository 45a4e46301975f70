// The egress proxy as the supervisor runs it (decision 12): one proxy container per supervisor, and for each
// network-granted execution an internal network of its own that the proxy joins, so the proxy is the only thing
// the sandbox can reach.
//
// The proxy container sits on an outbound network (the operator's, or one made here) and takes its control address
// from eth0 at start, before any execution network is attached, so its control API never listens where a sandbox
// can reach it. Each execution's network is internal (no route out) and gives the host no address on it (else the
// host's own services would answer the sandbox on the gateway). Everything made here is labelled with the
// supervisor's home: `sweep` removes the networks a supervisor that died left behind (the reconciler removes its
// proxy), and `stop` what this one made.
import { randomBytes } from 'node:crypto';
import type { NetworkGrant } from '../../domain/at-run/egress-grant.ts';
import { RunlogError } from '../../domain/errors.ts';
import type { DockerEngine } from '../docker/docker-port.ts';
import type { SandboxNetwork } from '../docker/execution-container-body.ts';
import { egressControl, type EgressControl, type EgressReport, type EgressUsage } from './control-client.ts';

/** Marks what the egress proxy host makes: `proxy` (the container), `execution` and `outbound` (networks). */
export const EGRESS_LABEL = 'runlog.egress';
/** The proxy container's runlog.kind (the reconciler leaves this process's own alone: owns). */
export const EGRESS_PROXY_KIND = 'egress-proxy';
const CONTROL_PORT = 3130;
const PROXY_PORT = 3128;
/** How long the proxy has to answer its health check once started. */
const READY_MS = 15_000;

export interface EgressProxyHostOptions {
  engine: DockerEngine;
  /** The egress-proxy image, `repository@sha256:…`. */
  image: string;
  /** The resolvers the proxy asks (`ip` or `ip:port`); never Docker's embedded one. */
  resolvers: readonly string[];
  /** An existing network for the proxy's way out; by default one is made (and removed) here. */
  outboundNetwork?: string;
  /** Labels every object made here carries (the supervisor's home, its node). */
  labels: Readonly<Record<string, string>>;
  /** Distinguishes this supervisor's objects' names from another's on the same daemon. */
  nameSuffix: string;
  log(message: string): void;
}

/** What an execution's network gave it, and what it used. */
export interface EgressClosed {
  usage: EgressUsage | null;
  reports: EgressReport[];
  /** Reports the proxy had to drop (its ring was full). */
  lost: number;
}

export interface EgressProxyHost {
  /** Makes the execution's network, joins the proxy to it and registers its grant there. */
  open(executionId: string, grant: NetworkGrant): Promise<SandboxNetwork>;
  /** Removes its grant (cutting what is open) and reads its reports: the proxy's part, no Docker call. */
  finish(executionId: string): Promise<EgressClosed>;
  /** Removes its network (the container, if still there, detached first; the proxy always). */
  remove(executionId: string, containerId: string | null): Promise<void>;
  /**
   * Removes the execution networks a supervisor of this home left behind that no sandbox is on. Its proxy container
   * is the reconciler's to remove, as a stray (runlog.kind egress-proxy), before this runs.
   */
  sweep(): Promise<void>;
  stop(): Promise<void>;
  /** Whether the container is this host's running proxy. */
  owns(containerId: string): boolean;
}

interface Running {
  id: string;
  control: EgressControl;
}

export function egressProxyHost(o: EgressProxyHostOptions): EgressProxyHost {
  const engine = o.engine;
  const proxyName = `runlog-egress-${o.nameSuffix}`;
  const outbound = o.outboundNetwork ?? `runlog-egress-out-${o.nameSuffix}`;
  const networkOf = (executionId: string) => `runlog-egress-${o.nameSuffix}-${executionId}`.slice(0, 120);
  let running: Promise<Running> | null = null;
  let runningId: string | null = null;

  async function start(): Promise<Running> {
    if (!(await engine.inspectNetwork(outbound))) {
      if (o.outboundNetwork !== undefined)
        throw new RunlogError('NETWORK_NOT_ALLOWED', `the egress proxy's outbound network ${outbound} does not exist`);
      await engine.createNetwork(outbound, { ...o.labels, [EGRESS_LABEL]: 'outbound' });
    }
    const token = randomBytes(24).toString('base64url');
    await engine.removeContainer(proxyName, { force: true }).catch(() => undefined);
    const id = await engine.createContainer(
      {
        Image: o.image,
        Env: [
          `EGRESS_CONTROL=eth0:${CONTROL_PORT}`,
          `EGRESS_PROXY_PORT=${PROXY_PORT}`,
          `EGRESS_RESOLVER=${o.resolvers.join(',')}`,
          `EGRESS_TOKEN=${token}`,
        ],
        User: '65533:65533',
        Labels: { ...o.labels, [EGRESS_LABEL]: 'proxy', 'runlog.kind': EGRESS_PROXY_KIND },
        Healthcheck: { Test: ['NONE'] },
        HostConfig: {
          NetworkMode: outbound,
          ReadonlyRootfs: true,
          Tmpfs: { '/tmp': 'rw,nosuid,nodev,noexec,size=16m' },
          CapDrop: ['ALL'],
          SecurityOpt: ['no-new-privileges:true'],
          // A proxy, not a router: nothing is forwarded between the networks it joins.
          Sysctls: { 'net.ipv4.ip_forward': '0' },
          Memory: 256 * 1024 * 1024,
          MemorySwap: 256 * 1024 * 1024,
          PidsLimit: 64,
          RestartPolicy: { Name: 'no' },
          LogConfig: { Type: 'json-file', Config: { 'max-size': '8m', 'max-file': '1' } },
        },
      },
      proxyName,
    );
    runningId = id;
    await engine.start(id);
    const info = await engine.inspectContainer(id);
    const address = info?.networks[outbound]?.ipAddress;
    if (!address) throw new RunlogError('NETWORK_TIMEOUT', `the egress proxy has no address on ${outbound}`);
    const control = egressControl({ baseUrl: `http://${address}:${CONTROL_PORT}`, token });
    const deadline = Date.now() + READY_MS;
    while (!(await control.health())) {
      if (Date.now() > deadline)
        throw new RunlogError('NETWORK_TIMEOUT', `the egress proxy did not answer within ${READY_MS} ms`);
      await new Promise((r) => setTimeout(r, 50));
    }
    o.log(`egress proxy ${proxyName} is up on ${outbound} (${address})`);
    return { id, control };
  }

  /** The running proxy, started on first use; a failed start is tried again by the next caller. */
  function proxy(): Promise<Running> {
    running ??= start().catch((err: unknown) => {
      running = null;
      runningId = null;
      throw err;
    });
    return running;
  }

  /** Removes every execution network of this home that nothing is attached to (the others stay, failing quietly). */
  async function removeExecutionNetworks(): Promise<void> {
    for (const n of await engine.listNetworks({ [EGRESS_LABEL]: true, ...o.labels }))
      if (n.labels[EGRESS_LABEL] === 'execution') await engine.removeNetwork(n.name).catch(() => undefined);
  }

  async function removeNetwork(name: string, proxyId: string | null, containerId: string | null): Promise<void> {
    if (containerId) await engine.disconnectNetwork(name, containerId).catch(() => undefined);
    if (proxyId) await engine.disconnectNetwork(name, proxyId).catch(() => undefined);
    await engine.removeNetwork(name);
  }

  return {
    owns: (containerId) => runningId !== null && runningId === containerId,

    async open(executionId, grant) {
      const p = await proxy();
      const name = networkOf(executionId);
      await engine.createNetwork(
        name,
        { ...o.labels, [EGRESS_LABEL]: 'execution', 'runlog.execution': executionId },
        { internal: true, noHostAddress: true },
      );
      try {
        const { ipAddress } = await engine.connectNetwork(name, p.id);
        const registered = await p.control.putGrant(executionId, ipAddress, grant);
        return { name, proxyAddress: ipAddress, proxyPort: registered.proxyPort };
      } catch (err) {
        await removeNetwork(name, p.id, null).catch(() => undefined);
        throw err;
      }
    },

    async finish(executionId) {
      const p = running ? await running.catch(() => null) : null;
      if (!p) return { usage: null, reports: [], lost: 0 };
      const removed = await p.control.deleteGrant(executionId).catch(() => null);
      const page = await p.control.reports({ key: executionId, limit: 1000 }).catch(() => null);
      return { usage: removed?.usage ?? null, reports: page?.reports ?? [], lost: page?.lost ?? 0 };
    },

    async remove(executionId, containerId) {
      const p = running ? await running.catch(() => null) : null;
      await removeNetwork(networkOf(executionId), p?.id ?? null, containerId);
    },

    async sweep() {
      // A network whose sandbox outlived the supervisor stays until that execution is collected (its cleanup).
      await removeExecutionNetworks();
    },

    async stop() {
      const p = running ? await running.catch(() => null) : null;
      running = null;
      runningId = null;
      if (p) await engine.removeContainer(p.id, { force: true }).catch(() => undefined);
      await removeExecutionNetworks().catch(() => undefined);
      if (o.outboundNetwork === undefined) await engine.removeNetwork(outbound).catch(() => undefined);
    },
  };
}
