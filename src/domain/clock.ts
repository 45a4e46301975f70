// Time as a port: whatever reads the clock or waits takes a Clock, so a test can run restart backoffs on a
// simulated one in microseconds of real time. (The machines never read it: time reaches them inside events.)

export interface Clock {
  /** Milliseconds since the epoch, as Date.now(). */
  nowMs(): number;
  /**
   * Calls `fn` once `ms` have passed on this clock. Returns a function that cancels it. `unref`: the wait does
   * not keep the process alive (housekeeping, such as the sandbox pool's idle removal).
   */
  after(ms: number, fn: () => void, opts?: { unref?: boolean }): () => void;
}
