// One grant inside the egress proxy (src/adapters/egress/proxy/grant-state.ts) and the report ring
// (reports.ts): connections counted against the limits, the byte budget never overspent, every flow cut when a
// limit is reached, each step reported once, and the ring bounded with its losses told.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createGrantState, type Flow } from '../../../src/adapters/egress/proxy/grant-state.ts';
import { createReportLog } from '../../../src/adapters/egress/proxy/reports.ts';
import type { NetworkGrant } from '../../../src/domain/at-run/egress-grant.ts';

const grant: NetworkGrant = {
  destinations: [{ host: 'api.example.com', ports: [443] }],
  allowRanges: [],
  limits: { bytes: 100, seconds: 5, connections: 2 },
};

function setup(maxReports = 100) {
  const reports = createReportLog(1000, () => new Date('2030-01-01T00:00:00Z'));
  const state = createGrantState({ key: 'exec-1', address: '127.0.0.2', grant, reports, maxReports });
  const destroyed: string[] = [];
  const open = (name: string): Flow => {
    const f = state.begin('connect', name, 443, () => destroyed.push(name));
    if (!('phase' in f)) throw new Error(`refused: ${f.code}`);
    return f;
  };
  const all = async () => (await reports.read({ after: 0, limit: 1000, waitMs: 0 })).reports;
  return { reports, state, destroyed, open, all };
}

beforeEach(() => vi.useFakeTimers());
afterEach(() => vi.useRealTimers());

describe('a grant', () => {
  it('reports a flow allowed then closed, with its bytes and address', async () => {
    const { state, open, all } = setup();
    const f = open('api.example.com');
    state.allow(f, '93.184.216.34');
    expect(state.charge(f, 'up', 10)).toBe(true);
    expect(state.charge(f, 'down', 20)).toBe(true);
    state.end(f);
    state.end(f);
    expect((await all()).map((r) => [r.seq, r.decision, r.address, r.bytesUp, r.bytesDown, r.at])).toEqual([
      [1, 'allowed', '93.184.216.34', 0, 0, '2030-01-01T00:00:00.000Z'],
      [2, 'closed', '93.184.216.34', 10, 20, '2030-01-01T00:00:00.000Z'],
    ]);
    expect(state.usage).toMatchObject({ bytesUp: 10, bytesDown: 20, connections: 1, refused: 0, stopped: null });
  });

  it('holds the connection limit, counting flows still resolving', () => {
    const { state, open } = setup();
    const a = open('a');
    open('b');
    expect(state.begin('http', 'c', 80, () => {})).toMatchObject({ code: 'EGRESS_CONNECTIONS_EXCEEDED' });
    state.refuse(a, 'EGRESS_HOST_NOT_GRANTED', 'no');
    expect('phase' in state.begin('http', 'c', 80, () => {})).toBe(true);
  });

  it('never overspends the bytes: the chunk that would is refused and every flow is cut', async () => {
    const { state, open, destroyed, all } = setup();
    const a = open('a');
    const b = open('b');
    state.allow(a, '1.1.1.1');
    expect(state.charge(a, 'down', 90)).toBe(true);
    expect(state.charge(a, 'up', 11)).toBe(false);
    expect(destroyed.sort()).toEqual(['a', 'b']);
    expect(state.usage).toMatchObject({ bytesUp: 0, bytesDown: 90, stopped: 'EGRESS_BYTES_EXCEEDED', refused: 1 });
    expect((await all()).slice(1).map((r) => [r.host, r.decision, r.code])).toEqual([
      ['a', 'cut', 'EGRESS_BYTES_EXCEEDED'],
      ['b', 'refused', 'EGRESS_BYTES_EXCEEDED'],
    ]);
    expect(state.charge(b, 'up', 1)).toBe(false);
    expect(state.begin('http', 'c', 80, () => {})).toMatchObject({ code: 'EGRESS_BYTES_EXCEEDED' });
  });

  it('cuts every flow when its time is up, and refuses new ones', async () => {
    const { state, open, destroyed, all } = setup();
    const a = open('a');
    state.allow(a, '1.1.1.1');
    vi.advanceTimersByTime(4999);
    expect(destroyed).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(destroyed).toEqual(['a']);
    expect((await all()).at(-1)).toMatchObject({ decision: 'cut', code: 'EGRESS_TIME_EXCEEDED' });
    expect(state.begin('http', 'c', 80, () => {})).toMatchObject({ code: 'EGRESS_TIME_EXCEEDED' });
  });

  it('stops: flows closed, clock stopped, usage returned', async () => {
    const { state, open, destroyed } = setup();
    state.allow(open('a'), '1.1.1.1');
    const usage = state.stop('removed');
    expect(destroyed).toEqual(['a']);
    expect(usage.closedAt).toBe(new Date().toISOString());
    vi.advanceTimersByTime(10_000);
    expect(state.usage.stopped).toBeNull();
  });

  it('counts the reports past its report limit instead of making them', async () => {
    const { state, all } = setup(3);
    for (let i = 0; i < 5; i++) state.refuseAttempt('dns', `q${i}.example`, 53, 'EGRESS_DNS_REFUSED', 'no');
    expect((await all()).map((r) => r.host)).toEqual(['q0.example', 'q1.example', 'q2.example']);
    expect(state.usage).toMatchObject({ dnsQueries: 5, unreported: 2 });
  });
});

describe('the report ring', () => {
  const add = (log: ReturnType<typeof createReportLog>, key: string) =>
    log.add({ executionKey: key, kind: 'http', host: 'h', port: 80, decision: 'refused' });

  it('pages after a seq, by key, and tells what it lost', async () => {
    vi.useRealTimers();
    const log = createReportLog(3);
    for (const k of ['a', 'b', 'a', 'b', 'a']) add(log, k);
    expect(await log.read({ after: 0, limit: 10, waitMs: 0 })).toMatchObject({ next: 5, lost: 2 });
    expect((await log.read({ after: 2, limit: 10, waitMs: 0 })).reports.map((r) => r.seq)).toEqual([3, 4, 5]);
    expect(await log.read({ after: 3, limit: 1, waitMs: 0 })).toMatchObject({
      reports: [{ seq: 4 }],
      next: 4,
      lost: 0,
    });
    const byKey = await log.read({ after: 2, limit: 10, waitMs: 0, key: 'a' });
    expect(byKey.reports.map((r) => r.seq)).toEqual([3, 5]);
    expect(byKey.next).toBe(5);
    expect(await log.read({ after: 5, limit: 10, waitMs: 0 })).toEqual({ reports: [], next: 5, lost: 0 });
  });

  it('waits for the next report, or until its time is up, or the ring closes', async () => {
    vi.useRealTimers();
    const log = createReportLog(10);
    const waiting = log.read({ after: 0, limit: 10, waitMs: 5000 });
    add(log, 'a');
    expect((await waiting).reports.map((r) => r.seq)).toEqual([1]);
    const start = Date.now();
    expect((await log.read({ after: 1, limit: 10, waitMs: 50 })).reports).toEqual([]);
    expect(Date.now() - start).toBeGreaterThanOrEqual(40);
    const other = log.read({ after: 1, limit: 10, waitMs: 5000, key: 'b' });
    add(log, 'a');
    const closing = log.read({ after: 2, limit: 10, waitMs: 60_000 });
    log.close();
    expect(await closing).toEqual({ reports: [], next: 2, lost: 0 });
    expect(await other).toMatchObject({ reports: [], next: 2 });
  });
});
