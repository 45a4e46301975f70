// TcpPortAllocator against the real kernel LISTEN table (/proc/net/tcp and /proc/net/tcp6).
import { describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:net';
import { TcpPortAllocator, readListeningPorts } from '../../../src/adapters/net/tcp-port-allocator.ts';

const listen = (port: number, host: string): Promise<Server> =>
  new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(port, host, () => resolve(s));
  });

describe('TcpPortAllocator on this host', () => {
  it('sees real IPv4 and IPv6 listeners and skips them', async () => {
    const a = new TcpPortAllocator({ min: 23700, max: 23799 });
    const first = a.allocate('probe');
    a.release(first);
    const s4 = await listen(first + 1, '127.0.0.1');
    const s6 = await listen(first + 2, '::1');
    try {
      const listening = readListeningPorts();
      expect(listening.has(first + 1)).toBe(true);
      expect(listening.has(first + 2)).toBe(true);
      const fresh = new TcpPortAllocator({ min: first + 1, max: first + 3 });
      expect(fresh.allocate('i1')).toBe(first + 3);
      expect(fresh.scan().foreign).toEqual([first + 1, first + 2]);
    } finally {
      s4.close();
      s6.close();
    }
    await new Promise((r) => setTimeout(r, 20));
    expect(readListeningPorts().has(first + 1)).toBe(false); // closed sockets leave the table
  });
});
