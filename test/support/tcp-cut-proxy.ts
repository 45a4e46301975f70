// A TCP proxy that can cut one client off its server (a network partition made on demand): bytes pass through
// untouched until cut(); then nothing passes either way and nothing is answered — connections stay open, new ones
// are accepted and left waiting — as when a network drops packets (never a refusal or a reset, which only the
// server's host can send: a node's self-fence counts those as the server down, store/postgres/lease-renewals.ts).
// restore() lets what waited flow on, as TCP does once a partition heals. Give one cluster node its --store through
// it to cut that node alone off PostgreSQL.
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

export interface TcpCutProxy {
  port: number;
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

export async function startTcpCutProxy(target: { host: string; port: number }): Promise<TcpCutProxy> {
  const open = new Set<Socket>();
  const pairs = new Set<{ client: Socket; upstream: Socket | null }>();
  let cut = false;
  const flow = (pair: { client: Socket; upstream: Socket | null }) => {
    const { client } = pair;
    const upstream = (pair.upstream ??= connect(target.port, target.host));
    open.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
      pairs.delete(pair);
    };
    upstream.on('error', drop).on('close', drop);
    client.on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
  };
  const hold = (pair: { client: Socket; upstream: Socket | null }) => {
    pair.client.unpipe();
    pair.client.pause();
    pair.upstream?.unpipe();
    pair.upstream?.pause();
  };
  const server: Server = createServer((client) => {
    open.add(client);
    client.on('error', () => client.destroy());
    const pair = { client, upstream: null };
    pairs.add(pair);
    if (cut)
      client.pause(); // accepted, never answered until restore()
    else flow(pair);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    cut() {
      cut = true;
      for (const p of pairs) hold(p);
    },
    restore() {
      cut = false;
      for (const p of [...pairs]) {
        if (p.client.destroyed) continue;
        if (p.upstream) {
          p.client.pipe(p.upstream);
          p.upstream.pipe(p.client);
        } else flow(p);
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of [...open]) s.destroy();
        server.close(() => resolve());
      }),
  };
}
