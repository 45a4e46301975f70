// What the last successful resolution of a URI led to (its runtime record URI, the code blob and the entrypoint),
// kept so the next execution of the same URI can start those reads together with the code record's instead of
// after it. A hint decides nothing: every read it starts is a full, verified read made during this execution,
// and it is used only when the code record fetched in this execution names exactly the same runtime record URI
// (the CID binding is then checked as always) or the same blob CID, author and entrypoint. Anything else is
// read again, and the speculative read is dropped.

export interface ResolutionHint {
  /** The DID whose PDS serves the code blob. */
  author: string;
  runtimeUri: string;
  blobCid: string;
  entrypoint: string;
}

export const DEFAULT_MAX_HINTS = 256;

export class ResolutionHints {
  readonly #max: number;
  readonly #hints = new Map<string, ResolutionHint>();

  constructor(max = DEFAULT_MAX_HINTS) {
    this.#max = max;
  }

  get(uri: string): ResolutionHint | undefined {
    return this.#hints.get(uri);
  }

  /** Remembers the newest resolution of `uri`; the least recently resolved URI is forgotten past the bound. */
  set(uri: string, hint: ResolutionHint): void {
    this.#hints.delete(uri);
    this.#hints.set(uri, { ...hint });
    while (this.#hints.size > this.#max) this.#hints.delete(this.#hints.keys().next().value!);
  }

  get size(): number {
    return this.#hints.size;
  }
}
