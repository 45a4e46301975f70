// Who an instance container is: the name and labels it is given at spawn, and the instance read back from them.
//
// Containers outlive the supervisor, and a later runner finds them by their labels (never by name): the labels
// written here are what listOrphanRecords reads back, so both sides live together. The name only has to be a
// valid Docker name and hostname, one per instance (and per cluster node, when nodes share a daemon).
import { createHash } from 'node:crypto';
import type { ContainerInfo } from '../docker/docker-port.ts';
import type { OrphanRecord } from './app-sandbox-runner.ts';

/**
 * `runlog-<id>` (`runlog-<node>--<id>` on a cluster node): Docker names and hostnames take [a-zA-Z0-9.-]; a changed
 * or long one gets a hash suffix.
 */
export function containerName(instanceId: string, node?: string): string {
  const id = node ? `${node}--${instanceId}` : instanceId;
  const clean = id
    .toLowerCase()
    .replace(/[^a-z0-9.-]/g, '-')
    .replace(/^[.-]+/, '');
  if (clean === id && clean.length <= 56) return `runlog-${clean}`;
  const hash = createHash('sha256').update(id).digest('hex').slice(0, 8);
  return `runlog-${clean.slice(0, 47).replace(/[.-]+$/, '')}-${hash}`;
}

/** The labels of an instance's container: runlog's own over the caller's extra ones. */
export function instanceLabels(
  extraLabels: Record<string, string>,
  home: string,
  instanceId: string,
  appId: string,
  basePath: string,
): Record<string, string> {
  return {
    ...extraLabels,
    'runlog.stream': `instance-${instanceId}`,
    'runlog.kind': 'instance',
    'runlog.home': home,
    'runlog.app': appId,
    'runlog.base-path': basePath,
  };
}

/** The instance a container's labels name ('' when they name none). */
export const instanceIdOf = (labels: Record<string, string>): string => {
  const stream = labels['runlog.stream'] ?? '';
  return stream.startsWith('instance-') ? stream.slice('instance-'.length) : '';
};

/** What an adopting runner needs of a container it finds: its labels, its inspect and its IP on `network`. */
export function orphanRecordOf(labels: Record<string, string>, info: ContainerInfo, network: string): OrphanRecord {
  const env = Object.fromEntries(info.env.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
  const running = info.state.running;
  return {
    instanceId: instanceIdOf(labels),
    appId: labels['runlog.app'] ?? env.APP_ID ?? '',
    containerId: info.id,
    port: Number(env.APP_PORT),
    host: running ? info.networks[network]?.ipAddress || null : null,
    state: info.state.status,
    pid: running ? info.pid : null,
    startedAt: info.state.startedAt,
    finishedAt: running ? null : info.state.finishedAt,
    exitCode: running ? null : info.state.exitCode,
    basePath: labels['runlog.base-path'] ?? '',
  };
}
