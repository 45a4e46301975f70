// The egress proxy's address rules (src/domain/at-run/egress-address.ts): strict IPv4 and IPv6 parsing, CIDR
// ranges, and the special range of every address a granted name may resolve to.
import { describe, expect, it } from 'vitest';
import {
  classifyAddress,
  formatIp,
  inRange,
  parseCidr,
  parseIp,
  type AddressKind,
} from '../../../src/domain/at-run/egress-address.ts';

describe('parseIp', () => {
  it.each([
    ['0.0.0.0', '0.0.0.0'],
    ['255.255.255.255', '255.255.255.255'],
    ['10.1.2.3', '10.1.2.3'],
    ['::', '::'],
    ['::1', '::1'],
    ['1::', '1::'],
    ['2001:DB8::1', '2001:db8::1'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['1:2:3:4:5:6:7::', '1:2:3:4:5:6:7:0'],
    ['::ffff:127.0.0.1', '::ffff:7f00:1'],
    ['1:2:3:4:5:6:1.2.3.4', '1:2:3:4:5:6:102:304'],
    ['fe80::1%eth0', 'fe80::1'],
    ['[::1]', '::1'],
  ])('reads %s', (text, canonical) => {
    const ip = parseIp(text);
    expect(ip).not.toBeNull();
    expect(formatIp(ip!)).toBe(canonical);
  });

  it.each([
    '',
    '1.2.3',
    '1.2.3.4.5',
    '256.1.1.1',
    '01.2.3.4',
    '1.2.3.04',
    '0x7f.0.0.1',
    '2130706433',
    '1.2.3.-4',
    ' 1.2.3.4',
    '1::2::3',
    ':1',
    '1:',
    ':::',
    '1:2:3:4:5:6:7:8:9',
    '1:2:3:4:5:6:7:8::',
    '12345::',
    'g::1',
    '1.2.3.4::',
    '::1.2.3',
    'fe80::1%',
    'fe80::1%a b',
    'example.com',
  ])('refuses %j', (text) => {
    expect(parseIp(text)).toBeNull();
  });
});

describe('parseCidr and inRange', () => {
  it('reads ranges with their host bits clear', () => {
    expect(parseCidr('10.1.2.0/24')).toMatchObject({ family: 4, prefix: 24 });
    expect(parseCidr('fd00:1::/64')).toMatchObject({ family: 6, prefix: 64 });
    expect(parseCidr('0.0.0.0/0')).toMatchObject({ family: 4, prefix: 0 });
    expect(parseCidr('1.2.3.4/32')).toMatchObject({ prefix: 32 });
  });

  it.each(['10.1.2.3/24', '10.0.0.0/33', '::1/129', '10.0.0.0', '10.0.0.0/', '10.0.0.0/08', 'fe80::%eth0/64', 'x/8'])(
    'refuses %j',
    (text) => expect(parseCidr(text)).toBeNull(),
  );

  it('matches addresses of the same family inside the range only', () => {
    const r = parseCidr('10.1.2.0/24')!;
    expect(inRange(parseIp('10.1.2.255')!, r)).toBe(true);
    expect(inRange(parseIp('10.1.3.0')!, r)).toBe(false);
    expect(inRange(parseIp('::ffff:10.1.2.1')!, r)).toBe(false);
    expect(inRange(parseIp('fd00:1::5')!, parseCidr('fd00:1::/64')!)).toBe(true);
  });
});

describe('classifyAddress', () => {
  const table: [string, AddressKind, string?][] = [
    // public
    ['1.1.1.1', 'public'],
    ['8.8.8.8', 'public'],
    ['93.184.216.34', 'public'],
    ['100.63.255.255', 'public'],
    ['100.128.0.0', 'public'],
    ['172.15.255.255', 'public'],
    ['172.32.0.0', 'public'],
    ['192.169.0.1', 'public'],
    ['223.255.255.255', 'public'],
    ['2606:4700:4700::1111', 'public'],
    ['2a00:1450::1', 'public'],
    ['64:ff9b::808:808', 'public'],
    // IPv4 special ranges
    ['0.0.0.0', 'unspecified', '0.0.0.0/8'],
    ['0.1.2.3', 'unspecified', '0.0.0.0/8'],
    ['127.0.0.1', 'loopback', '127.0.0.0/8'],
    ['127.255.255.254', 'loopback', '127.0.0.0/8'],
    ['10.0.0.1', 'private', '10.0.0.0/8'],
    ['172.16.0.1', 'private', '172.16.0.0/12'],
    ['172.31.255.255', 'private', '172.16.0.0/12'],
    ['192.168.1.1', 'private', '192.168.0.0/16'],
    ['100.64.0.1', 'shared', '100.64.0.0/10'],
    ['100.127.255.255', 'shared', '100.64.0.0/10'],
    ['169.254.0.1', 'link-local', '169.254.0.0/16'],
    ['169.254.169.254', 'metadata', '169.254.169.254/32'],
    ['169.254.170.2', 'metadata', '169.254.170.2/32'],
    ['100.100.100.200', 'metadata', '100.100.100.200/32'],
    ['168.63.129.16', 'metadata', '168.63.129.16/32'],
    ['192.0.0.192', 'metadata', '192.0.0.192/32'],
    ['192.0.0.8', 'reserved', '192.0.0.0/24'],
    ['192.0.2.1', 'documentation', '192.0.2.0/24'],
    ['198.51.100.7', 'documentation', '198.51.100.0/24'],
    ['203.0.113.9', 'documentation', '203.0.113.0/24'],
    ['198.18.0.1', 'benchmark', '198.18.0.0/15'],
    ['198.19.255.255', 'benchmark', '198.18.0.0/15'],
    ['192.88.99.1', 'tunnel', '192.88.99.0/24'],
    ['224.0.0.1', 'multicast', '224.0.0.0/4'],
    ['239.255.255.250', 'multicast', '224.0.0.0/4'],
    ['240.0.0.1', 'reserved', '240.0.0.0/4'],
    ['255.255.255.254', 'reserved', '240.0.0.0/4'],
    ['255.255.255.255', 'broadcast', '255.255.255.255/32'],
    // IPv6 special ranges
    ['::', 'unspecified', '::/128'],
    ['::1', 'loopback', '::1/128'],
    ['::2', 'reserved', '::/96'],
    ['::127.0.0.1', 'reserved', '::/96'],
    ['::ffff:0:0:1', 'reserved', '::ffff:0:0:0/96'],
    ['64:ff9b:1::1', 'private', '64:ff9b:1::/48'],
    ['100::1', 'reserved', '100::/64'],
    ['2001::1', 'tunnel', '2001::/32'],
    ['2001:2::1', 'benchmark', '2001:2::/48'],
    ['2001:10::1', 'reserved', '2001::/23'],
    ['2001:db8::1', 'documentation', '2001:db8::/32'],
    ['2002:7f00:1::', 'tunnel', '2002::/16'],
    ['3fff::1', 'documentation', '3fff::/20'],
    ['5f00::1', 'reserved', '5f00::/16'],
    ['fc00::1', 'unique-local', 'fc00::/7'],
    ['fdff:ffff::1', 'unique-local', 'fc00::/7'],
    ['fd00:ec2::254', 'metadata', 'fd00:ec2::254/128'],
    ['fe80::1', 'link-local', 'fe80::/10'],
    ['fe80::1%eth0', 'link-local', 'fe80::/10'],
    ['febf::1', 'link-local', 'fe80::/10'],
    ['fec0::1', 'reserved', 'fec0::/10'],
    ['ff02::1', 'multicast', 'ff00::/8'],
    ['4000::1', 'reserved', 'outside 2000::/3'],
    ['1::1', 'reserved', 'outside 2000::/3'],
    // IPv4-mapped and NAT64: what a connection to them reaches
    ['::ffff:127.0.0.1', 'loopback', '127.0.0.0/8'],
    ['::ffff:7f00:1', 'loopback', '127.0.0.0/8'],
    ['::ffff:169.254.169.254', 'metadata', '169.254.169.254/32'],
    ['::ffff:10.0.0.1', 'private', '10.0.0.0/8'],
    ['::ffff:0.0.0.0', 'unspecified', '0.0.0.0/8'],
    ['::ffff:8.8.8.8', 'public'],
    ['64:ff9b::7f00:1', 'loopback', '127.0.0.0/8'],
    ['64:ff9b::a9fe:a9fe', 'metadata', '169.254.169.254/32'],
    // not addresses
    ['localhost', 'invalid'],
    ['0x7f000001', 'invalid'],
    ['017.0.0.1', 'invalid'],
    ['', 'invalid'],
  ];

  it.each(table)('%s is %s', (address, kind, range) => {
    const c = classifyAddress(address);
    expect(c.kind).toBe(kind);
    expect(c.range).toBe(range);
  });

  it('classifies an IPv4-mapped address as IPv4, and NAT64 as IPv6', () => {
    expect(classifyAddress('::ffff:10.0.0.1').family).toBe(4);
    expect(classifyAddress('64:ff9b::a00:1').family).toBe(6);
    expect(classifyAddress('10.0.0.1').family).toBe(4);
    expect(classifyAddress('fe80::1').family).toBe(6);
  });
});
