// Exit callbacks per instance id. An exit nobody listens for yet is kept and delivered on registration, so
// the actor host may register before or after spawn/registerAdopted without losing a crash.

import type { ExitCallback, ExitInfo } from './app-sandbox-runner.ts';

export class ExitHub {
  private readonly callbacks = new Map<string, Set<ExitCallback>>();
  private readonly undelivered = new Map<string, ExitInfo>();

  on(instanceId: string, cb: ExitCallback): () => void {
    const pending = this.undelivered.get(instanceId);
    if (pending) {
      this.undelivered.delete(instanceId);
      queueMicrotask(() => cb(pending));
      return () => {};
    }
    let set = this.callbacks.get(instanceId);
    if (!set) this.callbacks.set(instanceId, (set = new Set()));
    set.add(cb);
    return () => set.delete(cb);
  }

  emit(instanceId: string, info: ExitInfo): void {
    const set = this.callbacks.get(instanceId);
    this.callbacks.delete(instanceId);
    if (!set || set.size === 0) {
      this.undelivered.set(instanceId, info);
      return;
    }
    for (const cb of set) {
      try {
        cb(info);
      } catch (e) {
        queueMicrotask(() => {
          throw e;
        });
      }
    }
  }

  /** A new incarnation starts: an old undelivered exit is no longer news. */
  reset(instanceId: string): void {
    this.undelivered.delete(instanceId);
  }
}
