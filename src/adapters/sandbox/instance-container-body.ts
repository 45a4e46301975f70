// The create body of an instance container: its binds (the app's slice of the workspace, its data, the tools)
// and the strict defaults it runs under.
//
// Kept apart from the runner's bookkeeping so what a container can see and do is read in one place: it sees only
// its own app directory and data, the tools read-only, the Docker socket only when its manifest asks for docker;
// all capabilities dropped, no-new-privileges, read-only root with tmpfs /tmp and /root, pids and memory limits,
// docker-init as PID 1, and a hostname its network resolves.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { ContainerCreateBody } from '../docker/docker-port.ts';
import { ALL_TOOLS_MOUNT, MY_TOOLS_MOUNT } from '../tools/toolchain.ts';
import type { HomeLayout } from './layout.ts';

export interface InstanceContainerSpec {
  /** The container's name, also its hostname and its alias on the network. */
  name: string;
  image: string;
  cmd: string[];
  env: Record<string, string>;
  labels: Record<string, string>;
  instanceId: string;
  appId: string;
  /** The app's directory on the host, bound at sandboxAppDir (the working directory). */
  hostAppDir: string;
  sandboxAppDir: string;
  workspaceDir: string;
  layout: HomeLayout;
  /** The bashrc file on the host (ensureBashrc). */
  bashrc: string;
  /** The manifest's tools: 'docker' or '*' binds the Docker socket. */
  tools: readonly string[];
  dockerSocketPath: string;
  network: string;
  pidsLimit: number;
  memoryBytes: number;
}

/** The binds and the create body; the workspace's shared directories and the socket only where they exist. */
export function instanceContainerBody(s: InstanceContainerSpec): ContainerCreateBody {
  const L = s.layout;
  const wantsDocker = s.tools.includes('docker') || s.tools.includes('*');
  const binds = [
    `${s.hostAppDir}:${s.sandboxAppDir}`,
    ...['packages', 'node_modules']
      .filter((d) => existsSync(join(s.workspaceDir, d)))
      .map((d) => `${join(s.workspaceDir, d)}:/workspace/${d}:ro`),
    `${L.appDataDir(s.appId)}:/data`,
    `${s.bashrc}:/root/.bashrc:ro`,
    `${L.toolchainDir}:${ALL_TOOLS_MOUNT}:ro`,
    `${L.instanceToolsDir(s.instanceId)}:${MY_TOOLS_MOUNT}:ro`,
    ...(wantsDocker && existsSync(s.dockerSocketPath) ? [`${s.dockerSocketPath}:/var/run/docker.sock`] : []),
  ];
  return {
    Hostname: s.name,
    Image: s.image,
    Cmd: s.cmd,
    Env: Object.entries(s.env).map(([k, v]) => `${k}=${v}`),
    WorkingDir: s.sandboxAppDir,
    Labels: s.labels,
    HostConfig: {
      NetworkMode: s.network,
      Binds: binds,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      ReadonlyRootfs: true,
      Tmpfs: { '/tmp': 'rw,nosuid,nodev,size=512m', '/root': 'rw,nosuid,nodev,size=256m' },
      PidsLimit: s.pidsLimit,
      Memory: s.memoryBytes,
      Init: true,
    },
    NetworkingConfig: { EndpointsConfig: { [s.network]: { Aliases: [s.name] } } },
  };
}
