// A Unix socket in front of the Docker Engine's that holds back the answer to chosen requests: bytes pass through
// untouched (upgraded attach streams too), and on a connection that sent a chosen request the daemon's answer is
// held for `delayMs` before it flows on. A slow daemon or a slow disk, made on demand, with the real Engine behind.
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DOCKER_SOCKET } from './docker.ts';

export interface DockerDelayProxy {
  socketPath: string;
  /** Request lines (method and path) that were held back. */
  held: string[];
  close(): Promise<void>;
}

/** Holds back the answer to each request whose request line `hold` picks (given "GET /v1.43/…"). */
export async function startDockerDelayProxy(
  hold: (requestLine: string) => boolean,
  delayMs: number,
): Promise<DockerDelayProxy> {
  const dir = mkdtempSync(join(tmpdir(), 'runlog-docker-proxy-'));
  const socketPath = join(dir, 'docker.sock');
  const held: string[] = [];
  const sockets = new Set<Socket>();
  // Half-open both ways: an attach's caller ends its stdin and still reads the container's output.
  const server: Server = createServer({ allowHalfOpen: true }, (client) => {
    const daemon = connect({ path: DOCKER_SOCKET, allowHalfOpen: true });
    sockets.add(client).add(daemon);
    let releaseAt = 0;
    client.on('data', (chunk: Buffer) => {
      const line = /^(GET|POST|PUT|DELETE|HEAD) (\S+)/m.exec(chunk.toString('latin1'))?.[0];
      if (line && hold(line)) {
        held.push(line);
        releaseAt = Date.now() + delayMs;
      }
      daemon.write(chunk);
    });
    // What the daemon sent is passed on in order; a held chunk holds the rest (and the end) behind it.
    let passed = Promise.resolve();
    daemon.on('data', (chunk: Buffer) => {
      const wait = releaseAt - Date.now();
      if (wait <= 0) {
        client.write(chunk);
        return;
      }
      daemon.pause();
      passed = new Promise((resolve) =>
        setTimeout(() => {
          client.write(chunk);
          daemon.resume();
          resolve();
        }, wait),
      );
    });
    daemon.on('end', () => void passed.then(() => client.end()));
    client.on('end', () => daemon.end());
    const drop = () => {
      client.destroy();
      daemon.destroy();
    };
    client.on('error', drop);
    daemon.on('error', drop);
    client.on('close', () => daemon.destroy());
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  return {
    socketPath,
    held,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
