// PRoot 5.1 (Debian bookworm's) predates four path-taking syscalls that today's glibc, coreutils and libuv
// call first: statx (332), clone3 (435), openat2 (437) and faccessat2 (439). PRoot lets unknown syscalls
// through UNTRANSLATED, so inside the sandbox `statx("/workspace/apps/x/server.mjs")` looks at the HOST path
// and fails: `ls` shows `-?????????`, Node's module loader says "Cannot find module", and a clone3 child
// would escape tracing altogether. All four have fallbacks when the kernel answers ENOSYS (glibc and libuv
// fall back to newfstatat/faccessat/clone, which PRoot translates and traces).
//
// So proot is started through this shim: a few lines of Perl (perl-base is Essential in Debian, on every
// host) that set PR_SET_NO_NEW_PRIVS and install a seccomp filter returning ENOSYS for exactly those
// syscalls, then exec proot. The filter is inherited by proot and every tracee; ERRNO outranks PRoot's own
// SECCOMP_RET_TRACE filter. Cost: a few ms of Perl start-up per spawn.

const X86_64 = 0xc000003e;
const ENOSYS = 38;
const BLOCKED = [332, 435, 437, 439];

// classic BPF: A = arch; if not x86_64 → allow; A = nr; nr in BLOCKED → errno(ENOSYS); else allow.
const program: [number, number, number, number][] = [
  [0x20, 0, 0, 4],
  [0x15, 0, BLOCKED.length + 1, X86_64],
  [0x20, 0, 0, 0],
  ...BLOCKED.map((nr, i): [number, number, number, number] => [0x15, BLOCKED.length - i, 0, nr]),
  [0x06, 0, 0, 0x7fff0000],
  [0x06, 0, 0, 0x00050000 | ENOSYS],
];

/** `perl -e SECCOMP_SHIM <program> <args…>` execs the program under the filter. */
export const SECCOMP_SHIM = `
my @f = (${program.map((i) => `[${i.join(',')}]`).join(',')});
my $prog = join '', map { pack('SCCL', @$_) } @f;
my $fprog = pack('S x6 P', scalar(@f), $prog);
syscall(157, 38, 1, 0, 0, 0) == 0 or die "runlog seccomp shim: PR_SET_NO_NEW_PRIVS: $!\\n";
syscall(157, 22, 2, $fprog, 0, 0) == 0 or die "runlog seccomp shim: PR_SET_SECCOMP: $!\\n";
exec { $ARGV[0] } @ARGV or die "runlog seccomp shim: exec $ARGV[0]: $!\\n";
`;

export const shimArgs = (program: string, args: string[]): string[] => ['-e', SECCOMP_SHIM, program, ...args];
