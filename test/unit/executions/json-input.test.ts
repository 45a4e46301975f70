import { describe, expect, it } from 'vitest';
import { checkExecuteRequest } from '../../../src/domain/at-run/execute-request.ts';
import { DEFAULT_OPERATOR_POLICY, parseOperatorPolicy } from '../../../src/domain/at-run/operator-policy.ts';
import { RunlogError, ValidationError } from '../../../src/domain/errors.ts';
import { checkJsonInput, nestedDeeperThan } from '../../../src/domain/json-input.ts';

const limits = { maxBytes: 1024 * 1024, maxDepth: 128 };

function nested(levels: number): unknown {
  const top: unknown[] = [];
  let cur = top;
  for (let i = 1; i < levels; i++) {
    const next: unknown[] = [];
    cur.push(next);
    cur = next;
  }
  return top;
}

function thrown(fn: () => unknown): RunlogError {
  try {
    fn();
  } catch (err) {
    return err as RunlogError;
  }
  throw new Error('did not throw');
}

describe('checkJsonInput', () => {
  it('returns the exact UTF-8 size of the JSON encoding of plain values', () => {
    const samples: unknown[] = [
      null,
      true,
      false,
      0,
      -1.5e-7,
      'héllo "w" \n ✓ 😀',
      [],
      {},
      [1, [2, [3]], { a: null }],
      { 'k y': 'v', n: 12, nested: { arr: [true, false, 'x'] }, dropped: undefined },
      Object.assign(Object.create(null) as object, { a: 1 }),
    ];
    for (const v of samples) expect(checkJsonInput(v, limits)).toBe(Buffer.byteLength(JSON.stringify(v)));
  });

  it('refuses a value nested deeper than the limit — 5,000 and 200,000 levels — without overflowing the stack', () => {
    for (const levels of [129, 5000, 200_000]) {
      const e = thrown(() => checkJsonInput(nested(levels), limits));
      expect(e).toBeInstanceOf(ValidationError);
      expect(e.code).toBe('INPUT_INVALID');
      expect(e.message).toMatch(/deeper than 128 levels/);
      expect((e as ValidationError).issues).toHaveLength(1);
    }
    expect(checkJsonInput(nested(128), limits)).toBe(256);
  });

  it(
    'refuses BigInt, cycles, functions, symbols, NaN, Infinity, ' +
      'undefined at the top or in arrays, and non-plain objects, naming each',
    () => {
      const cyclic: Record<string, unknown> = { a: 1 };
      cyclic.self = cyclic;
      const e = thrown(() =>
        checkJsonInput(
          {
            big: 10n,
            cyclic,
            fn: () => 1,
            sym: Symbol('s'),
            nan: NaN,
            inf: [Infinity],
            hole: [undefined],
            map: new Map(),
            when: new Date(0),
          },
          limits,
        ),
      ) as ValidationError;
      expect(e.code).toBe('INPUT_INVALID');
      expect(e.issues.join('\n')).toMatch(/input\.big is a BigInt/);
      expect(e.issues.join('\n')).toMatch(/input\.cyclic\.self refers back to one of its own ancestors/);
      expect(e.issues.join('\n')).toMatch(/input\.fn is a function/);
      expect(e.issues.join('\n')).toMatch(/input\.sym is a symbol/);
      expect(e.issues.join('\n')).toMatch(/input\.nan is NaN/);
      expect(e.issues.join('\n')).toMatch(/input\.inf\[0\] is Infinity/);
      expect(e.issues.join('\n')).toMatch(/input\.hole\[0\] is undefined/);
      expect(e.issues.join('\n')).toMatch(/input\.map is a Map/);
      expect(e.issues.join('\n')).toMatch(/input\.when is a Date.*toISOString/);
      expect(thrown(() => checkJsonInput(undefined, limits)).code).toBe('INPUT_INVALID');
      expect(thrown(() => checkJsonInput(5n, limits)).code).toBe('INPUT_INVALID');
    },
  );

  it('accepts a shared (non-cyclic) subtree, and refuses one whose encoding would explode, after bounded work', () => {
    const leaf = { x: 'y' };
    expect(checkJsonInput({ a: leaf, b: leaf }, limits)).toBe(JSON.stringify({ a: leaf, b: leaf }).length);
    // 2^60 copies of one leaf once encoded: refused as too large, not walked to the end (nor encoded).
    let v: unknown = 'leaf';
    for (let i = 0; i < 60; i++) v = [v, v];
    const e = thrown(() => checkJsonInput(v, limits));
    expect(e.code).toBe('INPUT_TOO_LARGE');
  });

  it('refuses an input whose encoding is larger than maxBytes with INPUT_TOO_LARGE', () => {
    expect(thrown(() => checkJsonInput({ s: 'x'.repeat(2048) }, { maxBytes: 2048, maxDepth: 8 })).code).toBe(
      'INPUT_TOO_LARGE',
    );
    expect(checkJsonInput({ s: 'x'.repeat(2030) }, { maxBytes: 2048, maxDepth: 8 })).toBe(2038);
  });

  it('a getter that throws makes the value unreadable: INPUT_INVALID, not a crash', () => {
    const v = {
      get boom(): never {
        throw new Error('nope');
      },
    };
    expect(thrown(() => checkJsonInput(v, limits)).code).toBe('INPUT_INVALID');
  });
});

