// The egress proxy's decision for one connection (src/domain/at-run/egress-decision.ts) and the host-name rules
// under it (egress-host.ts): a granted name on a granted port, every resolved address public or explicitly allowed,
// never an IP written as the destination.
import { describe, expect, it } from 'vitest';
import { checkTarget, decideConnection } from '../../../src/domain/at-run/egress-decision.ts';
import type { NetworkGrant } from '../../../src/domain/at-run/egress-grant.ts';
import {
  hostMatches,
  hostNameIssue,
  hostPatternIssue,
  intersectPatterns,
  looksLikeIp,
  splitHostPort,
} from '../../../src/domain/at-run/egress-host.ts';

const grant: NetworkGrant = {
  destinations: [
    { host: 'api.example.com', ports: [443] },
    { host: '*.example.org', ports: [80, 443] },
    { host: 'example.org', ports: [8443] },
  ],
  allowRanges: ['10.1.2.0/24', 'fd00:1::/64'],
  limits: { bytes: 1000, seconds: 10, connections: 2 },
};

describe('host names and patterns', () => {
  it.each([
    ['api.example.com', null],
    ['a', null],
    ['xn--bcher-kva.example', null],
    ['a-b.c-d.example', null],
    ['', 'must be 1 to 253 characters'],
    [`${'a'.repeat(64)}.com`, 'has a label'],
    [`${'a.'.repeat(127)}com`, 'must be 1 to 253 characters'],
    ['-a.example.com', 'has a label'],
    ['a-.example.com', 'has a label'],
    ['a..example.com', 'has a label'],
    ['API.example.com', 'has a label'],
    ['a_b.example.com', 'has a label'],
    ['example.com.', 'has a label'],
    ['1.2.3.4', 'is an IP address'],
    ['example.123', 'is an IP address'],
    ['0x7f.1', 'is an IP address'],
    ['2130706433', 'is an IP address'],
    ['example.0x', 'is an IP address'],
    ['::1', 'is an IP address'],
  ])('hostNameIssue(%j)', (name, issue) => {
    const got = hostNameIssue(name);
    if (issue === null) expect(got).toBeNull();
    else expect(got).toContain(issue);
  });

  it.each([
    ['*.example.com', null],
    ['*.a.b.example.com', null],
    ['api.example.com', null],
    ['*.com', 'at least two labels'],
    ['*', 'has a label'],
    ['*.*.example.com', 'one * only'],
    ['a.*.example.com', 'has a label'],
    ['*example.com', 'has a label'],
    ['*.1.2.3.4', 'is an IP address'],
  ])('hostPatternIssue(%j)', (pattern, issue) => {
    const got = hostPatternIssue(pattern);
    if (issue === null) expect(got).toBeNull();
    else expect(got).toContain(issue);
  });

  it.each([
    ['api.example.com', 'api.example.com', true],
    ['api.example.com', 'www.example.com', false],
    ['*.example.com', 'api.example.com', true],
    ['*.example.com', 'a.b.example.com', true],
    ['*.example.com', 'example.com', false],
    ['*.example.com', 'badexample.com', false],
    ['*.example.com', 'example.com.evil.net', false],
    ['*.example.com', '.example.com', false],
  ] as const)('hostMatches(%j, %j) is %s', (pattern, host, want) => {
    expect(hostMatches(pattern, host)).toBe(want);
  });

  it.each([
    ['api.example.com', 'api.example.com', 'api.example.com'],
    ['api.example.com', 'www.example.com', null],
    ['*.example.com', 'api.example.com', 'api.example.com'],
    ['api.example.com', '*.example.com', 'api.example.com'],
    ['*.example.com', 'example.com', null],
    ['*.example.com', '*.api.example.com', '*.api.example.com'],
    ['*.api.example.com', '*.example.com', '*.api.example.com'],
    ['*.example.com', '*.example.com', '*.example.com'],
    ['*.example.com', '*.example.org', null],
  ] as const)('intersectPatterns(%j, %j) is %j', (a, b, want) => {
    expect(intersectPatterns(a, b)).toBe(want);
  });

  it('splits host:port, with a valid port only', () => {
    expect(splitHostPort('api.example.com')).toEqual({ host: 'api.example.com' });
    expect(splitHostPort('api.example.com:8443')).toEqual({ host: 'api.example.com', port: 8443 });
    expect(splitHostPort('*.example.com:1')).toEqual({ host: '*.example.com', port: 1 });
    for (const bad of ['a.com:0', 'a.com:65536', 'a.com:080', 'a.com:', 'a.com:x', 'a.com:-1'])
      expect(splitHostPort(bad), bad).toBeNull();
  });

  it('sees every numeric form a URL parser would take as an address', () => {
    for (const ip of ['127.0.0.1', '[::1]', '0x7f.1', '127.1', '2130706433', 'a.0x7f'])
      expect(looksLikeIp(ip), ip).toBe(true);
    for (const name of ['api.example.com', '1a.example.com', 'example.x0']) expect(looksLikeIp(name), name).toBe(false);
  });
});

