// Time arithmetic on the ISO timestamps that events carry. Pure: never reads the clock.

export function addMs(iso: string, ms: number): string {
  return new Date(Date.parse(iso) + ms).toISOString();
}

export function msBetween(fromIso: string, toIso: string): number {
  return Date.parse(toIso) - Date.parse(fromIso);
}
