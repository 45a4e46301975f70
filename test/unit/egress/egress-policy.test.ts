// The operator policy's `network` section (egress-policy.ts), the grant one execution gets from it and its code
// record's hosts (egress-grant.ts), and how admission turns that into EffectiveLimits.network (policy-admission.ts).
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../src/domain/errors.ts';
import { grantNetwork, parseGrant } from '../../../src/domain/at-run/egress-grant.ts';
import { DEFAULT_EGRESS_LIMITS, type NetworkPolicy } from '../../../src/domain/at-run/egress-policy.ts';
import { DEFAULT_OPERATOR_POLICY, parseOperatorPolicy } from '../../../src/domain/at-run/operator-policy.ts';
import { effectiveLimits } from '../../../src/domain/at-run/policy-admission.ts';

function issuesOf(value: unknown): string[] {
  try {
    parseOperatorPolicy(value);
  } catch (e) {
    expect(e).toBeInstanceOf(ValidationError);
    return [...(e as ValidationError).issues];
  }
  return [];
}

const network: NetworkPolicy = {
  destinations: [
    { host: 'api.example.com', ports: [443, 8443] },
    { host: '*.example.org', ports: [80, 443] },
  ],
  allowRanges: ['10.1.2.0/24'],
  limits: { bytes: 1_000_000, seconds: 30, connections: 4 },
};

describe('the policy network section', () => {
  it('defaults to no destinations, which is no network at all', () => {
    expect(DEFAULT_OPERATOR_POLICY.network).toEqual({
      destinations: [],
      allowRanges: [],
      limits: DEFAULT_EGRESS_LIMITS,
    });
    expect(parseOperatorPolicy({}).network).toEqual(DEFAULT_OPERATOR_POLICY.network);
    expect(() => effectiveLimits(parseOperatorPolicy({}), { network: true })).toThrow(
      expect.objectContaining({ code: 'NETWORK_NOT_ALLOWED' }),
    );
  });

  it('reads destinations, allowRanges and limits, omitted keys from the defaults, ports sorted', () => {
    const p = parseOperatorPolicy({
      network: { destinations: [{ host: 'api.example.com', ports: [8443, 443] }], allowRanges: ['127.0.0.0/8'] },
    });
    expect(p.network).toEqual({
      destinations: [{ host: 'api.example.com', ports: [443, 8443] }],
      allowRanges: ['127.0.0.0/8'],
      limits: DEFAULT_EGRESS_LIMITS,
    });
    expect(parseOperatorPolicy({ network }).network).toEqual(network);
    expect(parseOperatorPolicy({ network: { limits: { bytes: 5 } } }).network.limits).toEqual({
      ...DEFAULT_EGRESS_LIMITS,
      bytes: 5,
    });
    expect(Object.isFrozen(parseOperatorPolicy({ network }).network.destinations[0])).toBe(true);
  });

  it.each([
    [{ network: null }, 'network must be an object'],
    [{ network: [] }, 'network must be an object'],
    [{ network: { proxy: true } }, 'network.proxy is not a known setting'],
    [{ network: { destinations: {} } }, 'network.destinations must be an array'],
    [{ network: { destinations: ['api.example.com'] } }, 'network.destinations[0] must be an object'],
    [{ network: { destinations: [{ host: 'a.com', ports: [1], tls: true }] } }, 'network.destinations[0].tls is not'],
    [
      { network: { destinations: [{ host: 'A.com', ports: [1] }] } },
      'network.destinations[0].host "A.com" has a label',
    ],
    [{ network: { destinations: [{ host: '10.0.0.1', ports: [1] }] } }, 'is an IP address'],
    [{ network: { destinations: [{ host: '*.com', ports: [1] }] } }, 'at least two labels'],
    [{ network: { destinations: [{ host: 'a.com:443', ports: [1] }] } }, 'has a label'],
    [{ network: { destinations: [{ host: 'a.com' }] } }, 'network.destinations[0].ports must be a non-empty array'],
    [{ network: { destinations: [{ host: 'a.com', ports: [] }] } }, 'ports must be a non-empty array'],
    [{ network: { destinations: [{ host: 'a.com', ports: [0] }] } }, 'ports[0] must be an integer from 1 to 65535'],
    [{ network: { destinations: [{ host: 'a.com', ports: [65536] }] } }, 'ports[0] must be an integer'],
    [{ network: { destinations: [{ host: 'a.com', ports: ['443'] }] } }, 'ports[0] must be an integer'],
    [{ network: { destinations: [{ host: 'a.com', ports: [443, 443] }] } }, 'ports[1] 443 is listed twice'],
    [
      {
        network: {
          destinations: [
            { host: 'a.com', ports: [1] },
            { host: 'a.com', ports: [2] },
          ],
        },
      },
      'network.destinations[1].host a.com is listed twice',
    ],
    [{ network: { allowRanges: '10.0.0.0/8' } }, 'network.allowRanges must be an array'],
    [{ network: { allowRanges: ['10.0.0.1/8'] } }, 'host bits clear'],
    [{ network: { allowRanges: ['10.0.0.0'] } }, 'not a CIDR range'],
    [{ network: { allowRanges: ['0.0.0.0/0'] } }, 'wider than /8'],
    [{ network: { allowRanges: ['::/0'] } }, 'wider than /7'],
    [{ network: { allowRanges: ['::ffff:10.0.0.0/104'] } }, 'IPv4-mapped'],
    [{ network: { limits: { bytes: 0 } } }, 'network.limits.bytes must be an integer from 1 to'],
    [{ network: { limits: { seconds: 1.5 } } }, 'network.limits.seconds must be an integer'],
    [{ network: { limits: { connections: 100000 } } }, 'network.limits.connections must be an integer from 1 to 1024'],
    [{ network: { limits: { rate: 1 } } }, 'network.limits.rate is not a known setting'],
    [{ network: { limits: 5 } }, 'network.limits must be an object'],
  ])('refuses %j', (policy, issue) => {
    const issues = issuesOf(policy);
    expect(
      issues.some((i) => i.includes(issue)),
      `${issues.join('\n')}`,
    ).toBe(true);
  });

  it('lists every problem of the section at once', () => {
    const issues = issuesOf({
      network: {
        destinations: [{ host: 'a.com', ports: [0] }, { host: '*' }],
        allowRanges: ['x'],
        limits: { bytes: -1 },
      },
    });
    expect(issues).toHaveLength(5);
  });
});

