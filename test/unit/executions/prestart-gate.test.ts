// When the pool's next sandbox starts: at once for calls one (or two) at a time, after the burst for a burst;
// and never for a runtime whose publisher the operator does not trust to pre-start.
import { describe, expect, it } from 'vitest';
import { PrestartGate } from '../../../src/supervisor/executions/pool/prestart-gate.ts';
import { DEFAULT_OPERATOR_POLICY } from '../../../src/domain/at-run/operator-policy.ts';
import { mayPrestart } from '../../../src/domain/at-run/policy-admission.ts';

type Target = { key: string; publisher: string; n: number };
const TRUSTED = 'did:plc:operator';
const target = (key: string, n = 0, publisher = TRUSTED): Target => ({ key, publisher, n });

function gate(policy: { publishers: string[] } = { publishers: [TRUSTED] }) {
  const started: Target[] = [];
  return {
    g: new PrestartGate<Target>((t) => started.push(t), { trusts: (did) => mayPrestart(policy, did) }),
    started,
  };
}

describe('prestart gate', () => {
  it('one call at a time: the next sandbox starts as soon as the call answers', () => {
    const { g, started } = gate();
    g.begin('e1');
    expect(started).toEqual([]);
    g.answered('e1', target('k'));
    expect(started).toEqual([target('k')]);
    g.begin('e2');
    g.answered('e2', target('k'));
    expect(started).toHaveLength(2);
  });

  it('two overlapping calls: the first to answer pre-starts while the other runs', () => {
    const { g, started } = gate();
    g.begin('e1');
    g.begin('e2');
    g.answered('e1', target('k'));
    expect(started).toEqual([target('k')]);
  });

  it('a burst: nothing starts while 2 or more are unanswered, then one start per key, the newest target', () => {
    const { g, started } = gate();
    for (let i = 0; i < 5; i++) g.begin(`e${i}`);
    g.answered('e0', target('a', 0));
    g.answered('e1', target('b', 1));
    g.answered('e2', target('a', 2));
    expect(started).toEqual([]);
    expect(g.deferred).toBe(2);
    g.answered('e3', target('a', 3)); // one left unanswered: the burst is over
    expect(started).toEqual([target('a', 3), target('b', 1)]);
    expect(g.deferred).toBe(0);
    g.answered('e4', target('b', 4));
    expect(started).toEqual([target('a', 3), target('b', 1), target('b', 4)]);
  });

  it('an execution that ends without answering (failed resolution, cancelled) stops counting, and lets the deferred start', () => {
    const { g, started } = gate();
    g.begin('e1');
    g.begin('e2');
    g.begin('e3');
    g.answered('e1', target('k'));
    expect(started).toEqual([]);
    g.ended('e2');
    expect(started).toEqual([target('k')]);
    g.ended('e2'); // already gone: nothing again
    g.ended('unknown');
    expect(started).toHaveLength(1);
  });

  it('an answer without a target (pre-starting off, or nothing to start) only counts the execution out', () => {
    const { g, started } = gate();
    g.begin('e1');
    g.answered('e1');
    expect(started).toEqual([]);
    expect(g.deferred).toBe(0);
  });

  it('under the default policy nothing is pre-started: a runtime publisher must be trusted by name', () => {
    const { g, started } = gate(DEFAULT_OPERATOR_POLICY.prestart);
    g.begin('e1');
    g.answered('e1', target('k', 0, 'did:plc:author'));
    g.begin('e2');
    g.answered('e2', target('k', 1, TRUSTED));
    expect(started).toEqual([]);
    expect(g.deferred).toBe(0);
    expect(g.untrusted).toBe(2);
  });

  it("a trusted publisher's runtime pre-starts and another's does not, in the same burst", () => {
    const { g, started } = gate();
    for (const e of ['e1', 'e2', 'e3', 'e4']) g.begin(e);
    g.answered('e1', target('mine', 1));
    g.answered('e2', target('theirs', 2, 'did:plc:author'));
    expect(g.deferred).toBe(1);
    g.answered('e3');
    g.answered('e4');
    expect(started).toEqual([target('mine', 1)]);
    expect(g.untrusted).toBe(1);
  });

  it('"*" written by the operator trusts every publisher', () => {
    const { g, started } = gate({ publishers: ['*'] });
    g.begin('e1');
    g.answered('e1', target('k', 0, 'did:plc:author'));
    expect(started).toEqual([target('k', 0, 'did:plc:author')]);
    expect(g.untrusted).toBe(0);
  });
});
