// The proxy's DNS refusals (src/adapters/egress/proxy/dns-message.ts): the question read defensively, and the
// REFUSED answer echoing the query's id, opcode, RD and question.
import { describe, expect, it } from 'vitest';
import { parseQuery, refusedAnswer, typeName } from '../../../src/adapters/egress/proxy/dns-message.ts';

/** A query for `name` of `type`, id 0x1234, RD set. */
function query(name: string, type = 1, flags = 0x0100): Uint8Array {
  const labels = name === '' ? [] : name.split('.');
  const qname = labels.flatMap((l) => [l.length, ...Buffer.from(l)]);
  return new Uint8Array([
    0x12,
    0x34,
    flags >> 8,
    flags & 0xff,
    0,
    1,
    0,
    0,
    0,
    0,
    0,
    0,
    ...qname,
    0,
    type >> 8,
    type & 0xff,
    0,
    1,
  ]);
}

describe('parseQuery', () => {
  it('reads the id, opcode, RD and first question, lower-cased', () => {
    expect(parseQuery(query('API.Example.com', 28))).toEqual({
      id: 0x1234,
      opcode: 0,
      rd: true,
      name: 'api.example.com',
      type: 28,
      questionEnd: 12 + 17 + 4,
    });
    expect(typeName(28)).toBe('AAAA');
    expect(typeName(99)).toBe('TYPE99');
  });

  it('refuses responses and short messages, and reads no further than it may', () => {
    expect(parseQuery(new Uint8Array(11))).toBeNull();
    expect(parseQuery(query('a.b', 1, 0x8100))).toBeNull();
    const truncated = query('example.com').subarray(0, 20);
    expect(parseQuery(truncated)).toMatchObject({ name: '', type: 0, questionEnd: 12 });
    const compressed = new Uint8Array([...query('').subarray(0, 12), 0xc0, 0x0c, 0, 1, 0, 1]);
    expect(parseQuery(compressed)).toMatchObject({ name: '', questionEnd: 12 });
    const long = query(Array.from({ length: 5 }, () => 'a'.repeat(63)).join('.'));
    expect(parseQuery(long)).toMatchObject({ name: '', questionEnd: 12 });
    expect(parseQuery(query('we\u0001ird.test'))).toMatchObject({ name: 'we?ird.test' });
  });
});

describe('refusedAnswer', () => {
  it('echoes the id, opcode, RD and question, with RCODE 5', () => {
    const q = query('leak.example.com', 16);
    const a = refusedAnswer(parseQuery(q)!, q);
    expect([...a.subarray(0, 12)]).toEqual([0x12, 0x34, 0x81, 0x05, 0, 1, 0, 0, 0, 0, 0, 0]);
    expect([...a.subarray(12)]).toEqual([...q.subarray(12)]);
  });

  it('answers a query without a readable question with none', () => {
    const q = query('example.com').subarray(0, 20);
    expect([...refusedAnswer(parseQuery(q)!, q)]).toEqual([0x12, 0x34, 0x81, 0x05, 0, 0, 0, 0, 0, 0, 0, 0]);
  });
});