describe('nestedDeeperThan (the event store bounds every event with it)', () => {
  it('counts nesting as JSON encodes it: exact at the bound, 200,000 levels without overflowing the stack', () => {
    expect(nestedDeeperThan(nested(128), 128)).toBe(false);
    expect(nestedDeeperThan(nested(129), 128)).toBe(true);
    expect(nestedDeeperThan(nested(200_000), 1024)).toBe(true);
    expect(nestedDeeperThan({ a: [1, { b: [{ c: null }] }], d: 'x' }, 5)).toBe(false);
    expect(nestedDeeperThan({ a: [1, { b: [{ c: [] }] }] }, 5)).toBe(true);
    expect(nestedDeeperThan('scalar', 0)).toBe(false);
    expect(nestedDeeperThan({}, 0)).toBe(true);
  });

  it('a shared subtree counts at every depth it appears, and is walked once (a 1,000-level DAG of 2^1000 paths ends)', () => {
    let node: unknown = [];
    for (let i = 1; i < 1000; i++) node = { left: node, right: node };
    expect(nestedDeeperThan(node, 1000)).toBe(false);
    expect(nestedDeeperThan(node, 999)).toBe(true);
    // Met first at a shallow depth, then again deeper: the second path decides.
    const shared = nested(10);
    expect(nestedDeeperThan({ near: shared, far: [[[shared]]] }, 13)).toBe(true);
    expect(nestedDeeperThan({ near: shared, far: [[[shared]]] }, 14)).toBe(false);
  });

  it('leaves to JSON.stringify what it refuses or rewrites itself: a cycle, a value with toJSON', () => {
    const cyclic: Record<string, unknown> = { a: { b: 1 } };
    cyclic.self = cyclic;
    expect(nestedDeeperThan(cyclic, 2)).toBe(false);
    expect(nestedDeeperThan({ at: new Date(0) }, 1)).toBe(false);
  });

  it('answers the same on either side of its quick check for small values (32 levels, 1,024 containers)', () => {
    for (const levels of [31, 32, 33, 64]) {
      expect(nestedDeeperThan(nested(levels), 32)).toBe(levels > 32);
      expect(nestedDeeperThan(nested(levels), 40)).toBe(levels > 40);
    }
    const wide = Array.from({ length: 2000 }, (_, i) => ({ i, tags: [i] }));
    expect(nestedDeeperThan(wide, 3)).toBe(false);
    expect(nestedDeeperThan(wide, 2)).toBe(true);
    expect(nestedDeeperThan([...wide, nested(40)], 40)).toBe(true);
    expect(nestedDeeperThan([...wide, nested(39)], 40)).toBe(false);
    const cyclic: unknown[] = [[[]]];
    cyclic.push(cyclic);
    expect(nestedDeeperThan(cyclic, 32)).toBe(false);
  });
});

