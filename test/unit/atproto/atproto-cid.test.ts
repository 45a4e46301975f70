// CID computation against the atproto interop data-model fixtures (test/fixtures/interop/data-model),
// and an independent blob-CID construction (multihash bytes assembled and base32-encoded by hand).

import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../src/domain/errors.ts';
import {
  cidForBlobBytes,
  cidForCborBytes,
  cidForRecordJson,
  decodeRecordCbor,
  encodeRecordJson,
  sameCid,
  sha256Hex,
} from '../../../src/adapters/atproto/index.ts';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const dataModelDir = join(repoRoot, 'test', 'fixtures', 'interop', 'data-model');
const load = <T>(file: string): T => JSON.parse(readFileSync(join(dataModelDir, file), 'utf8')) as T;

const fixtures =
  load<{ json: Record<string, unknown>; cbor_base64: string; cid: string }[]>('data-model-fixtures.json');
const valid = load<{ note: string; json: unknown }[]>('data-model-valid.json');
const invalid = load<{ note: string; json: unknown }[]>('data-model-invalid.json');

describe('record CIDs against data-model-fixtures.json', () => {
  it('has the 3 fixtures', () => expect(fixtures).toHaveLength(3));

  it.each(fixtures.map((f, i) => [i, f] as const))('fixture %i: dag-cbor bytes and CID match', (_i, f) => {
    const bytes = encodeRecordJson(f.json);
    expect(Buffer.from(bytes).toString('base64').replace(/=+$/, '')).toBe(f.cbor_base64.replace(/=+$/, ''));
    expect(cidForRecordJson(f.json)).toBe(f.cid);
    expect(cidForCborBytes(Buffer.from(f.cbor_base64, 'base64'))).toBe(f.cid);
  });

  it.each(fixtures.map((f, i) => [i, f] as const))('fixture %i: decoding the CBOR gives back the JSON', (_i, f) => {
    expect(decodeRecordCbor(Buffer.from(f.cbor_base64, 'base64'))).toEqual(f.json);
  });
});

describe('data model validation', () => {
  it.each(valid.map((v) => [v.note, v.json] as const))('accepts: %s', (_note, json) => {
    expect(cidForRecordJson(json)).toMatch(/^bafyrei[a-z2-7]+$/);
  });

  it.each(invalid.map((v) => [v.note, v.json] as const))('rejects: %s', (_note, json) => {
    let caught: unknown;
    try {
      encodeRecordJson(json);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ValidationError);
    expect((caught as ValidationError).code).toBe('DATA_MODEL_INVALID');
  });

  it('lists every problem in one error', () => {
    try {
      encodeRecordJson({ a: 1.5, b: { $link: 'nope' }, c: { $type: '' } });
      expect.unreachable();
    } catch (err) {
      expect((err as ValidationError).issues).toHaveLength(3);
    }
  });
});

// RFC 4648 base32, lowercase, no padding (multibase 'b').
function base32(bytes: Uint8Array): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz234567';
  let bits = 0;
  let value = 0;
  let out = '';
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += alphabet[(value << (5 - bits)) & 31];
  return out;
}

describe('blob CIDs (raw codec 0x55, sha256)', () => {
  const byHand = (bytes: Uint8Array) => {
    const digest = createHash('sha256').update(bytes).digest();
    return `b${base32(Uint8Array.from([0x01, 0x55, 0x12, 0x20, ...digest]))}`;
  };

  it('matches a CIDv1 assembled by hand', () => {
    for (const bytes of [
      new Uint8Array(),
      new TextEncoder().encode('hello at-run'),
      Uint8Array.from({ length: 5000 }, (_, i) => i % 251),
    ]) {
      expect(cidForBlobBytes(bytes)).toBe(byHand(bytes));
    }
  });

  it('gives the well-known CID of the empty blob', () => {
    expect(cidForBlobBytes(new Uint8Array())).toBe('bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku');
  });

  it('changes when one byte changes', () => {
    const a = new TextEncoder().encode('code archive');
    const b = Uint8Array.from(a);
    b[0] = b[0]! ^ 1;
    expect(cidForBlobBytes(a)).not.toBe(cidForBlobBytes(b));
  });
});

describe('helpers', () => {
  it('sha256Hex hashes strings and bytes alike', () => {
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(sha256Hex(new TextEncoder().encode('abc'))).toBe(sha256Hex('abc'));
  });

  it('sameCid compares CIDs, not spellings', () => {
    const cid = fixtures[0]!.cid;
    expect(sameCid(cid, cid)).toBe(true);
    expect(sameCid(cid, fixtures[1]!.cid)).toBe(false);
    expect(sameCid(cid, 'not-a-cid')).toBe(false);
  });
});
