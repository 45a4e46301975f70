// Reason codes for archive violations. Every violation the validator reports carries one of these.

export const ARCHIVE_VIOLATION_CODES = {
  // The archive as a whole
  ARCHIVE_TOO_LARGE: 'the archive is larger than maxArchiveBytes (it is not parsed at all)',
  COMPRESSED_ARCHIVE:
    'gzip/bzip2/xz/zstd input: only plain tar is accepted (no decompression, so no compression bombs)',
  ARCHIVE_TRUNCATED: 'the archive ends inside a header or an entry, or has no end-of-archive marker',
  TRAILING_DATA:
    'non-zero bytes after the end-of-archive marker (extractors that skip zero blocks would read more entries)',
  EMPTY_ARCHIVE: 'the archive holds no entries',
  TOO_MANY_ENTRIES: 'more entries than maxEntries (parsing stopped there)',
  EXPANDED_TOO_LARGE: 'the regular files add up to more than maxExpandedBytes',
  PARSE_ERROR: 'tar-stream refused bytes the strict header audit accepted',
  PARSER_DIFFERENTIAL: 'tar-stream and the strict header audit read different entries from the same bytes',
  // Header framing and metadata
  BAD_CHECKSUM: 'a header checksum does not match (parsing cannot continue reliably)',
  UNKNOWN_FORMAT: 'a header is neither POSIX ustar/pax nor GNU (v7 and garbage headers are refused)',
  BAD_NUMERIC_FIELD: 'a numeric header field is not strict octal or positive base-256',
  HEADER_TOO_LARGE: 'a PAX or GNU long-name header is larger than 64 KiB',
  PAX_MALFORMED: 'a PAX record is malformed (length, missing newline, no "=", duplicate key, bad value)',
  PAX_GLOBAL_HEADER: 'a PAX global header (g): parsers disagree on whether it applies',
  PAX_SIZE_CONFLICT: 'a PAX size record differs from the ustar size field (file smuggling)',
  PAX_XATTR: 'extended attributes (SCHILY.xattr.*): could carry file capabilities or SELinux labels',
  PAX_UNSUPPORTED_KEY: 'a PAX record other than path, linkpath, size, mtime, atime, ctime, uid, gid, uname, gname',
  REPEATED_METADATA_HEADER: 'two PAX (x) or two GNU long-name/long-link (L/K) headers before one entry',
  MIXED_METADATA_HEADERS: 'PAX and GNU long-name headers before the same entry',
  DANGLING_METADATA_HEADER: 'a metadata header not followed by an entry',
  HEADER_ONLY_TYPE_WITH_SIZE:
    'a link, directory, device or FIFO header with a non-zero size (parsers frame it differently)',
  SPARSE_ENTRY: 'a GNU sparse entry (type S or GNU.sparse.* records)',
  DEVICE_ENTRY: 'a character or block device',
  FIFO_ENTRY: 'a FIFO',
  UNSUPPORTED_TYPE: 'an entry type other than regular file, directory, symlink or hardlink',
  NON_UTF8_NAME: 'a name or link target that is not valid UTF-8',
  // Names
  EMPTY_PATH: 'an entry with an empty name',
  NUL_IN_NAME: 'a NUL byte inside a name or link target (parsers truncate it differently)',
  CONTROL_CHAR_IN_NAME: 'a control character inside a name or link target',
  BACKSLASH_IN_PATH: 'a backslash inside a name or link target (a separator for some extractors)',
  ABSOLUTE_PATH: 'an absolute entry name',
  PATH_TRAVERSAL: 'a ".." component in an entry name',
  PATH_TOO_LONG: 'a name or link target longer than 4096 bytes',
  PATH_COMPONENT_TOO_LONG: 'a name component longer than 255 bytes',
  PATH_TOO_DEEP: 'a name deeper than 128 components',
  TRAILING_SLASH_ON_NON_DIRECTORY: 'a non-directory entry whose name ends in "/"',
  OUTSIDE_PREFIX: 'an entry outside the stripPrefix directory',
  ROOT_NOT_DIRECTORY: 'the archive root (or the stripPrefix entry) is not a directory',
  // The virtual tree
  PATH_THROUGH_SYMLINK: 'an entry below a symlink (extraction would write through it)',
  PARENT_NOT_DIRECTORY: 'an entry below a file, hardlink or special entry',
  DUPLICATE_PATH: 'the same path twice',
  DUPLICATE_PATH_TYPE_CHANGE: 'the same path twice with different types',
  SPECIAL_MODE_BITS: 'setuid, setgid or sticky bit',
  LINKNAME_ON_NON_LINK: 'a regular file or directory that carries a link target',
  EMPTY_LINK_TARGET: 'a symlink or hardlink with an empty target',
  SYMLINK_ESCAPE: 'a symlink whose target is absolute or resolves outside the root (through other symlinks too)',
  SYMLINK_LOOP: 'a symlink that does not resolve within 40 hops',
  LINK_RESOLUTION_BUDGET: 'resolving the symlinks took more steps than allowed',
  HARDLINK_ESCAPE: 'a hardlink whose target is absolute, uses "..", is outside the root, or passes through a symlink',
  HARDLINK_TARGET_MISSING: 'a hardlink to a path no earlier entry created',
  HARDLINK_TARGET_NOT_FILE: 'a hardlink to a directory, symlink or special entry',
  FILE_TOO_LARGE: 'a regular file larger than maxFileBytes',
  // Code archives
  CODE_TOP_LEVEL: 'a code archive must have exactly one top-level directory',
  ENTRYPOINT_INVALID: 'the entrypoint is not a safe canonical relative path',
  ENTRYPOINT_MISSING: 'the entrypoint does not exist in the archive',
  ENTRYPOINT_NOT_FILE: 'the entrypoint is a directory or special entry, not a regular file',
  ENTRYPOINT_ESCAPES: 'the entrypoint resolves outside the archive',
} as const;

export type ArchiveViolationCode = keyof typeof ARCHIVE_VIOLATION_CODES;
