/** A command-line integer option: `fallback` when absent, else a whole number ≥ `min` (underscores allowed). */
export function int(name: string, raw: string | undefined, fallback: number, min = 1): number {
  if (raw === undefined) return fallback;
  const n = Number(raw.replace(/_/g, ''));
  if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer ≥ ${min}, got "${raw}"`);
  return n;
}
