// Keeps V8's young generation at its starting size in the CLI's commands that stream a log or a file.
//
// Those commands make a little short-lived garbage per row (the row, its parsed data, the printed line). When a
// scavenge finds many rows still in flight, V8 doubles the young generation, up to 16 MB per semi-space, and that
// growth alone put `events --all` about 25 MB above a raw better-sqlite3 reader doing the same work. With a growth
// factor of 1 it stays at its starting size: scavenges come more often and each is cheap, since a streaming
// command keeps little alive. V8 reads the flag at each growth decision, so setting it when such a command starts
// takes effect at once, and `serve`, which wants a larger young generation, never carries it.
import { setFlagsFromString } from 'node:v8';

/** Stops this process's young generation from growing past its starting size (for the rest of the process). */
export function keepYoungGenerationSmall(): void {
  setFlagsFromString('--semi-space-growth-factor=1');
}
