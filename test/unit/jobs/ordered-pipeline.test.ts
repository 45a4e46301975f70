// The ordered pipeline on its own: prepares side by side up to its limit, commits one at a time in push order, and
// once stopped or failed commits nothing more and leaves the rest where it stands.
import { describe, expect, it } from 'vitest';
import { OrderedPipeline } from '../../../src/supervisor/jobs/ordered-pipeline.ts';

interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(err: unknown): void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

/** A pipeline whose prepares wait for the test to settle them, one deferred per item. */
function harness(limit: number, commit?: (item: number) => Promise<boolean>) {
  const prepares = new Map<number, Deferred<string>>();
  const committed: string[] = [];
  const failures: unknown[] = [];
  const heads: (number | undefined)[] = [];
  const pipeline: OrderedPipeline<number, string> = new OrderedPipeline<number, string>({
    limit,
    prepare: (item) => {
      const d = deferred<string>();
      prepares.set(item, d);
      return d.promise;
    },
    commit: async (item, prepared) => {
      committed.push(`${item}:${prepared}`);
      return commit ? commit(item) : true;
    },
    committed: async () => void heads.push(pipeline.head()),
    failed: (err) => void failures.push(err),
  });
  return { pipeline, prepares, committed, failures, heads };
}

describe('the ordered pipeline', () => {
  it('prepares up to its limit side by side, and push waits for room while that many are held', async () => {
    const h = harness(3);
    for (const i of [1, 2, 3]) expect(await h.pipeline.push(i)).toBe(true);
    await tick();
    expect([...h.prepares.keys()]).toEqual([1, 2, 3]);
    let fourth = false;
    const pushed = h.pipeline.push(4).then((ok) => (fourth = ok));
    await tick();
    expect(fourth).toBe(false);
    expect(h.prepares.has(4)).toBe(false);
    h.prepares.get(1)!.resolve('a');
    await pushed;
    expect(fourth).toBe(true);
    expect(h.pipeline.size).toBe(3);
  });

  it('commits in push order when the prepares end in the reverse order', async () => {
    const h = harness(4);
    for (const i of [1, 2, 3, 4]) await h.pipeline.push(i);
    await tick();
    for (const i of [4, 3, 2]) {
      h.prepares.get(i)!.resolve(`p${i}`);
      await tick();
      expect(h.committed).toEqual([]);
    }
    h.prepares.get(1)!.resolve('p1');
    await h.pipeline.drain();
    expect(h.committed).toEqual(['1:p1', '2:p2', '3:p3', '4:p4']);
    expect(h.pipeline.size).toBe(0);
  });

  it('calls committed once the item left, with the next one at the head', async () => {
    const h = harness(4);
    for (const i of [1, 2, 3]) await h.pipeline.push(i);
    for (const i of [1, 2, 3]) h.prepares.get(i)!.resolve('x');
    await h.pipeline.drain();
    expect(h.heads).toEqual([2, 3, undefined]);
  });

  it('stops at a commit that returns false: that item and the ones after it stay, and nothing more is taken', async () => {
    const h = harness(4, async (item) => item !== 2);
    for (const i of [1, 2, 3]) await h.pipeline.push(i);
    for (const i of [1, 2, 3]) h.prepares.get(i)!.resolve('x');
    await h.pipeline.drain();
    expect(h.committed).toEqual(['1:x', '2:x']);
    expect(h.pipeline.head()).toBe(2);
    expect(h.pipeline.size).toBe(2);
    expect(h.pipeline.open).toBe(false);
    expect(await h.pipeline.push(4)).toBe(false);
    expect(h.failures).toEqual([]);
  });

  it('once stopped commits nothing more, lets a waiting push go, and waits for the prepares under way', async () => {
    const h = harness(2);
    for (const i of [1, 2]) await h.pipeline.push(i);
    const waiting = h.pipeline.push(3);
    let stopped = false;
    const stopping = h.pipeline.stop().then(() => (stopped = true));
    expect(await waiting).toBe(false);
    h.prepares.get(1)!.resolve('x');
    await tick();
    expect(stopped).toBe(false); // the second prepare is still under way
    h.prepares.get(2)!.reject(new Error('late'));
    await stopping;
    expect(h.committed).toEqual([]);
    expect(h.pipeline.size).toBe(2);
    expect(h.failures).toEqual([]);
  });

  it('waits for the commit under way when stopped, and moves nothing past it', async () => {
    const gate = deferred<boolean>();
    const h = harness(4, (item) => (item === 1 ? gate.promise : Promise.resolve(true)));
    for (const i of [1, 2]) await h.pipeline.push(i);
    for (const i of [1, 2]) h.prepares.get(i)!.resolve('x');
    await tick();
    let stopped = false;
    const stopping = h.pipeline.stop().then(() => (stopped = true));
    await tick();
    expect(stopped).toBe(false);
    gate.resolve(true);
    await stopping;
    expect(h.committed).toEqual(['1:x']);
    expect(h.pipeline.head()).toBe(1);
    expect(h.heads).toEqual([]);
  });

  it('fails at the turn of an item whose prepare rejected, after the ones before it are committed', async () => {
    const h = harness(4);
    for (const i of [1, 2, 3]) await h.pipeline.push(i);
    const boom = new Error('the store is gone');
    h.prepares.get(2)!.reject(boom);
    await tick();
    expect(h.failures).toEqual([]);
    h.prepares.get(3)!.resolve('x');
    h.prepares.get(1)!.resolve('x');
    await h.pipeline.drain();
    expect(h.committed).toEqual(['1:x']);
    expect(h.failures).toEqual([boom]);
    expect(h.pipeline.head()).toBe(2);
    expect(await h.pipeline.push(4)).toBe(false);
  });

  it('fails once when a commit throws, and commits nothing after it', async () => {
    const h = harness(4, async (item) => {
      if (item === 1) throw new Error('conflict');
      return true;
    });
    for (const i of [1, 2]) await h.pipeline.push(i);
    for (const i of [1, 2]) h.prepares.get(i)!.resolve('x');
    await h.pipeline.drain();
    expect(h.committed).toEqual(['1:x']);
    expect(h.failures).toHaveLength(1);
    expect(h.pipeline.size).toBe(2);
  });

  it('refuses a limit that is not a positive integer', () => {
    const options = { prepare: async () => 0, commit: async () => true };
    expect(() => new OrderedPipeline({ ...options, limit: 0 })).toThrow(/positive integer/);
    expect(() => new OrderedPipeline({ ...options, limit: 1.5 })).toThrow(/positive integer/);
  });
});
