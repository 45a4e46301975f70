// The Engine's event stream (GET /events): JSON lines read as they come and handed over as EngineEvents.
import type { Readable } from 'node:stream';
import type { EngineEvent } from './docker-port.ts';

/**
 * Reads the Engine's events from `stream` into `onEvent` (a line that is not JSON is skipped, a subscriber that
 * throws does not end it). Resolves when the stream ends: null when the subscriber closed it, else why it ended.
 */
export function engineEventsEnded(
  stream: Readable,
  onEvent: (e: EngineEvent) => void,
  isClosed: () => boolean,
): Promise<Error | null> {
  return new Promise<Error | null>((resolve) => {
    let buf = '';
    stream.on('data', (chunk: Buffer | string) => {
      buf += chunk.toString();
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (!line) continue;
        let raw: {
          Type?: string;
          Action?: string;
          status?: string;
          id?: string;
          Actor?: { ID?: string; Attributes?: Record<string, string> };
          time?: number;
          timeNano?: number;
        };
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
    stream.on('end', () => resolve(isClosed() ? null : new Error('the Docker Engine closed its event stream')));
    stream.on('close', () => resolve(isClosed() ? null : new Error('the Docker Engine closed its event stream')));
    stream.on('error', (e: Error) => resolve(isClosed() ? null : e));
  });
}
