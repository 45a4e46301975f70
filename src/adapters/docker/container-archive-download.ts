// Downloading a path from a container (GET /containers/{id}/archive): as a stream, or whole, bounded either way.
//
// The Engine answers with the tar of the path and carries the path's stat in a response header; both reads stop
// at the caller's bound and fail with its own error, so a container cannot make runlog hold more than it allows.
// A failed request goes to the engine's `fail` (its typed errors), a failure mid-read becomes a DockerApiError.
import type Docker from 'dockerode';
import type { IncomingMessage } from 'node:http';
import { RunlogError } from '../../domain/errors.ts';
import type { PathStat } from './docker-port.ts';
import { messageOf } from './dockerode-answers.ts';
import { DockerApiError } from './errors.ts';

type Fail = (operation: string, err: unknown, details?: Record<string, unknown>) => never;

/** GET /containers/{id}/archive: the response (its headers carry the path's stat), not yet read. */
async function archiveResponse(
  streaming: Docker,
  id: string,
  path: string,
  fail: Fail,
): Promise<{ res: IncomingMessage; stat: PathStat | null }> {
  let res: IncomingMessage;
  try {
    // why: it is the HTTP response (its headers carry the path stat); dockerode types it as a stream
    res = (await streaming.getContainer(id).getArchive({ path })) as unknown as IncomingMessage;
  } catch (err) {
    fail(`download ${path} from container ${id}`, err, { path });
  }
  let stat: PathStat | null = null;
  const header = res.headers['x-docker-container-path-stat'];
  if (typeof header === 'string') {
    try {
      stat = JSON.parse(Buffer.from(header, 'base64').toString('utf8')) as PathStat;
    } catch {
      stat = null;
    }
  }
  return { res, stat };
}

/** The download read as it arrives; past maxBytes it fails with `tooLarge`. */
export async function streamContainerArchive(
  streaming: Docker,
  id: string,
  path: string,
  maxBytes: number,
  tooLarge: (max: number) => Error,
  fail: Fail,
): Promise<{ stat: PathStat | null; body: AsyncIterable<Buffer> }> {
  const { res, stat } = await archiveResponse(streaming, id, path, fail);
  const operation = `download ${path} from container ${id}`;
  async function* body(): AsyncGenerator<Buffer> {
    let size = 0;
    try {
      for await (const c of res as AsyncIterable<Buffer>) {
        size += c.length;
        if (size > maxBytes) throw tooLarge(maxBytes);
        yield c;
      }
    } catch (err) {
      if (err instanceof RunlogError) throw err;
      throw new DockerApiError(operation, messageOf(err), undefined, { cause: err });
    } finally {
      res.destroy(); // read to the end already, or given up: either way the request is done
    }
  }
  return { stat, body: body() };
}

/** The whole download in memory; past maxBytes it fails with `tooLarge`. */
export async function readContainerArchive(
  streaming: Docker,
  id: string,
  path: string,
  maxBytes: number,
  tooLarge: (max: number) => Error,
  fail: Fail,
): Promise<{ chunks: Buffer[]; size: number; stat: PathStat | null }> {
  const { res, stat } = await archiveResponse(streaming, id, path, fail);
  const chunks: Buffer[] = [];
  let size = 0;
  await new Promise<void>((resolve, reject) => {
    res.on('data', (c: Buffer) => {
      size += c.length;
      if (size > maxBytes) {
        res.destroy();
        reject(tooLarge(maxBytes));
        return;
      }
      chunks.push(c);
    });
    res.on('end', () => resolve());
    res.on('error', (e) =>
      reject(new DockerApiError(`download ${path} from container ${id}`, messageOf(e), undefined, { cause: e })),
    );
  });
  return { chunks, size, stat };
}
