// The last lines an instance printed, plus live followers. One per instance incarnation; kept after the
// exit (post-mortem: why did it crash?) until the same instance id is spawned again.

import type { LogLine } from './app-sandbox-runner.ts';

export class LogBuffer {
  private readonly lines: LogLine[] = [];
  private readonly partial = { stdout: '', stderr: '' };
  private readonly followers = new Set<(l: LogLine | null) => void>();
  private ended = false;

  constructor(private readonly capacity = 2000) {}

  /** Feeds raw output; complete lines are stored and pushed to followers. */
  write(stream: 'stdout' | 'stderr', chunk: Buffer | string): void {
    const text = this.partial[stream] + chunk.toString();
    const parts = text.split('\n');
    this.partial[stream] = parts.pop() ?? '';
    for (const line of parts) this.push({ stream, line: line.replace(/\r$/, ''), at: new Date().toISOString() });
  }

  /** Flushes partial lines and ends every follower. */
  end(): void {
    if (this.ended) return;
    for (const s of ['stdout', 'stderr'] as const) {
      if (this.partial[s]) this.push({ stream: s, line: this.partial[s], at: new Date().toISOString() });
      this.partial[s] = '';
    }
    this.ended = true;
    for (const f of this.followers) f(null);
    this.followers.clear();
  }

  tail(n = 20): string {
    return this.lines
      .slice(-n)
      .map((l) => l.line)
      .join('\n');
  }

  snapshot(): LogLine[] {
    return [...this.lines];
  }

  async *read(follow: boolean): AsyncIterable<LogLine> {
    const queue: (LogLine | null)[] = [...this.lines];
    if (!follow || this.ended) {
      yield* queue as LogLine[];
      return;
    }
    let wake: (() => void) | null = null;
    const follower = (l: LogLine | null): void => {
      queue.push(l);
      wake?.();
    };
    this.followers.add(follower);
    try {
      for (;;) {
        if (queue.length === 0) await new Promise<void>((r) => (wake = r));
        wake = null;
        const next = queue.shift();
        if (next === null || next === undefined) return;
        yield next;
      }
    } finally {
      this.followers.delete(follower);
    }
  }

  private push(l: LogLine): void {
    this.lines.push(l);
    if (this.lines.length > this.capacity) this.lines.splice(0, this.lines.length - this.capacity);
    for (const f of this.followers) f(l);
  }
}
