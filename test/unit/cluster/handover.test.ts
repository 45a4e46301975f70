// Hand-over of stop / kill / logs to the node that owns an instance, without a cluster: what a request and an
// answer look like (parseRequest, pendingRequests, answerError, boundLines), where a request goes (routeRequest),
// and the Handover class's protocol over a log in memory — the owner acts once, a refusal comes back typed, a
// lost lease (FENCED) leaves the answer to the new owner, a request past its deadline or already acted on is not
// acted on. `exec --node` is validated at the CLI's boundary. Real supervisors on PostgreSQL:
// test/int/cluster/cluster-handover-pg.test.ts.
import { describe, expect, it } from 'vitest';
import { actedOn, Handover, type HandoverDeps } from '../../../src/supervisor/cluster/handover.ts';
import { FencedError, RunlogError } from '../../../src/domain/errors.ts';
import type { RecordedEvent } from '../../../src/domain/events.ts';
import {
  answerError,
  boundLines,
  HANDOVER_ANSWERED,
  HANDOVER_REQUESTED,
  parseRequest,
  pendingRequests,
  routeRequest,
  type HandoverRequest,
} from '../../../src/domain/handover.ts';
import { capture } from '../../support/cli-in-process.ts';
import { main } from '../../../src/cli/main.ts';
import { fakeLog } from '../supervisor/fake-log.ts';

const T0 = Date.parse('2026-12-01T12:00:00.000Z');
const req = (over: Partial<HandoverRequest> = {}): HandoverRequest => ({
  requestId: 'r1',
  action: 'stop',
  instanceId: 'i1',
  graceMs: null,
  from: 'a',
  to: 'b',
  deadline: new Date(T0 + 60_000).toISOString(),
  ...over,
});

describe('hand-over requests and answers (pure)', () => {
  it('parseRequest takes a well-formed request and refuses anything else', () => {
    expect(parseRequest(req())).toEqual(req());
    expect(parseRequest({ ...req(), graceMs: undefined })).toEqual(req());
    expect(parseRequest(req({ graceMs: 250 }))).toMatchObject({ graceMs: 250 });
    for (const bad of [
      null,
      'x',
      { ...req(), action: 'restart' },
      { ...req(), graceMs: -1 },
      { ...req(), graceMs: 1.5 },
      { ...req(), deadline: 'soon' },
      { ...req(), requestId: '' },
      { ...req(), to: 7 },
    ]) {
      expect(parseRequest(bad), JSON.stringify(bad)).toBeNull();
    }
  });

  it('pendingRequests: requests without an answer whose deadline has not passed', () => {
    const events = [
      { type: HANDOVER_REQUESTED, data: req({ requestId: 'answered' }) },
      { type: HANDOVER_REQUESTED, data: req({ requestId: 'open' }) },
      { type: HANDOVER_REQUESTED, data: req({ requestId: 'late', deadline: new Date(T0 - 1).toISOString() }) },
      { type: HANDOVER_REQUESTED, data: { junk: true } },
      { type: 'placement.spawn-requested', data: { instanceId: 'x' } },
      { type: HANDOVER_ANSWERED, data: { requestId: 'answered', by: 'b', ok: true, state: 'stopped' } },
    ];
    expect(pendingRequests(events, T0).map((r) => r.requestId)).toEqual(['open']);
  });

  it('routeRequest: here when this node holds the lease; to a live owner; NODE_UNAVAILABLE when nobody or a dead node owns it', () => {
    const live = new Set(['a', 'b']);
    expect(routeRequest('i1', { node: 'a', expiresInMs: 100 }, live, 'a')).toEqual({ here: true });
    expect(routeRequest('i1', { node: 'b', expiresInMs: 100 }, live, 'a')).toEqual({ here: false, owner: 'b' });
    expect(() => routeRequest('i1', null, live, 'a')).toThrow(
      expect.objectContaining({ code: 'NODE_UNAVAILABLE', details: { id: 'i1', owner: null } }),
    );
    const dead = (() => {
      try {
        routeRequest('i1', { node: 'c', expiresInMs: 4200 }, live, 'a');
      } catch (err) {
        return err as RunlogError;
      }
      return null;
    })();
    expect(dead).toMatchObject({ code: 'NODE_UNAVAILABLE', details: { id: 'i1', owner: 'c' } });
    expect(dead!.message).toContain('its lease expires in 4200 ms');
    expect(() => routeRequest('i1', { node: 'c', expiresInMs: -5 }, live, 'a')).toThrow(
      /a live node is taking it over/,
    );
  });

  it("answerError gives the owner's typed error back; an unknown code is HANDOVER_FAILED", () => {
    expect(
      answerError({ requestId: 'r', by: 'b', ok: false, code: 'ILLEGAL_EVENT', message: 'i1 is stopped' }, 'i1'),
    ).toMatchObject({ code: 'ILLEGAL_EVENT', message: 'i1 is stopped', details: { id: 'i1', node: 'b' } });
    expect(answerError({ requestId: 'r', by: 'b', ok: false, code: 'NO_SUCH_THING', message: 'm' }, 'i1').code).toBe(
      'HANDOVER_FAILED',
    );
  });

  it('boundLines keeps the newest lines that fit', () => {
    const lines = Array.from({ length: 10 }, (_, i) => ({
      stream: 'stdout' as const,
      line: `line ${i}`,
      at: '2026-12-01T12:00:00.000Z',
    }));
    const one = JSON.stringify(lines[0]).length + 1;
    expect(boundLines(lines, one * 10)).toEqual({ lines, truncated: false });
    expect(boundLines(lines, one * 3 + 1)).toEqual({ lines: lines.slice(7), truncated: true });
    expect(boundLines([], 10)).toEqual({ lines: [], truncated: false });
  });

  it('actedOn finds the event a request appended by its id in meta', () => {
    const e = (meta: Record<string, unknown>) => ({ meta }) as unknown as RecordedEvent;
    expect(actedOn([e({}), e({ handover: 'r1' })], 'r1')).toBe(true);
    expect(actedOn([e({ handover: 'r2' })], 'r1')).toBe(false);
  });
});