describe('grantNetwork', () => {
  it('without hosts grants every policy destination, with the policy ranges and limits', () => {
    const g = grantNetwork(network);
    expect(g).toEqual({ ok: true, grant: network });
    expect(g.ok && g.grant.destinations).not.toBe(network.destinations);
  });

  it.each([
    [['api.example.com'], [{ host: 'api.example.com', ports: [443, 8443] }]],
    [['api.example.com:8443'], [{ host: 'api.example.com', ports: [8443] }]],
    [['API.Example.com:443'], [{ host: 'api.example.com', ports: [443] }]],
    [['www.example.org'], [{ host: 'www.example.org', ports: [80, 443] }]],
    [['a.b.example.org:80'], [{ host: 'a.b.example.org', ports: [80] }]],
    [['*.example.org'], [{ host: '*.example.org', ports: [80, 443] }]],
    [['*.api.example.org:443'], [{ host: '*.api.example.org', ports: [443] }]],
    [['*.example.com'], [{ host: 'api.example.com', ports: [443, 8443] }]],
    [
      ['api.example.com:443', 'api.example.com:8443', 'www.example.org:443'],
      [
        { host: 'api.example.com', ports: [443, 8443] },
        { host: 'www.example.org', ports: [443] },
      ],
    ],
    // a host the policy does not list is simply not granted when another is
    [['api.example.com', 'evil.example.net'], [{ host: 'api.example.com', ports: [443, 8443] }]],
  ])('%j is granted %j', (hosts, destinations) => {
    expect(grantNetwork(network, hosts)).toEqual({
      ok: true,
      grant: { destinations, allowRanges: network.allowRanges, limits: network.limits },
    });
  });

  it.each([
    [['evil.example.net']],
    [['example.org']],
    [['api.example.com:80']],
    [['www.example.org:8443']],
    [['*.net']],
    [['example.com']],
    [['not a host']],
  ])('%j meets no destination: NETWORK_GRANT_EMPTY', (hosts) => {
    const g = grantNetwork(network, hosts);
    expect(g).toMatchObject({ ok: false, code: 'NETWORK_GRANT_EMPTY' });
    expect(!g.ok && g.issues).toEqual([`${hosts[0]} is not among this runner's network destinations`]);
  });

  it('a policy without destinations allows nothing: NETWORK_NOT_ALLOWED', () => {
    expect(grantNetwork({ ...network, destinations: [] }, ['api.example.com'])).toMatchObject({
      ok: false,
      code: 'NETWORK_NOT_ALLOWED',
    });
  });
});

describe('admission', () => {
  const policy = parseOperatorPolicy({ network });

  it('gives no network to a record that does not ask, whatever the policy', () => {
    expect(effectiveLimits(policy, {}).limits.network).toBe(false);
    expect(effectiveLimits(policy, { network: false }).limits.network).toBe(false);
  });

  it('gives the grant to a record that asks', () => {
    expect(effectiveLimits(policy, { network: true }).limits.network).toEqual(network);
    expect(effectiveLimits(policy, { network: true, hosts: ['www.example.org:443'] }).limits.network).toEqual({
      ...network,
      destinations: [{ host: 'www.example.org', ports: [443] }],
    });
  });

  it('refuses with a typed code when nothing is granted, or the request is malformed', () => {
    const code = (requested: object) => {
      try {
        effectiveLimits(policy, requested);
      } catch (e) {
        return (e as ValidationError).code;
      }
      return 'none';
    };
    expect(code({ network: true, hosts: ['evil.example.net'] })).toBe('NETWORK_GRANT_EMPTY');
    expect(code({ hosts: ['api.example.com'] })).toBe('LIMIT_INVALID');
    expect(code({ network: 1 })).toBe('LIMIT_INVALID');
  });
});

describe('parseGrant', () => {
  it('reads a grant as the supervisor sends it', () => {
    expect(parseGrant(JSON.parse(JSON.stringify(network)))).toEqual({ grant: network });
  });

  it.each([
    [null, 'a grant must be an object'],
    [{ ...network, destinations: [] }, 'network.destinations must not be empty'],
    [{ destinations: network.destinations, limits: network.limits }, 'network.allowRanges is required'],
    [{ destinations: network.destinations, allowRanges: [] }, 'network.limits is required'],
    [{ ...network, extra: 1 }, 'network.extra is not a known setting'],
    [{ ...network, allowRanges: ['0.0.0.0/0'] }, 'wider than /8'],
  ])('refuses %j', (value, issue) => {
    const r = parseGrant(value);
    expect('issues' in r && r.issues.some((i) => i.includes(issue))).toBe(true);
  });
});
