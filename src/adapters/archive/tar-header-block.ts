// Reading one 512-byte tar header block: its numeric fields, checksum, format, and what its type flag means.
//
// The header audit (header-audit.ts) judges every block strictly, the way a Go-archive/tar-like reader would,
// where tar-stream reads leniently (parseInt on numeric fields, any magic): these readers are that strictness,
// each one pure and given the raw bytes, so the walk itself only decides where the next header starts.
import type { ArchiveLimits } from '../../domain/at-run/archive-limits.ts';
import type { ArchiveViolationCode } from './codes.ts';

export const BLOCK = 512;

const utf8Strict = new TextDecoder('utf-8', { fatal: true });
/** Decodes a name for messages and comparison; isUtf8 says whether it really was UTF-8. */
export const utf8Lossy = new TextDecoder('utf-8');

export function isZero(b: Uint8Array): boolean {
  for (let i = 0; i < b.length; i++) if (b[i] !== 0) return false;
  return true;
}

/** The bytes of a NUL-terminated field up to its first NUL. */
export const cstr = (b: Uint8Array): Uint8Array => {
  const nul = b.indexOf(0);
  return nul === -1 ? b : b.subarray(0, nul);
};

export function isUtf8(b: Uint8Array): boolean {
  try {
    utf8Strict.decode(b);
    return true;
  } catch {
    return false;
  }
}

/**
 * A numeric header field: octal digits surrounded only by spaces/NULs, or positive base-256 (0x80 prefix).
 * Returns null for anything else (negative base-256, garbage after the digits, `parseInt`-style prefixes).
 */
export function parseNumericField(field: Uint8Array): number | null {
  if (field.length === 0) return null;
  if ((field[0]! & 0x80) !== 0) {
    if (field[0] !== 0x80) return null;
    let v = 0;
    for (let i = 1; i < field.length; i++) {
      v = v * 256 + field[i]!;
      if (v > Number.MAX_SAFE_INTEGER) return null;
    }
    return v;
  }
  let i = 0;
  while (i < field.length && (field[i] === 0x20 || field[i] === 0)) i++;
  const start = i;
  while (i < field.length && field[i]! >= 0x30 && field[i]! <= 0x37) i++;
  const end = i;
  while (i < field.length && (field[i] === 0x20 || field[i] === 0)) i++;
  if (i !== field.length) return null;
  if (start === end) return 0;
  const v = parseInt(Buffer.from(field.subarray(start, end)).toString('latin1'), 8);
  return Number.isSafeInteger(v) ? v : null;
}

function headerChecksum(block: Uint8Array): number {
  let sum = 8 * 0x20;
  for (let i = 0; i < 148; i++) sum += block[i]!;
  for (let i = 156; i < BLOCK; i++) sum += block[i]!;
  return sum;
}

type Format = 'posix' | 'gnu' | null;

function formatOf(block: Uint8Array): Format {
  const magic = Buffer.from(block.subarray(257, 263)).toString('latin1');
  const version = Buffer.from(block.subarray(263, 265)).toString('latin1');
  if (magic === 'ustar\0' && version === '00') return 'posix';
  if (magic === 'ustar ' && version === ' \0') return 'gnu';
  return null;
}

/** The tar-stream type name of a type flag (what validateArchive compares on), or null for one it does not name. */
export function tsTypeOf(typeflag: string, name: string): string | null {
  switch (typeflag) {
    case '0':
      return 'file';
    case '\0':
      // Go reads an old-style regular file whose name ends in "/" as a directory.
      return name.endsWith('/') ? 'directory' : 'file';
    case '1':
      return 'link';
    case '2':
      return 'symlink';
    case '3':
      return 'character-device';
    case '4':
      return 'block-device';
    case '5':
      return 'directory';
    case '6':
      return 'fifo';
    case '7':
      return 'contiguous-file';
    default:
      return null;
  }
}

/** Reports what an entry's type flag says about it; true when the walk cannot go past it (its framing is unknown). */
export function judgeEntryType(
  typeflag: string,
  block: Uint8Array,
  limits: ArchiveLimits,
  add: (code: ArchiveViolationCode, message: string) => void,
): boolean {
  let fatal = false;
  switch (typeflag) {
    case '0':
    case '\0':
    case '1':
    case '2':
    case '5':
      break;
    case '3':
    case '4':
      add(
        'DEVICE_ENTRY',
        `${typeflag === '3' ? 'character' : 'block'} device ${parseNumericField(block.subarray(329, 337))}:` +
          `${parseNumericField(block.subarray(337, 345))}`,
      );
      break;
    case '6':
      add('FIFO_ENTRY', 'FIFO');
      break;
    case '7':
      add('UNSUPPORTED_TYPE', 'contiguous file (type 7)');
      break;
    case 'S': {
      add('SPARSE_ENTRY', 'GNU sparse file (type S)');
      const realSize = parseNumericField(block.subarray(483, 495));
      if (realSize !== null && realSize > limits.maxFileBytes)
        add('FILE_TOO_LARGE', `sparse file claims ${realSize} bytes (limit ${limits.maxFileBytes})`);
      fatal = true; // its extension blocks are invisible to tar-stream
      break;
    }
    case 'D':
      add('UNSUPPORTED_TYPE', 'GNU incremental dump directory (type D)');
      break;
    case 'N':
    case 'V':
    case 'M':
      // tar-stream reads N as a long-name header; V and M are multi-volume bookkeeping.
      add('UNSUPPORTED_TYPE', `GNU type ${typeflag} (parsers disagree on its framing)`);
      fatal = true;
      break;
    default:
      add('UNSUPPORTED_TYPE', `entry type ${JSON.stringify(typeflag)}`);
  }
  return fatal;
}

/** A header's format and size, or why the walk cannot trust it (a bad checksum, an unknown format or size). */
export function headerFraming(
  block: Uint8Array,
  off: number,
): { format: NonNullable<Format>; size: number } | { code: ArchiveViolationCode; message: string } {
  const stored = parseNumericField(block.subarray(148, 156));
  if (stored === null || stored !== headerChecksum(block))
    return { code: 'BAD_CHECKSUM', message: `header at byte ${off} has a bad checksum` };
  const format = formatOf(block);
  if (format === null)
    return { code: 'UNKNOWN_FORMAT', message: `header at byte ${off} is neither POSIX ustar nor GNU tar` };
  const size = parseNumericField(block.subarray(124, 136));
  if (size === null) return { code: 'BAD_NUMERIC_FIELD', message: `header at byte ${off} has a malformed size field` };
  return { format, size };
}
