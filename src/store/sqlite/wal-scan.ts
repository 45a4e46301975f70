// Reads a SQLite write-ahead log's frames and checks their checksums, the way SQLite's own recovery does, to find
// the damage SQLite hides. On recovery SQLite keeps the frames up to the first one whose checksum fails and drops
// the rest without a word: a flipped bit in one frame silently discards every commit after it. A torn last frame
// (power lost while a commit was written, so it never returned) looks the same, and losing it is right. The two
// differ in what follows: checksums are cumulative, yet each frame's can be checked from the stored checksum of
// the frame before it, so a frame that fails followed by frames of the same WAL generation (same salts) that pass
// is damage in the middle, not a torn tail. Frames of an older generation (other salts) are leftovers SQLite
// ignores, and so does this scan. Format: https://www.sqlite.org/fileformat2.html#walformat
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';

export interface WalScan {
  /** Frames of the current generation that pass (the prefix SQLite will use, up to its last commit). */
  validFrames: number;
  /** The last commit frame of that prefix (1-based), 0 when none. */
  lastCommitFrame: number;
  /** The first damaged frame (1-based) when an intact frame of the same generation follows it. */
  damagedFrame: number | null;
}

const WAL_HEADER = 32;
const FRAME_HEADER = 24;

/** Checksums in 32-bit words of the given byte order (the magic number's low bit says which). */
function checksum(
  buf: Buffer,
  start: number,
  end: number,
  bigEndian: boolean,
  s0: number,
  s1: number,
): [number, number] {
  for (let i = start; i < end; i += 8) {
    const x0 = bigEndian ? buf.readUInt32BE(i) : buf.readUInt32LE(i);
    const x1 = bigEndian ? buf.readUInt32BE(i + 4) : buf.readUInt32LE(i + 4);
    s0 = (s0 + x0 + s1) >>> 0;
    s1 = (s1 + x1 + s0) >>> 0;
  }
  return [s0, s1];
}

/** null when there is no WAL, or too little of one to hold a frame (nothing SQLite would read). */
export function scanWal(walFile: string): WalScan | null {
  let fd: number;
  try {
    fd = openSync(walFile, 'r');
  } catch {
    return null;
  }
  try {
    const size = fstatSync(fd).size;
    if (size < WAL_HEADER) return null;
    const header = Buffer.alloc(WAL_HEADER);
    readSync(fd, header, 0, WAL_HEADER, 0);
    const magic = header.readUInt32BE(0);
    if (magic !== 0x377f0682 && magic !== 0x377f0683) return null; // not a WAL SQLite would replay
    const bigEndian = (magic & 1) === 1;
    const pageSize = header.readUInt32BE(8);
    if (pageSize < 512 || pageSize > 65536 || (pageSize & (pageSize - 1)) !== 0) return null;
    const salt1 = header.readUInt32BE(16);
    const salt2 = header.readUInt32BE(20);
    const [h0, h1] = checksum(header, 0, 24, bigEndian, 0, 0);
    if (h0 !== header.readUInt32BE(24) || h1 !== header.readUInt32BE(28)) return null; // SQLite ignores such a WAL
    const frameSize = FRAME_HEADER + pageSize;
    const frames = Math.floor((size - WAL_HEADER) / frameSize);
    const frame = Buffer.alloc(frameSize);
    let seed: [number, number] = [h0, h1];
    let validFrames = 0;
    let lastCommitFrame = 0;
    let firstBad: number | null = null;
    for (let i = 0; i < frames; i++) {
      readSync(fd, frame, 0, frameSize, WAL_HEADER + i * frameSize);
      const ours = frame.readUInt32BE(8) === salt1 && frame.readUInt32BE(12) === salt2;
      let pass = false;
      if (ours) {
        let [s0, s1] = checksum(frame, 0, 8, bigEndian, seed[0], seed[1]);
        [s0, s1] = checksum(frame, FRAME_HEADER, frameSize, bigEndian, s0, s1);
        pass = s0 === frame.readUInt32BE(16) && s1 === frame.readUInt32BE(20);
      }
      if (firstBad === null) {
        if (pass) {
          validFrames = i + 1;
          if (frame.readUInt32BE(4) !== 0) lastCommitFrame = i + 1;
        } else firstBad = i; // where SQLite's recovery stops (a damaged salt counts: SQLite stops there too)
      } else if (pass) {
        return { validFrames, lastCommitFrame, damagedFrame: firstBad + 1 };
      }
      // The next frame's checksum continues from this frame's stored one, whether or not this frame passed.
      seed = [frame.readUInt32BE(16), frame.readUInt32BE(20)];
    }
    return { validFrames, lastCommitFrame, damagedFrame: null };
  } finally {
    closeSync(fd);
  }
}
