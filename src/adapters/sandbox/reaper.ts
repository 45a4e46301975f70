// Children that die with the supervisor, even when the supervisor is SIGKILLed.
//
// Node cannot set PR_SET_PDEATHSIG for its children, and it would not be enough anyway: when proot (the
// tracer) is killed, its tracees are detached and keep running. So each proot child is started as the
// leader of its own process group (detached: true), and one small watchdog per runner — a host bash
// process in its own session — holds the list of those groups on its stdin. The supervisor writes
// "+<pgid>" after a spawn and "-<pgid>" after the exit. When the supervisor dies for ANY reason (exit,
// crash, SIGKILL, OOM) the kernel closes the pipe, `read` sees EOF, and the watchdog SIGKILLs every group
// still listed, then exits. A process group id cannot be reused while any member of the group is alive,
// so the watchdog never hits a stranger's group.

import { spawn, type ChildProcess } from 'node:child_process';

const WATCHDOG = `
declare -A groups
while read -r op pgid; do
  case "$op" in
    +) groups[$pgid]=1 ;;
    -) unset "groups[$pgid]" ;;
  esac
done
for pgid in "\${!groups[@]}"; do kill -KILL -- "-$pgid" 2>/dev/null; done
`;

export class ProcessGroupReaper {
  private child: ChildProcess | null = null;

  private ensure(): ChildProcess {
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) return this.child;
    const child = spawn('/bin/bash', ['-c', WATCHDOG], {
      detached: true,
      stdio: ['pipe', 'ignore', 'ignore'],
      env: { PATH: '/usr/bin:/bin' },
    });
    child.unref();
    (child.stdin as unknown as { unref?: () => void }).unref?.(); // why: a pipe's socket has unref(); Writable's type does not
    child.stdin?.on('error', () => {}); // EPIPE if the watchdog was killed: nothing to do
    this.child = child;
    return child;
  }

  /** The watchdog's pid (for tests and diagnostics). */
  get pid(): number | undefined {
    return this.ensure().pid;
  }

  watch(pgid: number): void {
    this.ensure().stdin?.write(`+ ${pgid}\n`);
  }

  unwatch(pgid: number): void {
    this.child?.stdin?.write(`- ${pgid}\n`);
  }

  /** Stops the watchdog WITHOUT killing the listed groups (after the runner stopped them itself). */
  close(): void {
    if (!this.child) return;
    const c = this.child;
    this.child = null;
    if (c.exitCode === null) c.kill('SIGKILL'); // before closing its stdin: EOF would make it reap
    c.stdin?.destroy();
  }
}
