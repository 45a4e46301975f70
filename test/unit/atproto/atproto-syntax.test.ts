// AT URI / identifier syntax against the atproto interop fixtures (test/fixtures/interop/syntax).
// Fixture lines are used exactly as written: only empty lines and lines starting with '#' are skipped.

import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../src/domain/errors.ts';
import {
  isValidDid,
  isValidHandle,
  isValidNsid,
  isValidRecordKey,
  parseAtUri,
  parseRecordUri,
} from '../../../src/adapters/atproto/index.ts';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const syntaxDir = join(repoRoot, 'test', 'fixtures', 'interop', 'syntax');

function cases(file: string): string[] {
  return readFileSync(join(syntaxDir, file), 'utf8')
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('#'));
}

describe('parseAtUri against interop aturi fixtures', () => {
  const valid = cases('aturi_syntax_valid.txt');
  const invalid = cases('aturi_syntax_invalid.txt');

  it('has the fixture counts the index documents', () => {
    expect(valid.length).toBe(23);
    expect(invalid.length).toBe(72);
  });

  it.each(valid.map((u) => [u.length > 80 ? `${u.slice(0, 77)}…` : u, u]))('accepts %s', (_label, uri) => {
    const parsed = parseAtUri(uri);
    expect(parsed.uri).toBe(uri);
    expect(`at://${[parsed.authority, parsed.collection, parsed.rkey].filter((x) => x !== undefined).join('/')}`).toBe(
      uri,
    );
    expect(Boolean(parsed.did) !== Boolean(parsed.handle)).toBe(true);
  });

  it.each(invalid.map((u) => [JSON.stringify(u.length > 80 ? `${u.slice(0, 77)}…` : u), u]))(
    'rejects %s',
    (_label, uri) => {
      let caught: unknown;
      try {
        parseAtUri(uri);
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(ValidationError);
      expect((caught as ValidationError).code).toBe('AT_URI_INVALID');
    },
  );
});

describe('parseRecordUri', () => {
  it('splits a record URI into did, collection and rkey', () => {
    expect(parseRecordUri('at://did:plc:asdf123/com.atproto.feed.post/3kabc')).toEqual({
      uri: 'at://did:plc:asdf123/com.atproto.feed.post/3kabc',
      authority: 'did:plc:asdf123',
      did: 'did:plc:asdf123',
      collection: 'com.atproto.feed.post',
      rkey: '3kabc',
    });
  });

  it('keeps a handle authority apart from DIDs (lowercased)', () => {
    const p = parseRecordUri('at://Alice.Test/dev.mainasara.at-run.beta.v2.code/hello');
    expect(p.did).toBeUndefined();
    expect(p.handle).toBe('alice.test');
  });

  it('requires collection and rkey', () => {
    expect(() => parseRecordUri('at://did:plc:asdf123/com.atproto.feed.post')).toThrow(/does not name a record/);
    expect(() => parseRecordUri('at://did:plc:asdf123')).toThrow(ValidationError);
  });

  it('lists every problem, not only the first', () => {
    try {
      parseAtUri('at://name/short/%zz');
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ValidationError);
      expect((err as ValidationError).issues).toHaveLength(3);
    }
  });
});

describe('identifier validators against interop fixtures', () => {
  const table: [string, (s: string) => boolean][] = [
    ['did', isValidDid],
    ['handle', isValidHandle],
    ['nsid', isValidNsid],
    ['recordkey', isValidRecordKey],
  ];
  for (const [name, fn] of table) {
    it(`${name}: accepts every valid case and rejects every invalid one`, () => {
      const valid = cases(`${name}_syntax_valid.txt`);
      const invalid = cases(`${name}_syntax_invalid.txt`);
      expect(valid.length).toBeGreaterThan(3);
      expect(invalid.length).toBeGreaterThan(3);
      expect(valid.filter((s) => !fn(s))).toEqual([]);
      expect(invalid.filter((s) => fn(s))).toEqual([]);
    });
  }
});
