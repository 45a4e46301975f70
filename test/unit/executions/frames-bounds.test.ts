import { describe, expect, it } from 'vitest';
import { DEFAULT_OUTPUT_LIMITS, FrameCollector, jsonDepthExceeds } from '../../../src/adapters/docker/frames.ts';
import { DEFAULT_OPERATOR_POLICY } from '../../../src/domain/at-run/operator-policy.ts';

const line = (v: unknown) => Buffer.from(`${JSON.stringify(v)}\n`);
const deep = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;

describe('result frames: nesting depth and sizes', () => {
  it('jsonDepthExceeds counts brackets outside strings only', () => {
    expect(jsonDepthExceeds(deep(128), 128)).toBe(false);
    expect(jsonDepthExceeds(deep(129), 128)).toBe(true);
    expect(jsonDepthExceeds(JSON.stringify({ s: '[[[[[[[[[[', t: '\\"[[[[' }), 2)).toBe(false);
    expect(jsonDepthExceeds(JSON.stringify({ a: { b: { c: 1 } } }), 2)).toBe(true);
  });

  it('a result nested deeper than the bound is a typed protocol violation (frame-too-deep), never parsed', () => {
    const breaches: string[] = [];
    const c = new FrameCollector({ ...DEFAULT_OUTPUT_LIMITS }, 'exec_1', { onBreach: (k) => breaches.push(k) });
    c.stdout(Buffer.from(`{"type":"result","id":"exec_1","output":${deep(5000)}}\n`));
    const out = c.finish();
    expect(breaches).toEqual(['frame-too-deep']);
    expect(out.terminal).toBeNull();
    expect(out.violation).toMatchObject({
      kind: 'frame-too-deep',
      message: expect.stringMatching(/deeper than 128 levels/),
    });
  });

  it('a result at the bound is taken', () => {
    let v: unknown = 1;
    for (let i = 0; i < 126; i++) v = [v];
    const c = new FrameCollector({ ...DEFAULT_OUTPUT_LIMITS }, 'exec_1');
    c.stdout(line({ type: 'result', id: 'exec_1', output: v }));
    expect(c.finish().terminal).toMatchObject({ type: 'result' });
  });

  it('under the default policy one oversized frame is FRAME_TOO_LARGE, not OUTPUT_LIMIT', () => {
    const { frameBytes, stdoutBytes } = DEFAULT_OPERATOR_POLICY.ceilings;
    const c = new FrameCollector(
      { ...DEFAULT_OUTPUT_LIMITS, maxFrameBytes: frameBytes, maxStdoutBytes: stdoutBytes },
      'exec_1',
    );
    c.stdout(line({ type: 'result', id: 'exec_1', output: 'x'.repeat(frameBytes) }));
    expect(c.finish().violation?.kind).toBe('frame-too-large');
  });
});
