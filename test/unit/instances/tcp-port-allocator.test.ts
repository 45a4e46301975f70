// TcpPortAllocator against /proc/net/tcp-format fixtures (the real kernel table is in test/int/instances/tcp-port-allocator.test.ts).
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  TcpPortAllocator,
  PortConflictError,
  PortsExhaustedError,
  readBusyPorts,
  readListeningPorts,
} from '../../../src/adapters/net/tcp-port-allocator.ts';

const HEADER4 = '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode';
const HEADER6 =
  '  sl  local_address                         ' +
  'remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode';
const hex = (p: number): string => p.toString(16).toUpperCase().padStart(4, '0');
const v4 = (port: number, st: string): string =>
  `   0: 0100007F:${hex(port)} 00000000:0000 ${st} 00000000:00000000 ` +
  `00:00000000 00000000     0        0 1075 1 0000000077be92ef 100 0 0 10 0`;
const v6 = (port: number, st: string): string =>
  `   0: 00000000000000000000000000000000:${hex(port)} 00000000000000000000000000000000:0000 ${st} ` +
  `00000000:00000000 00:00000000 00000000     0        0 7 1 0000000000000000 100 0 0 10 0`;

let dir: string;
afterEach(() => dir && rmSync(dir, { recursive: true, force: true }));
const fixture = (tcp: string[], tcp6: string[]): string[] => {
  dir = mkdtempSync(join(tmpdir(), 'runlog-ports-'));
  const a = join(dir, 'tcp');
  const b = join(dir, 'tcp6');
  writeFileSync(a, [HEADER4, ...tcp, ''].join('\n'));
  writeFileSync(b, [HEADER6, ...tcp6, ''].join('\n'));
  return [a, b];
};

describe('readListeningPorts', () => {
  it('keeps only LISTEN (0A) sockets, from IPv4 and IPv6 tables, and skips a missing table', () => {
    const files = fixture([v4(4001, '0A'), v4(4002, '01'), v4(4003, '06')], [v6(4004, '0A'), v6(4005, '08')]);
    expect([...readListeningPorts(files)].sort()).toEqual([4001, 4004]);
    expect([...readListeningPorts([files[0]!, join(dir, 'nope')])]).toEqual([4001]);
  });
});

describe('readBusyPorts', () => {
  it('keeps every socket but TIME_WAIT (06): an outbound connection holding a local port makes it busy', () => {
    const files = fixture([v4(4001, '0A'), v4(4002, '01'), v4(4003, '06')], [v6(4004, '0A'), v6(4005, '08')]);
    expect([...readBusyPorts(files)].sort()).toEqual([4001, 4002, 4004, 4005]);
  });
});

describe('TcpPortAllocator', () => {
  it('never hands out the local port of an established connection (a listener there fails with EADDRINUSE)', () => {
    const files = fixture([v4(4001, '01'), v4(4002, '06')], []);
    const a = new TcpPortAllocator({ min: 4001, max: 4002, procFiles: files });
    expect(a.allocate('i1')).toBe(4002); // TIME_WAIT: SO_REUSEADDR binds over it
    expect(() => a.allocate('i2')).toThrow(PortsExhaustedError);
  });

  it('never hands out a port that something listens on (v4 or v6), round-robin from the last one', () => {
    const files = fixture([v4(4001, '0A')], [v6(4003, '0A')]);
    const a = new TcpPortAllocator({ min: 4001, max: 4006, procFiles: files });
    expect(a.allocate('i1')).toBe(4002);
    expect(a.allocate('i2')).toBe(4004);
    a.release(4002);
    expect(a.allocate('i3')).toBe(4005); // not straight back to the just-released 4002
    expect(a.allocate('i4')).toBe(4006);
    expect(a.allocate('i5')).toBe(4002); // wraps around
    expect(a.ownerOf(4004)).toBe('i2');
    expect(() => a.allocate('i6')).toThrow(PortsExhaustedError);
  });

  it('re-reads the kernel table on every allocation (drift heals)', () => {
    const files = fixture([], []);
    const a = new TcpPortAllocator({ min: 5000, max: 5001, procFiles: files });
    writeFileSync(files[0]!, [HEADER4, v4(5000, '0A'), ''].join('\n')); // a foreign server appeared
    expect(a.allocate('i1')).toBe(5001);
    expect(a.scan()).toEqual({ foreign: [5000], idle: [{ port: 5001, owner: 'i1' }] });
    writeFileSync(files[0]!, [HEADER4, v4(5001, '0A'), ''].join('\n')); // ours listens, the foreign one left
    expect(a.scan()).toEqual({ foreign: [], idle: [] });
    a.releaseOwner('i1');
    expect(a.scan()).toEqual({ foreign: [5001], idle: [] });
  });

  it('reserves adopted ports and refuses to give one port to two owners', () => {
    const a = new TcpPortAllocator({ min: 6000, max: 6002, procFiles: fixture([], []) });
    a.reserve(6000, 'adopted-1');
    a.reserve(6000, 'adopted-1'); // idempotent
    expect(() => a.reserve(6000, 'other')).toThrow(PortConflictError);
    expect(a.allocate('i1')).toBe(6001);
    expect([...a.allocated()]).toEqual([
      [6000, 'adopted-1'],
      [6001, 'i1'],
    ]);
    a.release(6002); // not held: no-op
  });

  it('rejects an invalid range', () => {
    expect(() => new TcpPortAllocator({ min: 10, max: 5 })).toThrow(/port range 10-5 is invalid/);
    expect(() => new TcpPortAllocator({ min: 0, max: 5 })).toThrow(/invalid/);
    expect(() => new TcpPortAllocator({ min: 1, max: 70000 })).toThrow(/invalid/);
  });
});
