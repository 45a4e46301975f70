// The Docker Engine's event stream (GET /events), filtered by label, behind our own types. The stream is one
// long HTTP response: it ends (or errors) when the daemon stops or restarts, which is how a watcher learns that
// it must reconnect. dockerode stays in this file.
import Docker from 'dockerode';
import { DockerUnavailableError } from './errors.ts';

export interface EngineEvent {
  /** container | volume | network | image | … */
  type: string;
  /** create | start | die | stop | destroy | kill | oom | … */
  action: string;
  /** The object's id (a container's full id). */
  id: string;
  /** The object's labels (for containers, the container's labels) plus the attributes Docker adds. */
  attributes: Record<string, string>;
  /** For `die`: the exit status Docker reports. */
  exitCode: number | null;
  /** Seconds since the epoch (Docker's `time`). */
  time: number;
  timeNano: number;
}

export interface EngineEventSubscription {
  /** Settles when the stream is over: null after close(), the error when the daemon went away. */
  readonly ended: Promise<Error | null>;
  close(): void;
}

export interface EngineEventOptions {
  socketPath: string;
  /** Only events of objects carrying these labels (`key=value`, or `key` for any value). */
  labels: Record<string, string | true>;
  types?: string[];
  /** Replay events since this time (seconds since the epoch) before going live. */
  sinceSec?: number;
}

/** Subscribes; resolves once the Engine has answered (rejects with DockerUnavailableError when it does not). */
export async function subscribeEngineEvents(opts: EngineEventOptions, onEvent: (e: EngineEvent) => void): Promise<EngineEventSubscription> {
  const docker = new Docker({ socketPath: opts.socketPath });
  const controller = new AbortController();
  let stream: NodeJS.ReadableStream;
  try {
    stream = (await docker.getEvents({
      filters: {
        type: opts.types ?? ['container'],
        label: Object.entries(opts.labels).map(([k, v]) => (v === true ? k : `${k}=${v}`)),
      },
      ...(opts.sinceSec !== undefined ? { since: Math.floor(opts.sinceSec) } : {}),
      abortSignal: controller.signal,
    } as Docker.GetEventsOptions)) as NodeJS.ReadableStream;
  } catch (err) {
    throw new DockerUnavailableError(opts.socketPath, err instanceof Error ? err.message : String(err), { cause: err });
  }
  let closed = false;
  const ended = new Promise<Error | null>((resolve) => {
    let buf = '';
    stream.on('data', (chunk: Buffer | string) => {
      buf += chunk.toString();
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (!line) continue;
        let raw: { Type?: string; Action?: string; status?: string; id?: string; Actor?: { ID?: string; Attributes?: Record<string, string> }; time?: number; timeNano?: number };
        try {
          raw = JSON.parse(line) as typeof raw;
        } catch {
          continue; // not JSON: skip the line
        }
        const attributes = raw.Actor?.Attributes ?? {};
        const exit = attributes.exitCode !== undefined ? Number(attributes.exitCode) : NaN;
        try {
          onEvent({
            type: raw.Type ?? 'container',
            action: raw.Action ?? raw.status ?? '',
            id: raw.Actor?.ID ?? raw.id ?? '',
            attributes,
            exitCode: Number.isFinite(exit) ? exit : null,
            time: raw.time ?? 0,
            timeNano: raw.timeNano ?? 0,
          });
        } catch {
          // a subscriber's bug must not end the subscription
        }
      }
    });
    stream.on('end', () => resolve(closed ? null : new Error('the Docker Engine closed its event stream')));
    stream.on('close', () => resolve(closed ? null : new Error('the Docker Engine closed its event stream')));
    stream.on('error', (e: Error) => resolve(closed ? null : e));
  });
  return {
    ended,
    close() {
      closed = true;
      controller.abort();
      (stream as unknown as { destroy?: () => void }).destroy?.();
    },
  };
}

/** Whether the Engine answers a ping within `timeoutMs`. */
export async function engineAnswers(socketPath: string, timeoutMs = 2000): Promise<boolean> {
  const docker = new Docker({ socketPath, timeout: timeoutMs });
  try {
    await docker.ping();
    return true;
  } catch {
    return false;
  }
}
