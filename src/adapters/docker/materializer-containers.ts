// The never-started containers of a materialization: the carrier that mounts the volume, and the download's source.
//
// Nothing from the image may run, reach the network or inherit anything while its files are copied: both bodies
// replace the entrypoint with one that is never started and drop every privilege. The carrier's mount is NoCopy
// so the image cannot seed the volume; the source mounts nothing (see SourceSpec.fromImage in materializer.ts).
import type { ContainerCreateBody } from './docker-port.ts';
import { MATERIALIZE_TARGET } from './layout.ts';
import { LABEL_MATERIALIZING } from './materialized-volume-labels.ts';

/** What the containers are made from and for: the image, the caller's labels, the volume being filled. */
export interface ContainerSubject {
  image: string;
  labels: Record<string, string>;
  volume: string;
}

/** The stopped container: nothing from the image runs, nothing is reachable, nothing is inherited. */
export function carrierBody(spec: ContainerSubject): ContainerCreateBody {
  return {
    Image: spec.image,
    Entrypoint: ['/runlog-never-started'],
    Cmd: [],
    Env: [],
    User: '65534:65534',
    Labels: { ...spec.labels, 'runlog.kind': 'materializer', [LABEL_MATERIALIZING]: spec.volume },
    NetworkDisabled: true,
    Healthcheck: { Test: ['NONE'] },
    HostConfig: {
      // NoCopy: a path the image ships at /at-run-output must not seed the volume.
      Mounts: [
        {
          Type: 'volume',
          Source: spec.volume,
          Target: MATERIALIZE_TARGET,
          ReadOnly: false,
          VolumeOptions: { NoCopy: true },
        },
      ],
      NetworkMode: 'none',
      ReadonlyRootfs: true,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges:true'],
      AutoRemove: false,
      RestartPolicy: { Name: 'no' },
      LogConfig: { Type: 'none' },
    },
  };
}

/** The download's source: the same never-started container, without the volume (see SourceSpec.fromImage). */
export function sourceBody(spec: ContainerSubject): ContainerCreateBody {
  const body = carrierBody(spec);
  const { Mounts: _mounts, ...hostConfig } = body.HostConfig ?? {};
  return { ...body, Labels: { ...body.Labels, 'runlog.materializer-role': 'source' }, HostConfig: hostConfig };
}
