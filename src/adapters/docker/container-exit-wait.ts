// Waiting for a container's next exit over a raw streaming request, answered as soon as the wait is registered.
//
// dockerode resolves wait() only when the body arrives; the Engine flushes the response headers as soon as the
// waiter is registered, so a raw streaming request tells us when it is safe to start the container: the handle
// comes back then, and its `exited` settles with the status when the container exits.
import type Docker from 'dockerode';
import type { IncomingMessage } from 'node:http';
import type { WaitHandle } from './docker-port.ts';
import { messageOf } from './dockerode-answers.ts';
import { DockerApiError } from './errors.ts';

/** The handle of a `next-exit` wait on `id`; a failed request goes to `fail` (the engine's typed errors). */
export function nextExitWait(
  streaming: Docker,
  id: string,
  fail: (operation: string, err: unknown) => never,
): Promise<WaitHandle> {
  return new Promise((resolve, reject) => {
    const controller = new AbortController();
    streaming.modem.dial(
      {
        path: `/containers/${encodeURIComponent(id)}/wait?`,
        method: 'POST',
        isStream: true,
        abortSignal: controller.signal,
        statusCodes: { 200: true, 400: 'bad parameter', 404: 'no such container', 500: 'server error' },
        options: { _query: { condition: 'next-exit' }, _body: {} },
      },
      (err, result) => {
        const res = result as IncomingMessage;
        if (err || !result) {
          try {
            fail(`wait container ${id}`, err);
          } catch (e) {
            reject(e);
          }
          return;
        }
        const exited = new Promise<{ statusCode: number; error?: string }>((res2, rej2) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            try {
              const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
                StatusCode: number;
                Error?: { Message?: string } | null;
              };
              res2({ statusCode: body.StatusCode, ...(body.Error?.Message ? { error: body.Error.Message } : {}) });
            } catch (e) {
              rej2(new DockerApiError(`wait container ${id}`, `unreadable answer: ${messageOf(e)}`, 200));
            }
          });
          res.on('error', (e) =>
            rej2(new DockerApiError(`wait container ${id}`, messageOf(e), undefined, { cause: e })),
          );
        });
        exited.catch(() => undefined); // observed by the caller; never an unhandled rejection
        resolve({ exited, cancel: () => controller.abort() });
      },
    );
  });
}
