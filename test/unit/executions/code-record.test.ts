// Code record validation (runtime binding, entrypoint, additions, requested limits) and its Lexicon.

import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import * as dagCbor from '@ipld/dag-cbor';
import { schemas } from '@atproto/api';
import { Lexicons, jsonToLex, parseLexiconDoc } from '@atproto/lexicon';
import { CID } from 'multiformats/cid';
import { sha256 } from 'multiformats/hashes/sha2';
import { beforeAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../../../src/domain/errors.ts';
import { RecordValidationError } from '../../../src/domain/at-run/record-violations.ts';
import {
  CODE_RECORD_NSID,
  assertCodeRecord,
  checkRuntimeBinding,
  runtimePublisherOf,
  validateCodeRecord,
  type CodeRecord,
} from '../../../src/domain/at-run/code-record.ts';
import { RUNTIME_RECORD_NSID } from '../../../src/domain/at-run/runtime-record.ts';

const REPO_ROOT = resolve(import.meta.dirname, '../../..');
const PUBLISHER = 'did:plc:runtimepublisher000000';
const RUNTIME_URI = `at://${PUBLISHER}/${RUNTIME_RECORD_NSID}/3lruntime`;
const F = 'c'.repeat(64);

let runtimeCid: string; // dag-cbor CIDv1 of a runtime record, as a PDS computes it
let blobCid: string; // raw CIDv1 of the code archive bytes
let otherCid: string;

beforeAll(async () => {
  const runtimeRecord = {
    $type: RUNTIME_RECORD_NSID,
    name: 'python',
    protocolVersion: 1,
    kind: 'language',
    platforms: [],
    createdAt: '2026-08-18T16:00:00Z',
  };
  runtimeCid = CID.create(1, dagCbor.code, await sha256.digest(dagCbor.encode(runtimeRecord))).toString();
  blobCid = CID.create(1, 0x55, await sha256.digest(new TextEncoder().encode('a tar archive'))).toString();
  otherCid = CID.create(1, dagCbor.code, await sha256.digest(dagCbor.encode({ other: true }))).toString();
});

function code(over: Record<string, unknown> = {}): CodeRecord {
  return {
    $type: CODE_RECORD_NSID,
    runtime: 'python',
    runtimeRecord: { uri: RUNTIME_URI, cid: runtimeCid },
    blob: { $type: 'blob', ref: { $link: blobCid }, mimeType: `application/${runtimeCid}`, size: 10240 },
    entrypoint: 'src/main.py',
    additions: [`localhost:5000/additions/ffmpeg@sha256:${F}`],
    requested: { network: false, memoryMb: 256, cpus: 1, pids: 64, timeoutMs: 5000 },
    handlers: ['main', 'other_one'],
    description: 'hello',
    createdAt: '2026-08-18T16:00:00.000Z',
    ...over,
  } as CodeRecord;
}
const codes = (value: unknown): string[] => validateCodeRecord(value).violations.map((v) => v.code);

describe('a valid code record', () => {
  it('passes and names its runtime publisher', () => {
    const check = validateCodeRecord(code());
    expect(check).toMatchObject({ ok: true, violations: [], runtimePublisher: PUBLISHER });
    expect(assertCodeRecord(code()).entrypoint).toBe('src/main.py');
    expect(runtimePublisherOf(code())).toBe(PUBLISHER);
  });

  it('accepts the optional fields being absent, and a decoded CID object as blob.ref', () => {
    expect(codes(code({ additions: undefined, requested: undefined, description: undefined }))).toEqual([]);
    expect(
      codes(code({ blob: { $type: 'blob', ref: CID.parse(blobCid), mimeType: `application/${runtimeCid}`, size: 1 } })),
    ).toEqual([]);
  });
});

describe('each rule has its own code', () => {
  it('CODE_HANDLERS_INVALID: a non-empty list of distinct identifiers, when present', () => {
    expect(codes(code({ handlers: undefined }))).toEqual([]);
    expect(codes(code({ handlers: [] }))).toEqual(['CODE_HANDLERS_INVALID']);
    expect(codes(code({ handlers: 'main' }))).toEqual(['CODE_HANDLERS_INVALID']);
    expect(codes(code({ handlers: ['main', 'main'] }))).toEqual(['CODE_HANDLERS_INVALID']);
    expect(codes(code({ handlers: ['a-b', 3] }))).toEqual(['CODE_HANDLERS_INVALID', 'CODE_HANDLERS_INVALID']);
  });

  it('CODE_MIME_MISMATCH: blob.mimeType must be exactly application/<runtimeRecord.cid>', () => {
    expect(
      codes(code({ blob: { $type: 'blob', ref: { $link: blobCid }, mimeType: `application/${otherCid}`, size: 1 } })),
    ).toEqual(['CODE_MIME_MISMATCH']);
    expect(
      codes(code({ blob: { $type: 'blob', ref: { $link: blobCid }, mimeType: 'application/x-tar', size: 1 } })),
    ).toEqual(['CODE_MIME_MISMATCH']);
    expect(
      codes(
        code({
          blob: {
            $type: 'blob',
            ref: { $link: blobCid },
            mimeType: `application/${runtimeCid.toUpperCase()}`,
            size: 1,
          },
        }),
      ),
    ).toEqual(['CODE_MIME_MISMATCH']);
    expect(
      codes(
        code({ blob: { $type: 'blob', ref: { $link: blobCid }, mimeType: `application/${runtimeCid} `, size: 1 } }),
      ),
    ).toEqual(['CODE_MIME_MISMATCH']);
  });

  it('CODE_RUNTIME_REF_INVALID: a strong ref to a V2 runtime record, with a canonical dag-cbor CID', () => {
    expect(
      codes(
        code({ runtimeRecord: { uri: `at://${PUBLISHER}/dev.mainasara.at-run.beta.v2.code/3l`, cid: runtimeCid } }),
      ),
    ).toEqual(['CODE_RUNTIME_REF_INVALID']);
    expect(
      codes(code({ runtimeRecord: { uri: `at://alice.example.com/${RUNTIME_RECORD_NSID}/3l`, cid: runtimeCid } })),
    ).toEqual(['CODE_RUNTIME_REF_INVALID']);
    expect(
      codes(
        code({
          runtimeRecord: { uri: RUNTIME_URI, cid: blobCid },
          blob: { $type: 'blob', ref: { $link: blobCid }, mimeType: `application/${blobCid}`, size: 1 },
        }),
      ),
    ).toEqual(['CODE_RUNTIME_REF_INVALID']);
    expect(new Set(codes(code({ runtimeRecord: { uri: RUNTIME_URI, cid: 'not-a-cid' } })))).toEqual(
      new Set(['CODE_RUNTIME_REF_INVALID', 'CODE_MIME_MISMATCH']),
    );
    expect(codes(code({ runtimeRecord: RUNTIME_URI }))).toContain('CODE_RUNTIME_REF_INVALID');
  });

  it('CODE_BLOB_INVALID: a blob ref to a raw sha256 CID with a positive size', () => {
    expect(
      codes(
        code({ blob: { $type: 'blob', ref: { $link: runtimeCid }, mimeType: `application/${runtimeCid}`, size: 1 } }),
      ),
    ).toEqual(['CODE_BLOB_INVALID']);
    expect(
      codes(code({ blob: { $type: 'blob', ref: { $link: blobCid }, mimeType: `application/${runtimeCid}`, size: 0 } })),
    ).toEqual(['CODE_BLOB_INVALID']);
    expect(codes(code({ blob: { cid: blobCid, mimeType: `application/${runtimeCid}` } }))).toContain(
      'CODE_BLOB_INVALID',
    );
  });

  it('CODE_ENTRYPOINT_INVALID: a safe canonical relative path', () => {
    for (const entrypoint of [
      '/src/main.py',
      '../main.py',
      'src/../../main.py',
      './main.py',
      'src//main.py',
      'src/',
      '',
      'a\u0000b',
      'a\\b',
      7,
    ]) {
      expect(codes(code({ entrypoint })), JSON.stringify(entrypoint)).toEqual(['CODE_ENTRYPOINT_INVALID']);
    }
  });

  it('CODE_ADDITION_NOT_DIGEST: additions are digest-pinned', () => {
    expect(codes(code({ additions: ['ffmpeg:latest'] }))).toEqual(['CODE_ADDITION_NOT_DIGEST']);
    expect(codes(code({ additions: [`ffmpeg:6@sha256:${F}`] }))).toEqual(['CODE_ADDITION_NOT_DIGEST']);
    expect(codes(code({ additions: [`a@sha256:${F}`, `a@sha256:${F}`] }))).toEqual(['CODE_RECORD_INVALID']);
    expect(codes(code({ additions: Array.from({ length: 9 }, (_, i) => `a${i}@sha256:${F}`) }))).toEqual([
      'CODE_RECORD_INVALID',
    ]);
  });

  it('CODE_REQUESTED_INVALID: integers within bounds, network a boolean, nothing else', () => {
    for (const requested of [
      { memoryMb: 0 },
      { memoryMb: 1.5 },
      { cpus: 0.5 },
      { pids: -1 },
      { timeoutMs: '10' },
      { network: 'yes' },
      { gpus: 1 },
      'all',
    ]) {
      expect(codes(code({ requested })), JSON.stringify(requested)).toEqual(['CODE_REQUESTED_INVALID']);
    }
    // Asking for network is a valid record; the operator policy decides (NETWORK_NOT_ALLOWED without destinations).
    expect(codes(code({ requested: { network: true } }))).toEqual([]);
  });

  it('CODE_REQUESTED_INVALID: hosts are distinct host[:port] names or patterns, with network: true', () => {
    const hosts = ['api.example.com', 'api.example.com:8443', '*.example.org', '*.example.org:443', 'a'];
    expect(codes(code({ requested: { network: true, hosts } }))).toEqual([]);
    for (const requested of [
      { hosts: ['api.example.com'] },
      { network: false, hosts: ['api.example.com'] },
      { network: true, hosts: [] },
      { network: true, hosts: 'api.example.com' },
      { network: true, hosts: Array.from({ length: 33 }, (_, i) => `h${i}.example.com`) },
      { network: true, hosts: ['api.example.com', 'api.example.com'] },
      { network: true, hosts: ['API.example.com'] },
      { network: true, hosts: ['api.example.com:0'] },
      { network: true, hosts: ['api.example.com:65536'] },
      { network: true, hosts: ['127.0.0.1'] },
      { network: true, hosts: ['[::1]:443'] },
      { network: true, hosts: ['*.com'] },
      { network: true, hosts: ['*'] },
      { network: true, hosts: [42] },
    ]) {
      expect(codes(code({ requested })), JSON.stringify(requested)).toEqual(['CODE_REQUESTED_INVALID']);
    }
    const check = validateCodeRecord(code({ requested: { network: true, hosts: ['ok.example.com', 'bad_host'] } }));
    expect(check.violations.map((v) => v.path)).toEqual(['requested.hosts[1]']);
  });

  it('CODE_RECORD_INVALID: shape, $type, runtime name, createdAt, unknown fields', () => {
    expect(codes(null)).toEqual(['CODE_RECORD_INVALID']);
    expect(codes(code({ $type: RUNTIME_RECORD_NSID }))).toEqual(['CODE_RECORD_INVALID']);
    expect(codes(code({ runtime: 'Python 3' }))).toEqual(['CODE_RECORD_INVALID']);
    expect(codes(code({ createdAt: 'yesterday' }))).toEqual(['CODE_RECORD_INVALID']);
    expect(codes(code({ image: `evil@sha256:${F}` }))).toEqual(['CODE_RECORD_INVALID']);
    expect(codes(code({ exportPath: '/' }))).toEqual(['CODE_RECORD_INVALID']);
  });

  it('collects every problem of a record at once', () => {
    const check = validateCodeRecord(
      code({
        runtime: '',
        entrypoint: '/x',
        additions: ['x:latest'],
        requested: { cpus: 0 },
        blob: { $type: 'blob', ref: { $link: blobCid }, mimeType: 'text/plain', size: 1 },
      }),
    );
    expect(new Set(check.violations.map((v) => v.code))).toEqual(
      new Set([
        'CODE_RECORD_INVALID',
        'CODE_ENTRYPOINT_INVALID',
        'CODE_ADDITION_NOT_DIGEST',
        'CODE_REQUESTED_INVALID',
        'CODE_MIME_MISMATCH',
      ]),
    );
    expect(() => assertCodeRecord(code({ entrypoint: '/x', runtime: '' }))).toThrow(RecordValidationError);
  });
});

describe('checkRuntimeBinding', () => {
  it('passes when the fetched runtime record is the one pinned by the code record and its blob', () => {
    expect(() => checkRuntimeBinding(code(), { uri: RUNTIME_URI, cid: runtimeCid })).not.toThrow();
  });

  it('throws RUNTIME_BINDING_MISMATCH when the PDS returns another version', () => {
    let err: unknown;
    try {
      checkRuntimeBinding(code(), { uri: RUNTIME_URI, cid: otherCid });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as RecordValidationError).code).toBe('RUNTIME_BINDING_MISMATCH');
    expect((err as RecordValidationError).violations.map((v) => v.path)).toEqual([
      'runtimeRecord.cid',
      'blob.mimeType',
    ]);
  });
});

