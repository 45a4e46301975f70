// The create body of an at-run execution container: the spec's validation and its hardened Docker settings.
//
// Pure (no Engine call), so what the sandbox is made of can be read, tested and benchmarked on its own: every
// problem with a spec is reported at once, and the body it builds is the only way an execution container is made
// (read-only mounts and rootfs, no network or only the egress proxy, no capabilities, bounded resources, one stdin
// attach).
import { ValidationError } from '../../domain/errors.ts';
import { isDigestReference } from '../../domain/at-run/oci-reference.ts';
import type { ContainerCreateBody, MountSpec } from './docker-port.ts';
import {
  ADDITIONS_MOUNT,
  APP_MOUNT,
  RUNTIME_MOUNT,
  WORK_MOUNT,
  envProblems,
  sandboxCommand,
  type Launcher,
} from './layout.ts';

export const INVOCATION_LABEL = 'runlog.invocation';
/** Marks a pre-started sandbox (its value: the pool's id for it). Such a container is running, waiting for its one envelope. */
export const PRESTART_LABEL = 'runlog.prestart';

/** Operator-owned policy: which image, which user, which limits, which isolation backend. */
export interface SandboxPolicy {
  /** The runner-owned sandbox image, `repository@sha256:…` (at-run-sandbox). */
  image: string;
  /** `uid:gid`, numeric, never 0. Default 65532:65532. */
  user?: string;
  memoryBytes: number;
  pidsLimit: number;
  /** CPU in units of 1e-9 CPUs (1 CPU = 1e9). */
  nanoCpus: number;
  /** Size of the writable /opt/at-run/work tmpfs. */
  workTmpfsBytes: number;
  /** OCI runtime: undefined/'runc' for the daemon default, 'runsc' for gVisor. */
  runtime?: string;
  /** Bound of what the json-file log driver keeps on disk (collectResult reads it). Default 32 MiB. */
  logMaxBytes?: number;
}

export const DEFAULT_SANDBOX_USER = '65532:65532';

/**
 * The gVisor runtime a network-granted sandbox runs under, in place of `runsc`.
 *
 * `runsc` is registered with `--network=none`, what every other sandbox wants. `npm run setup` registers this one
 * with `--network=host`: gVisor then hands socket calls to the kernel, inside the sandbox's own network namespace,
 * which is the execution's internal network. What the sandbox can reach is the network's and the proxy's to say,
 * as under runc; what it gives up is gVisor's own network stack between the handler and the kernel. The runsc build
 * Debian ships refuses to start its own stack here ("cannot run with network enabled in root network namespace").
 */
export const GVISOR_NETWORK_RUNTIME = 'runsc-net';

export interface ExecutionContainerSpec {
  policy: SandboxPolicy;
  runtimeVolume: string;
  codeVolume: string;
  /** Mounted read-only at /opt/at-run/additions/<index>. */
  additionVolumes?: readonly string[];
  /** From the selected runtime platform entry. */
  launcher: Launcher;
  /** From the code record: relative to the code root (/opt/at-run/app). */
  entrypoint: string;
  /** The runtime record's env: the container gets this and nothing inherited. */
  env?: readonly { name: string; value: string }[] | Readonly<Record<string, string>>;
  /** Caller's labels (runlog.stream, runlog.kind, runlog.home, …). */
  labels: Readonly<Record<string, string>>;
  /**
   * The envelope id this container will run; recorded as a label so collectResult can check frames. null for a
   * pre-started sandbox: its envelope (and so its id) is not known when it is created.
   */
  invocationId: string | null;
  name?: string;
  /** A network-granted execution's own network, whose only way out is the egress proxy (decision 12). */
  network?: SandboxNetwork;
}

/** The execution's internal network and the egress proxy's address on it. */
export interface SandboxNetwork {
  /** An internal network (no route out, no address of the host's) made for this execution alone. */
  name: string;
  /** The proxy's IPv4 address on it: its HTTP proxy port, and its DNS listener on 53 (which refuses every query). */
  proxyAddress: string;
  proxyPort: number;
}

/**
 * What a network-granted sandbox is told about its proxy: the usual proxy variables (both cases: tools read
 * either), and NODE_USE_ENV_PROXY so Node's fetch and http use them. Telling is a courtesy; the network enforces.
 */
export function proxyEnv(n: SandboxNetwork): Record<string, string> {
  const url = `http://${n.proxyAddress}:${n.proxyPort}`;
  return {
    HTTP_PROXY: url,
    HTTPS_PROXY: url,
    http_proxy: url,
    https_proxy: url,
    NODE_USE_ENV_PROXY: '1',
  };
}

const VOLUME_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]+$/;
const UID_GID = /^(\d{1,10}):(\d{1,10})$/;

function envList(env: ExecutionContainerSpec['env']): Record<string, string> {
  if (!env) return {};
  if (Array.isArray(env))
    return Object.fromEntries((env as { name: string; value: string }[]).map((e) => [e.name, e.value]));
  return { ...(env as Record<string, string>) };
}

