// Fake effects record only what a test reads. The event types are complete (the compiler checks every real
// dispatch); a fake's data is marked as partial on purpose here, in one visible place.
export const partial = <T>(data: Partial<T>): T => data as T;