describe('checkTarget', () => {
  it.each([
    [{ host: 'api.example.com', port: 443 }, 'api.example.com'],
    [{ host: 'API.Example.COM', port: 443 }, 'api.example.com'],
    [{ host: 'api.example.com.', port: 443 }, 'api.example.com'],
    [{ host: 'www.example.org', port: 80 }, 'www.example.org'],
    [{ host: 'a.b.example.org', port: 443 }, 'a.b.example.org'],
    [{ host: 'example.org', port: 8443 }, 'example.org'],
  ])('allows %j', (target, host) => {
    expect(checkTarget(grant, target)).toEqual({ allow: true, host });
  });

  it.each([
    [{ host: '', port: 443 }, 'EGRESS_REQUEST_INVALID'],
    [{ host: 'api.example.com', port: 0 }, 'EGRESS_REQUEST_INVALID'],
    [{ host: 'api.example.com', port: 70000 }, 'EGRESS_REQUEST_INVALID'],
    [{ host: '127.0.0.1', port: 443 }, 'EGRESS_DIRECT_IP'],
    [{ host: '10.1.2.3', port: 443 }, 'EGRESS_DIRECT_IP'],
    [{ host: '[::1]', port: 443 }, 'EGRESS_DIRECT_IP'],
    [{ host: '::ffff:127.0.0.1', port: 443 }, 'EGRESS_DIRECT_IP'],
    [{ host: '0x7f.1', port: 443 }, 'EGRESS_DIRECT_IP'],
    [{ host: '2130706433', port: 443 }, 'EGRESS_DIRECT_IP'],
    [{ host: '169.254.169.254', port: 80 }, 'EGRESS_DIRECT_IP'],
    [{ host: 'www.example.com', port: 443 }, 'EGRESS_HOST_NOT_GRANTED'],
    [{ host: 'example.com', port: 443 }, 'EGRESS_HOST_NOT_GRANTED'],
    [{ host: 'api.example.com.evil.net', port: 443 }, 'EGRESS_HOST_NOT_GRANTED'],
    [{ host: 'evil-example.org', port: 443 }, 'EGRESS_HOST_NOT_GRANTED'],
    [{ host: 'a_b.example.org', port: 443 }, 'EGRESS_HOST_NOT_GRANTED'],
    [{ host: 'api.example.com..', port: 443 }, 'EGRESS_HOST_NOT_GRANTED'],
    [{ host: 'api.example.com', port: 80 }, 'EGRESS_PORT_NOT_GRANTED'],
    [{ host: 'example.org', port: 443 }, 'EGRESS_PORT_NOT_GRANTED'],
    [{ host: 'www.example.org', port: 8443 }, 'EGRESS_PORT_NOT_GRANTED'],
  ])('refuses %j with %s', (target, code) => {
    const d = checkTarget(grant, target);
    expect(d.allow).toBe(false);
    expect(d.allow === false && d.code).toBe(code);
  });
});