/** The fake port log, with the appends Handover makes (at T0). */
function memoryLog() {
  const log = fakeLog();
  const append = (stream: string, list: { type: string; data: Record<string, unknown> }[]) => {
    for (const x of list) log.put(stream, x.type, x.data, true, new Date(T0).toISOString());
    return Promise.resolve();
  };
  return { store: log.store, events: log.events, append };
}

function node(name: string, log: ReturnType<typeof memoryLog>, over: Partial<HandoverDeps> = {}) {
  const acted: HandoverRequest[] = [];
  const messages: string[] = [];
  const h = new Handover({
    store: log.store,
    node: name,
    nowMs: () => T0,
    owns: () => false,
    appendFact: (stream, events) => log.append(stream, events),
    act: (r) => {
      acted.push(r);
      return Promise.resolve({ state: 'stopped' });
    },
    log: (m) => messages.push(m),
    ...over,
  });
  return { h, acted, messages };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

describe('Handover between two nodes over one log (in memory)', () => {
  it("the owner acts once and the caller gets its answer; the request and answer are on the owner's stream", async () => {
    const log = memoryLog();
    const a = node('a', log);
    const b = node('b', log, { owns: (s) => s === 'instance-i1' });
    await a.h.start();
    await b.h.start();
    const answer = await a.h.ask('b', 'stop', 'i1', 300, 10_000);
    expect(answer).toMatchObject({ ok: true, by: 'b', state: 'stopped' });
    expect(b.acted).toEqual([
      expect.objectContaining({ action: 'stop', instanceId: 'i1', graceMs: 300, from: 'a', to: 'b' }),
    ]);
    expect(a.acted).toEqual([]);
    expect(log.events.map((e) => [e.stream, e.type])).toEqual([
      ['placement-b', HANDOVER_REQUESTED],
      ['placement-b', HANDOVER_ANSWERED],
    ]);
    // Started again (a restart of b): an answered request is not taken again.
    const b2 = node('b', log, { owns: () => true });
    await b2.h.start();
    await tick();
    expect(b2.acted).toEqual([]);
  });

  it("a refusal comes back as the owner's typed error", async () => {
    const log = memoryLog();
    const a = node('a', log);
    const b = node('b', log, {
      owns: () => true,
      act: () =>
        Promise.reject(new RunlogError('ILLEGAL_EVENT', 'i1 is crashed: it cannot take instance.kill-requested')),
    });
    await a.h.start();
    await b.h.start();
    await expect(a.h.ask('b', 'kill', 'i1', null, 10_000)).rejects.toMatchObject({
      code: 'ILLEGAL_EVENT',
      message: 'i1 is crashed: it cannot take instance.kill-requested',
    });
  });

  it('nobody answers: HANDOVER_TIMEOUT, and a node that starts later does not act on the expired request', async () => {
    const log = memoryLog();
    let now = T0;
    const a = node('a', log, { nowMs: () => now });
    await expect(a.h.ask('b', 'stop', 'i1', null, 20)).rejects.toMatchObject({ code: 'HANDOVER_TIMEOUT' });
    now = T0 + 1000;
    const b = node('b', log, { owns: () => true, nowMs: () => now });
    await b.h.start();
    await tick();
    expect(b.acted).toEqual([]);
  });

  it(
    'an owner that lost the lease while acting (FENCED) does not answer; ' +
      'the survivor takes the pending request after its takeover is recorded',
    async () => {
      const log = memoryLog();
      const a = node('a', log);
      const b = node('b', log, { owns: () => true, act: () => Promise.reject(new FencedError('instance-i1', 'b')) });
      let cOwns = false;
      const c = node('c', log, { owns: () => cOwns });
      await a.h.start();
      await b.h.start();
      await c.h.start();
      const asked = a.h.ask('b', 'stop', 'i1', null, 10_000);
      await tick();
      expect(log.events.filter((e) => e.type === HANDOVER_ANSWERED)).toEqual([]);
      // c takes the lease over: while it records what it knows the request waits, then it acts.
      cOwns = true;
      c.h.taking(['instance-i1']);
      c.h.tookOver([]); // another takeover's end does not release this one
      await tick();
      expect(c.acted).toEqual([]);
      c.h.tookOver(['instance-i1']);
      await expect(asked).resolves.toMatchObject({ ok: true, by: 'c', state: 'stopped' });
      expect(c.acted).toHaveLength(1);
      expect(log.events.filter((e) => e.type === HANDOVER_ANSWERED)).toHaveLength(1);
    },
  );

  it('a node that does not hold the lease never acts', async () => {
    const log = memoryLog();
    const a = node('a', log);
    const b = node('b', log);
    await a.h.start();
    await b.h.start();
    await expect(a.h.ask('b', 'stop', 'i1', null, 30)).rejects.toMatchObject({ code: 'HANDOVER_TIMEOUT' });
    expect(b.acted).toEqual([]);
  });
});

describe('runlog exec --node (the boundary)', () => {
  it('a malformed node is NODE_INVALID (exit 2) before anything runs', async () => {
    const c = capture();
    const code = await main(
      ['exec', 'at://did:plc:abc/dev.mainasara.at-run.beta.v2.code/x', 'h', '--node', 'no such node!', '--json'],
      c.factory,
    );
    expect(code).toBe(2);
    expect(c.text()).toContain('NODE_INVALID');
  });
});
