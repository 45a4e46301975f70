// Which leases a cluster node picks up: those PostgreSQL says it holds whose actors its host does not run (a new
// actor's claim committed, its reply lost). The pure decision of lease-pickup.ts, row by row.
import { describe, expect, it } from 'vitest';
import { leasesToPickUp, type PickUpInput } from '../../../src/store/postgres/lease-pickup.ts';

const input = (over: Partial<PickUpInput>): PickUpInput => ({
  leased: [],
  held: new Map(),
  claiming: new Set(),
  ending: new Set(),
  running: () => false,
  ...over,
});

describe('leases to pick up', () => {
  it('a lease the node did not know of (the reply was lost) and whose actor it does not run is picked up', () => {
    expect(
      leasesToPickUp(
        input({
          leased: [
            { stream: 'instance-a', token: 7 },
            { stream: 'execution-b', token: 8 },
          ],
        }),
      ),
    ).toEqual([
      { stream: 'instance-a', token: 7 },
      { stream: 'execution-b', token: 8 },
    ]);
  });

  it('a lease held with its token whose actor is not in the host is picked up; one whose actor runs is not', () => {
    const leased = [
      { stream: 'instance-a', token: 7 },
      { stream: 'instance-b', token: 9 },
    ];
    const held = new Map([
      ['instance-a', 7],
      ['instance-b', 9],
    ]);
    expect(leasesToPickUp(input({ leased, held, running: (s) => s === 'instance-b' }))).toEqual([
      { stream: 'instance-a', token: 7 },
    ]);
  });

  it('an actor the host is creating (in memory, its claim on its way or answered) is not picked up', () => {
    const leased = [
      { stream: 'instance-a', token: 7 },
      { stream: 'instance-b', token: 9 },
    ];
    expect(
      leasesToPickUp(input({ leased, claiming: new Set(['instance-a']), running: (s) => s === 'instance-b' })),
    ).toEqual([]);
  });

  it('a lease being given back (its actor ended) is not picked up', () => {
    expect(
      leasesToPickUp(
        input({
          leased: [{ stream: 'execution-a', token: 3 }],
          held: new Map([['execution-a', 3]]),
          ending: new Set(['execution-a']),
        }),
      ),
    ).toEqual([]);
  });

  it('a lease PostgreSQL has with another token than the one held is left to renewal', () => {
    expect(
      leasesToPickUp(input({ leased: [{ stream: 'instance-a', token: 12 }], held: new Map([['instance-a', 7]]) })),
    ).toEqual([]);
  });

  it('a lease of a stream that is not an actor is never picked up', () => {
    expect(leasesToPickUp(input({ leased: [{ stream: 'runlog-pool', token: 1 }] }))).toEqual([]);
  });
});
