// The egress proxy's settings (src/adapters/egress/proxy/config.ts): flags over environment, defaults, the token
// from a file or the environment and never in a message, every problem listed.
import { describe, expect, it } from 'vitest';
import { parseConfig, parseHostPort } from '../../../src/adapters/egress/proxy/config.ts';

const TOKEN = 'a-token-of-sixteen-or-more';
const noFile = (path: string): string => {
  throw Object.assign(new Error(`no ${path}`), { code: 'ENOENT' });
};

describe('parseConfig', () => {
  it('takes defaults for all but the resolver and the token', () => {
    expect(parseConfig([], { EGRESS_RESOLVER: '10.0.0.2', EGRESS_TOKEN: TOKEN }, noFile)).toEqual({
      config: {
        control: { host: '127.0.0.1', port: 3130 },
        proxyPort: 3128,
        dnsPort: 53,
        resolvers: ['10.0.0.2'],
        token: TOKEN,
        resolveTimeoutMs: 5000,
        connectTimeoutMs: 10_000,
        maxReports: 10_000,
        maxReportsPerGrant: 2000,
      },
    });
  });

  it('reads flags over the environment, and the token from a file', () => {
    const r = parseConfig(
      [
        '--control',
        '[::1]:9000',
        '--proxy-port=0',
        '--dns-port',
        '5353',
        '--resolver',
        '1.1.1.1,[2606:4700::1111]:53,2001:db8::1',
        '--token-file',
        '/run/token',
      ],
      { EGRESS_PROXY_PORT: '8080', EGRESS_TOKEN: 'ignored-because-a-file-is-named' },
      (path) => (path === '/run/token' ? `${TOKEN}\n` : noFile(path)),
    );
    expect(r).toMatchObject({
      config: {
        control: { host: '::1', port: 9000 },
        proxyPort: 0,
        dnsPort: 5353,
        resolvers: ['1.1.1.1', '[2606:4700::1111]:53', '2001:db8::1'],
        token: TOKEN,
      },
    });
  });

  it('lists every problem, and never the token', () => {
    const r = parseConfig(
      ['--control', 'localhost:1', '--proxy-port', '70000', '--bogus', '--resolver', 'dns.example', '--dns-port'],
      { EGRESS_TOKEN: 'short-secret' },
      noFile,
    );
    expect('problems' in r && r.problems).toEqual([
      'unknown argument "--bogus"',
      '--dns-port needs a value',
      'EGRESS_CONTROL must be ip:port or interface:port with an IPv4 address (got "localhost:1")',
      'EGRESS_RESOLVER "dns.example" is not ip, ip:port or [ipv6]:port',
      'the control token (EGRESS_TOKEN_FILE or EGRESS_TOKEN) must be 16 characters or more',
      'EGRESS_PROXY_PORT must be an integer from 0 to 65535 (got "70000")',
    ]);
    expect(JSON.stringify(r)).not.toContain('short-secret');
    const missing = parseConfig(['--token-file', '/nope'], {}, noFile);
    expect('problems' in missing && missing.problems).toEqual([
      'EGRESS_RESOLVER (--resolver) is required: the resolvers the proxy asks',
      'cannot read the token file /nope: ENOENT',
      'the control token (EGRESS_TOKEN_FILE or EGRESS_TOKEN) must be 16 characters or more',
    ]);
  });
});

describe('the control address given by interface', () => {
  it("binds the control API to the interface's IPv4 address at start, and refuses an interface without one", () => {
    const env = { EGRESS_RESOLVER: '10.0.0.2', EGRESS_TOKEN: TOKEN };
    const addressOf = (iface: string) => (iface === 'eth0' ? '172.30.0.2' : undefined);
    const r = parseConfig(['--control', 'eth0:3130'], env, noFile, addressOf);
    expect('config' in r && r.config.control).toEqual({ host: '172.30.0.2', port: 3130 });
    const none = parseConfig(['--control', 'eth1:3130'], env, noFile, addressOf);
    expect('problems' in none && none.problems).toEqual([
      'EGRESS_CONTROL must be ip:port or interface:port with an IPv4 address (got "eth1:3130")',
    ]);
  });
});

describe('parseHostPort', () => {
  it.each([
    ['127.0.0.1:80', undefined, { host: '127.0.0.1', port: 80 }],
    ['[::1]:80', undefined, { host: '::1', port: 80 }],
    ['127.0.0.1', 53, { host: '127.0.0.1', port: 53 }],
    ['::1', 53, { host: '::1', port: 53 }],
    ['127.0.0.1', undefined, null],
    ['localhost:80', undefined, null],
    ['127.0.0.1:99999', undefined, null],
    ['[::1]', undefined, null],
  ])('%s (default port %s)', (text, port, want) => {
    expect(parseHostPort(text, port)).toEqual(want);
  });
});
