/** Levenshtein distance, for "did you mean" hints in diagnostics. */
export function editDistance(a: string, b: string, ignoreCase = false): number {
  if (ignoreCase) {
    a = a.toLowerCase();
    b = b.toLowerCase();
  }
  const d = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let prev = d[0]!;
    d[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const cur = d[j]!;
      d[j] = Math.min(d[j]! + 1, d[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = cur;
    }
  }
  return d[b.length]!;
}