describe('decideConnection', () => {
  const target = { host: 'api.example.com', port: 443 };

  it.each([
    [['93.184.216.34'], '93.184.216.34', 4],
    [['93.184.216.34', '93.184.216.35'], '93.184.216.34', 4],
    [['2606:4700::1111', '1.1.1.1'], '2606:4700::1111', 6],
    [['10.1.2.7'], '10.1.2.7', 4],
    [['::ffff:10.1.2.7'], '::ffff:10.1.2.7', 6],
    [['fd00:1::9'], 'fd00:1::9', 6],
    [['1.1.1.1', '10.1.2.200'], '1.1.1.1', 4],
  ])('allows %j and connects to %s', (resolved, address, family) => {
    expect(decideConnection(grant, target, resolved)).toEqual({
      allow: true,
      host: 'api.example.com',
      address,
      family,
    });
  });

  it.each([
    [[], 'EGRESS_RESOLVE_FAILED'],
    [['127.0.0.1'], 'EGRESS_ADDRESS_FORBIDDEN'],
    [['::1'], 'EGRESS_ADDRESS_FORBIDDEN'],
    [['10.1.3.1'], 'EGRESS_ADDRESS_FORBIDDEN'],
    [['169.254.169.254'], 'EGRESS_ADDRESS_FORBIDDEN'],
    [['fd00:ec2::254'], 'EGRESS_ADDRESS_FORBIDDEN'],
    [['::ffff:169.254.169.254'], 'EGRESS_ADDRESS_FORBIDDEN'],
    [['::ffff:127.0.0.1'], 'EGRESS_ADDRESS_FORBIDDEN'],
    [['64:ff9b::7f00:1'], 'EGRESS_ADDRESS_FORBIDDEN'],
    [['fe80::1'], 'EGRESS_ADDRESS_FORBIDDEN'],
    [['fd00:2::1'], 'EGRESS_ADDRESS_FORBIDDEN'],
    [['0.0.0.0'], 'EGRESS_ADDRESS_FORBIDDEN'],
    [['::'], 'EGRESS_ADDRESS_FORBIDDEN'],
    [['224.0.0.1'], 'EGRESS_ADDRESS_FORBIDDEN'],
    [['255.255.255.255'], 'EGRESS_ADDRESS_FORBIDDEN'],
    [['100.64.0.1'], 'EGRESS_ADDRESS_FORBIDDEN'],
    [['192.0.2.1'], 'EGRESS_ADDRESS_FORBIDDEN'],
    [['198.18.0.1'], 'EGRESS_ADDRESS_FORBIDDEN'],
    [['240.0.0.1'], 'EGRESS_ADDRESS_FORBIDDEN'],
    [['not-an-address'], 'EGRESS_ADDRESS_FORBIDDEN'],
    // one bad answer among good ones refuses the name: the check covers every address, not the chosen one
    [['93.184.216.34', '127.0.0.1'], 'EGRESS_ADDRESS_FORBIDDEN'],
    [['10.1.2.7', '169.254.169.254'], 'EGRESS_ADDRESS_FORBIDDEN'],
  ])('refuses %j with %s', (resolved, code) => {
    const d = decideConnection(grant, target, resolved);
    expect(d.allow).toBe(false);
    expect(d.allow === false && d.code).toBe(code);
  });

  it('checks the target before the addresses', () => {
    const d = decideConnection(grant, { host: 'www.example.com', port: 443 }, ['93.184.216.34']);
    expect(d).toMatchObject({ allow: false, code: 'EGRESS_HOST_NOT_GRANTED' });
    expect(decideConnection(grant, { host: '1.1.1.1', port: 443 }, ['1.1.1.1'])).toMatchObject({
      code: 'EGRESS_DIRECT_IP',
    });
  });

  it('names the range of a forbidden address', () => {
    const d = decideConnection(grant, target, ['169.254.169.254']);
    expect(d.allow === false && d.reason).toContain('metadata (169.254.169.254/32)');
  });

  it('opens a forbidden range only through allowRanges, loopback included', () => {
    const loopback = { ...grant, allowRanges: ['127.0.0.0/8'] };
    expect(decideConnection(loopback, target, ['127.0.0.1'])).toMatchObject({ allow: true, address: '127.0.0.1' });
    expect(decideConnection(loopback, target, ['::1'])).toMatchObject({ code: 'EGRESS_ADDRESS_FORBIDDEN' });
    expect(decideConnection({ ...grant, allowRanges: [] }, target, ['10.1.2.7'])).toMatchObject({
      code: 'EGRESS_ADDRESS_FORBIDDEN',
    });
  });
});
