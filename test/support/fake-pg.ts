// A PostgreSQL server just far enough for a LISTEN connection, on loopback, for unit tests of connection handling
// (no real server in the unit tier): it accepts, answers the startup message with AuthenticationOk and
// ReadyForQuery when `answer` lets it (held: a connect stays pending for as long as the test wants), and answers
// every simple query with CommandComplete and ReadyForQuery. It records which connections are open, so a test can
// tell whether the code under test ended them.
import net from 'node:net';

const AUTH_OK_READY = Buffer.from([0x52, 0, 0, 0, 8, 0, 0, 0, 0, 0x5a, 0, 0, 0, 5, 0x49]);

function commandComplete(tag: string): Buffer {
  const body = Buffer.from(`${tag}\0`, 'latin1');
  const c = Buffer.alloc(5);
  c.writeUInt8(0x43, 0);
  c.writeUInt32BE(4 + body.length, 1);
  return Buffer.concat([c, body, Buffer.from([0x5a, 0, 0, 0, 5, 0x49])]);
}

export interface FakePg {
  url: string;
  /** Connections accepted so far. */
  accepted: number;
  /** Connections open now (closed by neither side). */
  open(): number;
  /** Whether new connections are answered at start-up (false: they stay pending until set true). */
  answer: boolean;
  /** Breaks every open connection from the server's side (a server restart, a dropped link). */
  dropAll(): void;
  close(): Promise<void>;
}

export async function startFakePg(): Promise<FakePg> {
  const sockets = new Set<net.Socket>();
  const waiting = new Set<() => void>();
  const fake: FakePg = {
    url: '',
    accepted: 0,
    open: () => sockets.size,
    answer: true,
    dropAll: () => {
      for (const s of sockets) s.destroy();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
  const server = net.createServer((s) => {
    fake.accepted += 1;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
    let buf = Buffer.alloc(0);
    let started = false;
    const startUp = (): void => {
      if (fake.answer) s.write(AUTH_OK_READY);
      else waiting.add(startUp);
    };
    s.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        if (!started) {
          if (buf.length < 4) return;
          const len = buf.readUInt32BE(0);
          if (buf.length < len) return;
          buf = buf.subarray(len);
          started = true;
          startUp();
          continue;
        }
        if (buf.length < 5) return;
        const type = String.fromCharCode(buf[0]!);
        const len = buf.readUInt32BE(1);
        if (buf.length < 1 + len) return;
        const body = buf.subarray(5, 1 + len).toString('latin1');
        buf = buf.subarray(1 + len);
        if (type === 'Q') s.write(commandComplete(body.trim().split(/\s+/)[0]!.toUpperCase()));
        else if (type === 'X') s.end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.url = `postgres://fake@127.0.0.1:${(server.address() as net.AddressInfo).port}/fake`;
  // Setting answer = true lets the held start-ups go on.
  let answer = true;
  Object.defineProperty(fake, 'answer', {
    get: () => answer,
    set: (v: boolean) => {
      answer = v;
      if (!v) return;
      const held = [...waiting];
      waiting.clear();
      for (const f of held) f();
    },
  });
  return fake;
}
