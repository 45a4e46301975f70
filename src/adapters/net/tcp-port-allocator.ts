// Ports for app instances, from a fixed range, checked against what the kernel says is listening.
//
// The allocator's own table (port → owner) can drift from reality: a process outside runlog starts listening
// on a port of the range, or an instance died and left its port idle. Every `allocate()` re-reads the LISTEN
// sockets from /proc/net/tcp and /proc/net/tcp6 (host network namespace) and never hands out a port that
// something listens on. `scan()` reports the drift both ways; the caller (actor host) decides what to do with
// idle ports it still holds. Allocation is synchronous, so two allocations in one process cannot race.
//
// Note: the LISTEN table is the supervisor's network namespace. ContainerRunner apps listen inside their
// own namespace, so their ports never show up here (they are reached on the container's IP instead).

import { readFileSync } from 'node:fs';
import { RunlogError } from '../../domain/errors.ts';

export const PROC_NET_TCP = ['/proc/net/tcp', '/proc/net/tcp6'] as const;
const TCP_LISTEN = '0A';

const TCP_TIME_WAIT = '06';

/** Ports with a socket in state LISTEN, parsed from /proc/net/tcp-format files (missing files are skipped). */
export function readListeningPorts(files: readonly string[] = PROC_NET_TCP): Set<number> {
  return readLocalPorts(files, (state) => state === TCP_LISTEN);
}

/**
 * Ports a new listener could not bind: the local port of any socket but one in TIME_WAIT (which SO_REUSEADDR,
 * set by Node's listen, may bind over). An outbound connection's ephemeral local port counts: in a range that
 * overlaps ip_local_port_range, a listener on such a port fails with EADDRINUSE.
 */
export function readBusyPorts(files: readonly string[] = PROC_NET_TCP): Set<number> {
  return readLocalPorts(files, (state) => state !== TCP_TIME_WAIT);
}

function readLocalPorts(files: readonly string[], keep: (state: string) => boolean): Set<number> {
  const ports = new Set<number>();
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue; // no IPv6 in this kernel
      throw e;
    }
    for (const line of text.split('\n').slice(1)) {
      // "  sl  local_address rem_address   st ..."  local_address = <hex ip>:<hex port>
      const cols = line.trim().split(/\s+/);
      if (cols.length < 4 || !keep(cols[3]!)) continue;
      const local = cols[1] ?? '';
      const port = Number.parseInt(local.slice(local.lastIndexOf(':') + 1), 16);
      if (Number.isInteger(port) && port > 0) ports.add(port);
    }
  }
  return ports;
}

export class PortsExhaustedError extends RunlogError {
  constructor(min: number, max: number, busy: number) {
    super('PORTS_EXHAUSTED', `no free port in ${min}-${max}: ${busy} are allocated or have a foreign listener`, {
      min,
      max,
      busy,
    });
  }
}

export class PortConflictError extends RunlogError {
  constructor(port: number, owner: string, wanted: string) {
    super('PORT_CONFLICT', `port ${port} is already allocated to ${owner}, not to ${wanted}`, { port, owner, wanted });
  }
}

export interface PortAllocatorOptions {
  min: number;
  max: number;
  /** /proc/net/tcp-format files to read (tests point these at fixtures). */
  procFiles?: readonly string[];
}

export interface PortScan {
  /** Listening in the range but not allocated by us: skipped by allocate() until it goes away. */
  foreign: number[];
  /** Allocated by us but nothing listens on it (an instance still starting, or one that died). */
  idle: { port: number; owner: string }[];
}

export class TcpPortAllocator {
  readonly min: number;
  readonly max: number;
  private readonly procFiles: readonly string[];
  private readonly owners = new Map<number, string>();
  private cursor: number;

  constructor(opts: PortAllocatorOptions) {
    if (
      !Number.isInteger(opts.min) ||
      !Number.isInteger(opts.max) ||
      opts.min < 1 ||
      opts.max > 65535 ||
      opts.min > opts.max
    ) {
      throw new RunlogError(
        'PORT_RANGE_INVALID',
        `port range ${opts.min}-${opts.max} is invalid (integers, 1 ≤ min ≤ max ≤ 65535)`,
      );
    }
    this.min = opts.min;
    this.max = opts.max;
    this.procFiles = opts.procFiles ?? PROC_NET_TCP;
    this.cursor = opts.min;
  }

  /**
   * A port nobody holds and no socket is bound to (bar TIME_WAIT), recorded for `owner` (an instance id). Round-robin from the
   * last allocation, so a just-released port is not handed straight to the next instance.
   */
  allocate(owner: string): number {
    const busy = readBusyPorts(this.procFiles);
    const size = this.max - this.min + 1;
    for (let i = 0; i < size; i++) {
      const port = this.min + ((this.cursor - this.min + i) % size);
      if (this.owners.has(port) || busy.has(port)) continue;
      this.owners.set(port, owner);
      this.cursor = port === this.max ? this.min : port + 1;
      return port;
    }
    throw new PortsExhaustedError(this.min, this.max, size);
  }

  /** Records a port that is already in use by `owner` (an adopted instance after a restart). */
  reserve(port: number, owner: string): void {
    const current = this.owners.get(port);
    if (current !== undefined && current !== owner) throw new PortConflictError(port, current, owner);
    this.owners.set(port, owner);
  }

  /** Frees a port; releasing a port that is not held is a no-op. */
  release(port: number): void {
    this.owners.delete(port);
  }

  /** Frees every port held by `owner`. */
  releaseOwner(owner: string): void {
    for (const [port, o] of this.owners) if (o === owner) this.owners.delete(port);
  }

  ownerOf(port: number): string | undefined {
    return this.owners.get(port);
  }

  allocated(): ReadonlyMap<number, string> {
    return new Map(this.owners);
  }

  /** Drift between the table and the kernel's LISTEN sockets. */
  scan(): PortScan {
    const listening = readListeningPorts(this.procFiles);
    const foreign = [...listening]
      .filter((p) => p >= this.min && p <= this.max && !this.owners.has(p))
      .sort((a, b) => a - b);
    const idle = [...this.owners]
      .filter(([p]) => !listening.has(p))
      .map(([port, owner]) => ({ port, owner }))
      .sort((a, b) => a.port - b.port);
    return { foreign, idle };
  }
}
