// The latency helpers of the execution supervisor: the code prefetch (handed out once, only for the blob and
// entrypoint it was started for) and the resolution hints (bounded, newest resolution wins).
import { describe, expect, it } from 'vitest';
import { CodePrefetch, type PreparedCode } from '../../../src/supervisor/executions/code-prefetch.ts';
import { ResolutionHints } from '../../../src/supervisor/executions/resolution-hints.ts';

const prepared = (cid: string): PreparedCode => ({ cid, size: 3, entries: 1, archive: Buffer.from('tar') });

describe('code prefetch', () => {
  it('hands out what was started, once, and only for the same key', async () => {
    const p = new CodePrefetch();
    p.start('exec_1', 'k1', async () => prepared('bafyA'));
    expect(p.take('exec_1', 'other-key')).toBeNull(); // a different blob or entrypoint: never this result
    p.start('exec_1', 'k1', async () => prepared('bafyA'));
    await expect(p.take('exec_1', 'k1')).resolves.toMatchObject({ cid: 'bafyA' });
    expect(p.take('exec_1', 'k1')).toBeNull();
    expect(p.size).toBe(0);
  });

  it('a later start for the same execution replaces the earlier one', async () => {
    const p = new CodePrefetch();
    p.start('exec_1', 'hint', async () => prepared('bafyOld'));
    p.start('exec_1', 'record', async () => prepared('bafyNew'));
    expect(p.take('exec_1', 'hint')).toBeNull();
    p.start('exec_1', 'record', async () => prepared('bafyNew'));
    await expect(p.take('exec_1', 'record')).resolves.toMatchObject({ cid: 'bafyNew' });
  });

  it('a failure is kept for take() (never an unhandled rejection), and drop() forgets it', async () => {
    const p = new CodePrefetch();
    p.start('exec_1', 'k', async () => {
      throw Object.assign(new Error('bytes do not match'), { code: 'BLOB_CID_MISMATCH' });
    });
    await expect(p.take('exec_1', 'k')).rejects.toMatchObject({ code: 'BLOB_CID_MISMATCH' });
    p.start('exec_2', 'k', async () => {
      throw new Error('never taken');
    });
    p.drop('exec_2');
    expect(p.size).toBe(0);
    await new Promise((r) => setTimeout(r, 10)); // an unhandled rejection would fail the run here
  });
});

describe('resolution hints', () => {
  const hint = (n: number) => ({
    author: 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa',
    runtimeUri: `at://rt/${n}`,
    blobCid: `bafy${n}`,
    entrypoint: 'index.mjs',
  });

  it('remember the newest resolution of a URI, bounded, least recently resolved forgotten first', () => {
    const h = new ResolutionHints(2);
    h.set('at://a', hint(1));
    h.set('at://b', hint(2));
    h.set('at://a', hint(3)); // a is now the most recent
    h.set('at://c', hint(4));
    expect(h.size).toBe(2);
    expect(h.get('at://b')).toBeUndefined();
    expect(h.get('at://a')).toEqual(hint(3));
    expect(h.get('at://c')).toEqual(hint(4));
  });

  it('keep a copy: changing the object given does not change the hint', () => {
    const h = new ResolutionHints();
    const x = hint(1);
    h.set('at://a', x);
    x.blobCid = 'changed';
    expect(h.get('at://a')!.blobCid).toBe('bafy1');
  });
});
