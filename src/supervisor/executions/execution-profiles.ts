// The latency profile of each execution this process runs: the step durations, folded into its outcome event.
// Kept apart from the effects that measure them so each step adds its figure and the outcome carries the whole.
import type { LatencyProfile, OutcomeData } from '../../domain/execution-events.ts';

export class LatencyProfiles {
  /** Step durations of the executions this process is running (see LatencyProfile). */
  private readonly profiles = new Map<string, LatencyProfile>();

  add(executionId: string, add: LatencyProfile): void {
    this.profiles.set(executionId, { ...this.profiles.get(executionId), ...add });
  }

  get(executionId: string): LatencyProfile | undefined {
    return this.profiles.get(executionId);
  }

  /** Forgets an execution's profile (it ended without an outcome of its own: cancelled, cleaned up). */
  forget(executionId: string): void {
    this.profiles.delete(executionId);
  }

  /** An outcome event with the execution's latency profile; the profile is forgotten. */
  withProfile<T extends { type: 'execution.succeeded' | 'execution.failed'; data: OutcomeData }>(
    executionId: string,
    event: T,
  ): T {
    const profile = this.profiles.get(executionId);
    this.profiles.delete(executionId);
    if (!profile) return event;
    const rounded = Object.fromEntries(
      Object.entries(profile).map(([k, v]) => [k, typeof v === 'number' ? Math.round(v * 10) / 10 : v]),
    ) as LatencyProfile;
    return { ...event, data: { ...event.data, profile: rounded } };
  }
}
