// Reading an image pull's answer: the Engine's NDJSON progress stream, where a pull reports its failure.
//
// The Engine answers a pull with 200 before it knows the outcome, then streams one JSON object per line: progress
// for each layer, or an error. The pull failed when any line carried an error, so the whole stream is read and the
// last error (or null) is the verdict; the progress lines go to the caller as they arrive.
import type { IncomingMessage } from 'node:http';
import type { PullProgress } from './docker-port.ts';

/** The last error the pull's progress stream reported, or null; rejects when the stream itself fails. */
export function pullStreamFailure(
  res: IncomingMessage,
  onProgress?: (p: PullProgress) => void,
): Promise<string | null> {
  return new Promise<string | null>((resolve, reject) => {
    let buf = '';
    let error: string | null = null;
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (!line) continue;
        try {
          const ev = JSON.parse(line) as {
            status?: string;
            id?: string;
            error?: string;
            errorDetail?: { message?: string };
            progressDetail?: { current?: number; total?: number };
          };
          if (ev.error || ev.errorDetail?.message) error = ev.errorDetail?.message ?? ev.error ?? 'pull failed';
          else if (onProgress && ev.status) {
            onProgress({
              status: ev.status,
              ...(ev.id ? { layer: ev.id } : {}),
              ...(ev.progressDetail?.current !== undefined ? { current: ev.progressDetail.current } : {}),
              ...(ev.progressDetail?.total !== undefined ? { total: ev.progressDetail.total } : {}),
            });
          }
        } catch {
          // not JSON: ignore the line
        }
      }
    });
    res.on('end', () => resolve(error));
    res.on('error', reject);
  });
}
