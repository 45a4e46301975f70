// The Engine's platform in OCI terms (os, architecture, variant), as image indexes name it.
import type { Platform } from './docker-port.ts';

/** Go/uname architecture names to OCI ones, with the variant containerd's normalization gives. */
export function normalizePlatform(os: string, arch: string, machine?: string): Platform {
  const o = os.toLowerCase();
  switch (arch) {
    case 'x86_64':
    case 'x86-64':
    case 'amd64':
      return { os: o, architecture: 'amd64' };
    case 'aarch64':
    case 'arm64':
      return { os: o, architecture: 'arm64', variant: 'v8' };
    case 'armhf':
    case 'armel':
    case 'arm': {
      const m = /^armv(\d)/.exec(machine ?? '');
      return { os: o, architecture: 'arm', variant: m ? `v${m[1]}` : 'v7' };
    }
    case 'i386':
    case 'i686':
    case '386':
      return { os: o, architecture: '386' };
    default:
      if (/^armv\d/.test(arch)) return { os: o, architecture: 'arm', variant: `v${arch.charAt(4)}` };
      return { os: o, architecture: arch };
  }
}
