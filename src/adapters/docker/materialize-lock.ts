// The lock that lets one process at a time fill a named materialized volume on a Docker daemon, whichever process
// (or node of a cluster) asks. Several supervisors on one machine share its daemon but not necessarily a home
// directory or a database, so the lock lives in the daemon itself: a never-started, mount-less container named
// `<volume>-lock`. Docker reserves container names atomically, so of two creates of that name one gets 409 Conflict
// — the only create-if-absent the Engine offers (a volume create of an existing name succeeds silently; a network's
// duplicate check is best effort).
//
// The lock's labels name its holder: pid, the pid's start time, the kernel's boot id and the pid namespace. A process
// that sees the same boot id and pid namespace can tell from /proc whether the holder still runs (the start time
// tells a reused pid from the holder), so a holder killed with SIGKILL mid-copy is seen as gone at once and its lock
// taken over. A holder this process cannot see (another pid namespace, another machine on the same daemon) is waited
// for up to `staleAfterMs` since it took the lock, then taken over; a live holder that keeps the lock longer than
// `maxHoldMs` (hung, or it failed to remove its lock) is taken over too, and finds out before it seals (stillHeld).
// The holder removes the lock only after its seal exists (or after it removed what it made), so a waiter that finds
// the lock gone finds either a sealed volume or nothing it must keep.
import { randomUUID } from 'node:crypto';
import { readFile, readlink } from 'node:fs/promises';
import type { ContainerCreateBody, DockerEngine } from './docker-port.ts';
import { DockerConflictError } from './errors.ts';

export const LOCK_KIND = 'materializer-lock';
export const LABEL_LOCK_FOR = 'runlog.lock-for';
export const LOCK_SUFFIX = '-lock';
const L_PID = 'runlog.lock-pid';
const L_START = 'runlog.lock-pid-start';
const L_BOOT = 'runlog.lock-boot-id';
const L_PIDNS = 'runlog.lock-pid-ns';
const L_TOKEN = 'runlog.lock-token';
const L_AT = 'runlog.lock-at';

/** Where a process stands, as far as another process on the same kernel can check it. */
export interface ProcessIdentity {
  pid: number;
  /** Field 22 of /proc/<pid>/stat (clock ticks since boot); null where /proc cannot be read. */
  pidStart: string | null;
  bootId: string | null;
  pidNs: string | null;
}

/** What a lock's labels say about its holder. */
export interface LockHolder extends ProcessIdentity {
  /** One per materializer instance: a lock with this process's own token and no copy in flight is left over. */
  token: string;
  /** When it took the lock (ms since the epoch, the holder's clock). */
  at: number;
}

export type LockVerdict = { holder: 'alive' | 'gone'; why: string };

/**
 * Whether the holder of a lock still works on it (wait) or is gone (take the lock over). Pure: `holderStart` is
 * what /proc says of the holder's pid when this process can see it (`null`: no such process), `undefined` when it
 * cannot (another kernel or pid namespace).
 */
export function judgeLockHolder(input: {
  holder: LockHolder | null;
  self: ProcessIdentity & { token: string };
  holderStart: string | null | undefined;
  nowMs: number;
  /** How long a holder this process cannot see is waited for. */
  staleAfterMs: number;
  /** How long a holder seen running is waited for. */
  maxHoldMs: number;
}): LockVerdict {
  const { holder, self } = input;
  if (!holder) return { holder: 'gone', why: 'the lock does not name its holder' };
  const age = input.nowMs - holder.at;
  // This materializer runs one copy per volume at a time (single flight), and it is asking: its own lock is left over.
  if (holder.token === self.token) return { holder: 'gone', why: 'left over by this process' };
  if (canSee(holder, self)) {
    if (input.holderStart === undefined) return { holder: 'alive', why: `pid ${holder.pid} could not be checked` };
    if (input.holderStart === null) return { holder: 'gone', why: `pid ${holder.pid} is not running` };
    if (input.holderStart !== holder.pidStart)
      return { holder: 'gone', why: `pid ${holder.pid} is another process now` };
    if (!(age <= input.maxHoldMs))
      return {
        holder: 'gone',
        why: `pid ${holder.pid} has held it for ${Math.round(age)} ms (limit ${input.maxHoldMs} ms)`,
      };
    return { holder: 'alive', why: `pid ${holder.pid} is running` };
  }
  if (!(age <= input.staleAfterMs))
    return {
      holder: 'gone',
      why: `held for ${Math.round(age)} ms by a process this one cannot see (limit ${input.staleAfterMs} ms)`,
    };
  return { holder: 'alive', why: `held for ${Math.round(age)} ms by a process this one cannot see` };
}

/** Whether /proc of this process shows the holder's pid (same kernel boot, same pid namespace). */
function canSee(holder: ProcessIdentity, self: ProcessIdentity): boolean {
  return (
    holder.bootId !== null &&
    holder.pidNs !== null &&
    holder.pidStart !== null &&
    holder.bootId === self.bootId &&
    holder.pidNs === self.pidNs
  );
}

export function holderLabels(self: ProcessIdentity, token: string, atMs: number): Record<string, string> {
  return {
    [L_PID]: String(self.pid),
    [L_START]: self.pidStart ?? '',
    [L_BOOT]: self.bootId ?? '',
    [L_PIDNS]: self.pidNs ?? '',
    [L_TOKEN]: token,
    [L_AT]: String(atMs),
  };
}

