// The first thing that runs inside a PRoot instance's own mount namespace: it makes the shared host paths the
// instance sees read-only there, gives it a /dev/shm of its own, then hands over to the seccomp shim and proot.
//
// Perl again (as seccomp-shim.ts: perl-base is on every Debian host, and a few syscalls cost no extra exec):
//  - each shared path (the Debian rootfs, the toolchain, the node binary, the bashrc, /etc/resolv.conf) is bind
//    mounted onto itself and remounted read-only. The mount namespace is the instance's own (unshare
//    --mount-proc makes one, with private propagation), so the host and every other instance keep their
//    writable view; inside, a write answers EROFS ("Read-only file system"). In a user namespace (a non-root
//    supervisor) the kernel keeps the original mount's nosuid/nodev/noexec, so the remount is retried with them.
//  - /dev/shm (proot binds the host's /dev) gets a fresh tmpfs: 64 MiB like Docker's default, nosuid, nodev,
//    noexec, gone when the namespace dies.
// Argv: `perl -e GUARD+SHIM <n> <path 1> … <path n> <program> <args…>`. x86_64 syscall numbers (mount = 165),
// like the seccomp shim.

import { SECCOMP_SHIM } from './seccomp-shim.ts';

/** Size of an instance's private /dev/shm. */
export const SHM_BYTES = 64 * 1024 * 1024;

const MS_RDONLY = 1;
const MS_NOSUID = 2;
const MS_NODEV = 4;
const MS_NOEXEC = 8;
const MS_REMOUNT = 32;
const MS_BIND = 4096;
const MS_REC = 16384;

const GUARD = `
my $n = shift @ARGV;
my @ro = splice(@ARGV, 0, $n);
for my $p (@ro) {
  syscall(165, $p, $p, 0, ${MS_BIND | MS_REC}, 0) == 0 or die "runlog rootfs guard: bind $p: $!\\n";
  my $done = 0;
  for my $kept (0, ${MS_NOSUID | MS_NODEV}, ${MS_NOSUID | MS_NODEV | MS_NOEXEC}) {
    if (syscall(165, 0, $p, 0, ${MS_REMOUNT | MS_BIND | MS_RDONLY} | $kept, 0) == 0) { $done = 1; last }
  }
  $done or die "runlog rootfs guard: remount $p read-only: $!\\n";
}
my ($shm, $fs, $opts) = ('/dev/shm', 'tmpfs', 'mode=1777,size=${SHM_BYTES}');
syscall(165, $fs, $shm, $fs, ${MS_NOSUID | MS_NODEV | MS_NOEXEC}, $opts) == 0 or die "runlog rootfs guard: private /dev/shm: $!\\n";
`;

/** Argv for perl: make `readOnly` read-only and /dev/shm private, install the seccomp filter, exec the program. */
export const guardArgs = (readOnly: string[], program: string, args: string[]): string[] => [
  '-e',
  GUARD + SECCOMP_SHIM,
  String(readOnly.length),
  ...readOnly,
  program,
  ...args,
];
