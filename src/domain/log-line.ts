// One line of an app instance's output, as a runner received it and as the API hands it out.
export interface LogLine {
  stream: 'stdout' | 'stderr';
  line: string;
  /** ISO time the runner received it. */
  at: string;
}