describe('the Lexicon matches the type', () => {
  const doc = JSON.parse(
    readFileSync(resolve(REPO_ROOT, 'lexicons/dev.mainasara.at-run.beta.v2.code.json'), 'utf8'),
  ) as Record<string, any>;
  const strongRef = schemas.find((s) => s.id === 'com.atproto.repo.strongRef')!;
  const lex = new Lexicons([doc as any, strongRef]);

  it('is a valid Lexicon (format 1) for the code NSID', () => {
    expect(doc.lexicon).toBe(1);
    expect(doc.id).toBe(CODE_RECORD_NSID);
    expect(() => parseLexiconDoc(doc)).not.toThrow();
  });

  it('accepts what our validator accepts, field for field', () => {
    const value = code();
    lex.assertValidRecord(CODE_RECORD_NSID, jsonToLex(JSON.parse(JSON.stringify(value))));
    expect(
      Object.keys(value)
        .filter((k) => k !== '$type')
        .sort(),
    ).toEqual(Object.keys(doc.defs.main.record.properties).sort());
    const requested = { ...value.requested!, network: true, hosts: ['api.example.com', '*.example.org:443'] };
    lex.assertValidRecord(CODE_RECORD_NSID, jsonToLex(JSON.parse(JSON.stringify(code({ requested })))));
    expect(validateCodeRecord(code({ requested })).ok).toBe(true);
    expect(Object.keys(requested).sort()).toEqual(Object.keys(doc.defs.requested.properties).sort());
  });

  it('requires what our validator requires, and refuses fractional CPUs as we do', () => {
    for (const field of doc.defs.main.record.required as string[]) {
      const value = JSON.parse(JSON.stringify(code({ [field]: undefined })));
      expect(() => lex.assertValidRecord(CODE_RECORD_NSID, jsonToLex(value)), field).toThrow();
      expect(validateCodeRecord(value).ok, field).toBe(false);
    }
    const half = JSON.parse(JSON.stringify(code({ requested: { cpus: 0.5 } })));
    expect(() => lex.assertValidRecord(CODE_RECORD_NSID, jsonToLex(half))).toThrow();
    expect(validateCodeRecord(half).ok).toBe(false);
  });
});
