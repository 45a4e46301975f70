// The did:web fetch policy, decided before any request is made (these cases never touch the network).
import { describe, expect, it } from 'vitest';
import { isLoopbackOrLinkLocal, resolveDid } from '../../../src/adapters/atproto/identity.ts';
import { codeOf } from '../../support/errors.ts';

describe('did:web fetch policy', () => {
  it('classifies loopback and link-local addresses (v4, v6, v4-mapped)', () => {
    for (const a of [
      '127.0.0.1',
      '127.8.9.10',
      '169.254.169.254',
      '0.0.0.0',
      '::1',
      '[::1]',
      'fe80::1',
      '::ffff:127.0.0.1',
      '::ffff:169.254.1.1',
      '::',
    ])
      expect(isLoopbackOrLinkLocal(a)).toBe(true);
    for (const a of ['10.0.0.1', '192.168.1.1', '8.8.8.8', '2001:db8::1', '::ffff:8.8.8.8', 'example.com'])
      expect(isLoopbackOrLinkLocal(a)).toBe(false);
  });

  it('refuses loopback and link-local hosts unless the operator allows them', async () => {
    for (const did of [
      'did:web:localhost',
      'did:web:localhost%3A8080',
      'did:web:foo.localhost',
      'did:web:127.0.0.1',
      'did:web:169.254.169.254',
      'did:web:%5B%3A%3A1%5D',
    ]) {
      expect(await codeOf(resolveDid(did, { timeoutMs: 500 })), did).toBe('DID_WEB_HOST_REFUSED');
    }
  });
});