/** Validates the spec (every problem) and builds the create body. Pure: exported for inspection and tests. */
export function executionContainerBody(spec: ExecutionContainerSpec): { body: ContainerCreateBody; command: string[] } {
  const p = spec.policy;
  const problems: string[] = [];
  if (!isDigestReference(p.image))
    problems.push(`policy.image must be a repository@sha256:<digest> reference, got ${JSON.stringify(p.image)}`);
  const user = p.user ?? DEFAULT_SANDBOX_USER;
  const ids = UID_GID.exec(user);
  if (!ids) problems.push(`policy.user must be numeric uid:gid, got ${JSON.stringify(user)}`);
  else if (Number(ids[1]) === 0 || Number(ids[2]) === 0) problems.push('policy.user must not be root (uid or gid 0)');
  const positive = (name: string, v: number, min = 1) => {
    if (!Number.isSafeInteger(v) || v < min) problems.push(`policy.${name} must be an integer >= ${min}, got ${v}`);
  };
  positive('memoryBytes', p.memoryBytes, 6 * 1024 * 1024);
  positive('pidsLimit', p.pidsLimit);
  positive('nanoCpus', p.nanoCpus, 10_000_000);
  positive('workTmpfsBytes', p.workTmpfsBytes, 4096);
  if (p.runtime !== undefined && !/^[a-z0-9][a-z0-9._-]*$/.test(p.runtime))
    problems.push(`policy.runtime ${JSON.stringify(p.runtime)} is not a runtime name`);
  const volumes = [spec.runtimeVolume, spec.codeVolume, ...(spec.additionVolumes ?? [])];
  for (const v of volumes)
    if (typeof v !== 'string' || !VOLUME_NAME.test(v)) problems.push(`volume name ${JSON.stringify(v)} is invalid`);
  if (spec.invocationId !== null && (typeof spec.invocationId !== 'string' || spec.invocationId.length === 0))
    problems.push('invocationId must be a non-empty string (or null for a pre-started sandbox)');
  if (spec.invocationId === null && spec.labels[PRESTART_LABEL] === undefined)
    problems.push(`a sandbox without an invocationId must be labelled ${PRESTART_LABEL} (pre-started)`);
  if (spec.network && spec.invocationId === null)
    problems.push('a pre-started sandbox has no network: one is made for each network-granted execution');
  if (spec.network && !/^[0-9]{1,3}(\.[0-9]{1,3}){3}$/.test(spec.network.proxyAddress))
    problems.push(`network.proxyAddress must be an IPv4 address, got ${JSON.stringify(spec.network.proxyAddress)}`);
  const env = envList(spec.env);
  problems.push(...envProblems(env));
  if (spec.network) Object.assign(env, proxyEnv(spec.network));
  let command: string[] = [];
  try {
    command = sandboxCommand(spec.launcher, spec.entrypoint);
  } catch (err) {
    problems.push(...((err as ValidationError).issues ?? [String(err)]));
  }
  if (problems.length > 0)
    throw new ValidationError('SANDBOX_SPEC_INVALID', 'cannot create the execution container', problems);

  const [, uid, gid] = ids!;
  const ro = (source: string, target: string): MountSpec => ({
    Type: 'volume',
    Source: source,
    Target: target,
    ReadOnly: true,
    VolumeOptions: { NoCopy: true },
  });
  const mounts: MountSpec[] = [
    ro(spec.runtimeVolume, RUNTIME_MOUNT),
    ro(spec.codeVolume, APP_MOUNT),
    ...(spec.additionVolumes ?? []).map((v, i) => ro(v, `${ADDITIONS_MOUNT}/${i}`)),
  ];
  const logMax = p.logMaxBytes ?? 32 * 1024 * 1024;
  const body: ContainerCreateBody = {
    Image: p.image,
    // The image's ENTRYPOINT/CMD are both replaced: argv is exactly the computed command.
    Entrypoint: [command[0]!],
    Cmd: command.slice(1),
    Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
    User: user,
    WorkingDir: WORK_MOUNT,
    Labels: { ...spec.labels, ...(spec.invocationId !== null ? { [INVOCATION_LABEL]: spec.invocationId } : {}) },
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    OpenStdin: true,
    StdinOnce: true,
    Tty: false,
    NetworkDisabled: spec.network === undefined,
    Healthcheck: { Test: ['NONE'] },
    HostConfig: {
      Mounts: mounts,
      Tmpfs: { [WORK_MOUNT]: `rw,nosuid,nodev,size=${p.workTmpfsBytes},uid=${uid},gid=${gid},mode=0700` },
      ReadonlyRootfs: true,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges:true'],
      // No network, or the execution's own internal one: its resolver is the proxy (which refuses every query), and
      // IPv6 is off (the network has none; link-local addresses would still be made).
      ...(spec.network
        ? {
            NetworkMode: spec.network.name,
            Dns: [spec.network.proxyAddress],
            Sysctls: { 'net.ipv6.conf.all.disable_ipv6': '1', 'net.ipv6.conf.default.disable_ipv6': '1' },
          }
        : { NetworkMode: 'none' }),
      Memory: p.memoryBytes,
      MemorySwap: p.memoryBytes,
      PidsLimit: p.pidsLimit,
      NanoCpus: p.nanoCpus,
      IpcMode: 'private',
      Privileged: false,
      AutoRemove: false,
      RestartPolicy: { Name: 'no' },
      Init: false,
      Ulimits: [{ Name: 'core', Soft: 0, Hard: 0 }],
      LogConfig: { Type: 'json-file', Config: { 'max-size': String(logMax), 'max-file': '1' } },
      ...(p.runtime && p.runtime !== 'runc' ? { Runtime: ociRuntime(p.runtime, spec.network !== undefined) } : {}),
    },
  };
  return { body, command };
}

/** The runtime a sandbox is created with: gVisor's networked twin when it has a network (GVISOR_NETWORK_RUNTIME). */
function ociRuntime(runtime: string, networked: boolean): string {
  return networked && runtime === 'runsc' ? GVISOR_NETWORK_RUNTIME : runtime;
}