describe('checkExecuteRequest', () => {
  const ok = { uri: 'at://did:plc:abc/dev.mainasara.at-run.beta.v2.code/x', handler: 'greet' };
  it('types every field problem with its own code', () => {
    expect(thrown(() => checkExecuteRequest(null, limits)).code).toBe('EXECUTE_INVALID');
    expect(thrown(() => checkExecuteRequest({ ...ok, uri: 'https://x' }, limits)).code).toBe('AT_URI_INVALID');
    expect(thrown(() => checkExecuteRequest({ ...ok, handler: 'a-b' }, limits)).code).toBe('HANDLER_INVALID');
    expect(thrown(() => checkExecuteRequest({ ...ok, callerDid: 'bob' }, limits)).code).toBe('CALLER_DID_INVALID');
    for (const t of [0, -1, 1.5, NaN, 10n, '100', 25 * 3600_000])
      expect(thrown(() => checkExecuteRequest({ ...ok, timeoutMs: t }, limits)).code).toBe('TIMEOUT_INVALID');
    expect(thrown(() => checkExecuteRequest({ ...ok, input: { n: 1n } }, limits)).code).toBe('INPUT_INVALID');
    expect(thrown(() => checkExecuteRequest({ ...ok, input: 'x'.repeat(limits.maxBytes) }, limits)).code).toBe(
      'INPUT_TOO_LARGE',
    );
  });

  it('returns a private copy of the input: changing the caller object afterwards changes nothing', () => {
    const input = { name: 'Ada' };
    const r = checkExecuteRequest({ ...ok, input }, limits);
    (input as Record<string, unknown>).big = 1n;
    expect(r.input).toEqual({ name: 'Ada' });
    expect(r).toMatchObject({ callerDid: null, timeoutMs: null, inputBytes: 14 });
    expect(checkExecuteRequest(ok, limits).input).toBeNull();
  });

  it('reads the input once: a getter that answers the check with "ok" and a later read with 20 MB stores "ok"', () => {
    let reads = 0;
    const input = {
      get text(): string {
        reads += 1;
        return reads === 1 ? 'ok' : 'x'.repeat(20 * 1024 * 1024);
      },
    };
    const r = checkExecuteRequest({ ...ok, input }, DEFAULT_OPERATOR_POLICY.input);
    expect(reads).toBe(1);
    expect(r.input).toEqual({ text: 'ok' });
    // What is stored encodes to exactly the bytes that were checked.
    expect(Buffer.byteLength(JSON.stringify(r.input))).toBe(r.inputBytes);
    expect(r.inputBytes).toBe(13);
  });

  it("reads an array Proxy's length and items once: one growing after the check stores what was checked", () => {
    let lengthReads = 0;
    const input = new Proxy(['a', 'b'], {
      get(target, key, receiver) {
        if (key === 'length') return ++lengthReads === 1 ? 2 : 2_000_000;
        return Reflect.get(target, key, receiver) as unknown;
      },
    });
    const r = checkExecuteRequest({ ...ok, input }, DEFAULT_OPERATOR_POLICY.input);
    expect(r.input).toEqual(['a', 'b']);
    expect(Buffer.byteLength(JSON.stringify(r.input))).toBe(r.inputBytes);
  });

  it('keeps a "__proto__" key as a key of the copy, as JSON.parse would', () => {
    const input = JSON.parse('{"__proto__":{"polluted":true},"a":1}') as unknown;
    const r = checkExecuteRequest({ ...ok, input }, limits);
    expect(JSON.stringify(r.input)).toBe('{"__proto__":{"polluted":true},"a":1}');
    expect(Object.getPrototypeOf(r.input)).toBe(Object.prototype);
    expect(Buffer.byteLength(JSON.stringify(r.input))).toBe(r.inputBytes);
  });
});

describe('operator policy: input limits and frame bounds', () => {
  it('defaults: 1 MiB / 128 levels of input; a frame bound below the stdout bound', () => {
    expect(DEFAULT_OPERATOR_POLICY.input).toEqual({ maxBytes: 1024 * 1024, maxDepth: 128 });
    expect(DEFAULT_OPERATOR_POLICY.ceilings.frameBytes).toBeLessThan(DEFAULT_OPERATOR_POLICY.ceilings.stdoutBytes);
    expect(DEFAULT_OPERATOR_POLICY.ceilings.frameDepth).toBe(128);
  });

  it('parses input limits and refuses bad ones, listing each', () => {
    expect(parseOperatorPolicy({ input: { maxBytes: 4096 } }).input).toEqual({ maxBytes: 4096, maxDepth: 128 });
    const e = thrown(() =>
      parseOperatorPolicy({ input: { maxBytes: 0, maxDepth: 5000, extra: 1 } }),
    ) as ValidationError;
    expect(e.code).toBe('OPERATOR_POLICY_INVALID');
    expect(e.issues).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/input\.extra/),
        expect.stringMatching(/input\.maxBytes/),
        expect.stringMatching(/input\.maxDepth/),
      ]),
    );
  });
});