export function parseHolder(labels: Readonly<Record<string, string>>): LockHolder | null {
  const pid = Number(labels[L_PID]);
  const at = Number(labels[L_AT]);
  const token = labels[L_TOKEN];
  if (!Number.isInteger(pid) || pid <= 0 || !Number.isFinite(at) || !token) return null;
  const orNull = (v: string | undefined) => (v ? v : null);
  return {
    pid,
    at,
    token,
    pidStart: orNull(labels[L_START]),
    bootId: orNull(labels[L_BOOT]),
    pidNs: orNull(labels[L_PIDNS]),
  };
}

/** The start time of a pid (field 22 of /proc/<pid>/stat), null when no such process runs. */
export async function processStart(pid: number): Promise<string | null> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) is in parentheses and may hold spaces or parentheses: count from the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[19] ?? null; // fields[0] is field 3 (the state): field 22 is fields[19]
  } catch {
    return null;
  }
}

let identity: Promise<ProcessIdentity> | null = null;

export function processIdentity(): Promise<ProcessIdentity> {
  identity ??= (async () => {
    const [pidStart, bootId, pidNs] = await Promise.all([
      processStart(process.pid),
      readFile('/proc/sys/kernel/random/boot_id', 'utf8').then(
        (s) => s.trim(),
        () => null,
      ),
      readlink('/proc/self/ns/pid').catch(() => null),
    ]);
    return { pid: process.pid, pidStart, bootId, pidNs };
  })();
  return identity;
}

/** Whether a lock container's holder still works on it, judged from this process (the reconciler asks too). */
export async function lockHolderVerdict(
  labels: Readonly<Record<string, string>>,
  opts: LockLimits & { token?: string },
): Promise<LockVerdict> {
  const self = await processIdentity();
  const holder = parseHolder(labels);
  const holderStart = holder && canSee(holder, self) ? await processStart(holder.pid) : undefined;
  return judgeLockHolder({
    holder,
    self: { ...self, token: opts.token ?? '' },
    holderStart,
    nowMs: Date.now(),
    ...opts,
  });
}

export interface LockLimits {
  staleAfterMs: number;
  maxHoldMs: number;
}

export const DEFAULT_LOCK_LIMITS: LockLimits = { staleAfterMs: 5 * 60_000, maxHoldMs: 30 * 60_000 };

export interface HeldLock {
  id: string;
  /** Whether the lock is still this one (not taken over as stale): checked before sealing. */
  stillHeld(): Promise<boolean>;
  /** Removes the lock (by id: never a later holder's); a lock already gone is fine. */
  release(): Promise<void>;
}

export type LockAttempt = { held: HeldLock } | { held: null; verdict: LockVerdict | null };

/** Locks of one materializer instance (its token tells its own left-over locks from others'). */
export class VolumeLocks {
  readonly token = randomUUID();

  constructor(
    private readonly engine: DockerEngine,
    private readonly limits: LockLimits = DEFAULT_LOCK_LIMITS,
  ) {}

  /**
   * One try at the lock of `volume`. Held: this process alone fills the volume until it releases. Not held: a live
   * holder works on it (`verdict.holder === 'alive'`: wait, then look for its seal), or a gone holder's lock was just
   * removed or the lock vanished meanwhile (try again at once).
   */
  async tryLock(volume: string, image: string, labels: Readonly<Record<string, string>>): Promise<LockAttempt> {
    const self = await processIdentity();
    const name = `${volume}${LOCK_SUFFIX}`;
    const body: ContainerCreateBody = {
      Image: image,
      Entrypoint: ['/runlog-never-started'],
      Cmd: [],
      Env: [],
      User: '65534:65534',
      Labels: {
        ...labels,
        'runlog.kind': LOCK_KIND,
        [LABEL_LOCK_FOR]: volume,
        ...holderLabels(self, this.token, Date.now()),
      },
      NetworkDisabled: true,
      Healthcheck: { Test: ['NONE'] },
      HostConfig: {
        NetworkMode: 'none',
        ReadonlyRootfs: true,
        CapDrop: ['ALL'],
        SecurityOpt: ['no-new-privileges:true'],
        AutoRemove: false,
        RestartPolicy: { Name: 'no' },
        LogConfig: { Type: 'none' },
      },
    };
    try {
      const id = await this.engine.createContainer(body, name);
      return {
        held: {
          id,
          stillHeld: async () => (await this.engine.inspectContainer(id)) !== null,
          release: () => this.engine.removeContainer(id, { force: true }),
        },
      };
    } catch (err) {
      if (!(err instanceof DockerConflictError)) throw err;
    }
    const lock = await this.engine.inspectContainer(name);
    if (!lock) return { held: null, verdict: null }; // released meanwhile
    const verdict = await lockHolderVerdict(lock.labels, { ...this.limits, token: this.token });
    // By id: a waiter that judged the same stale lock a moment later must not remove the lock its taker just made.
    if (verdict.holder === 'gone') await this.engine.removeContainer(lock.id, { force: true });
    return { held: null, verdict };
  }
}
