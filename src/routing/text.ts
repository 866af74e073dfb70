// Writing large JSON texts (docs/ingress.md routing document and proxyb) from kept pieces.

/** `text` as it appears inside a JSON string; valid hosts and addresses come back unchanged. */
export function inner(text: string): string {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x20 || c === 0x22 || c === 0x5c || (c >= 0xd800 && c <= 0xdfff))
      return JSON.stringify(text).slice(1, -1);
  }
  return text;
}

/** Consecutive items (routes, routers) and their text, kept to be joined into later renderings. */
export interface Run<T> {
  items: T[];
  text: string;
}

/**
 * Whether a run ends after the item of this name: about one name in 32, by a hash of the name
 * alone, so that adding or removing an item changes its own run and no other.
 */
export function endsRun(name: string): boolean {
  let hash = 0x811c9dc5; // FNV-1a
  for (let i = 0; i < name.length; i++) hash = Math.imul(hash ^ name.charCodeAt(i), 0x01000193);
  return hash >>> 27 === 0;
}

/** Where the run that starts at `start` ends (exclusive). */
export function runEnd<T>(items: readonly T[], start: number, ends: (item: T) => boolean): number {
  let end = start + 1;
  while (end < items.length && !ends(items[end - 1])) end++;
  return end;
}

/** Whether `items[start, end)` are, one for one, the very items of `run`. */
export function sameRun<T>(
  run: Run<T> | undefined,
  items: readonly T[],
  start: number,
  end: number,
): boolean {
  if (run === undefined || run.items.length !== end - start) return false;
  for (let i = start; i < end; i++) if (run.items[i - start] !== items[i]) return false;
  return true;
}

/**
 * Pushes the text of every item onto `out`, one piece per run: a run made of the very items of a
 * kept run (items are frozen or otherwise never change) is that run's text; any other is written
 * with `text` and kept, keyed on its first item (a WeakMap, so it goes with its items).
 */
export function joinRuns<T extends object>(
  items: readonly T[],
  ends: (item: T) => boolean,
  text: (item: T) => string,
  runs: WeakMap<T, Run<T>>,
  out: string[],
): void {
  for (let start = 0; start < items.length; ) {
    const end = runEnd(items, start, ends);
    let run = runs.get(items[start]);
    if (!sameRun(run, items, start, end)) {
      const slice = items.slice(start, end);
      run = { items: slice, text: slice.map(text).join('') };
      runs.set(items[start], run);
    }
    out.push(run!.text);
    start = end;
  }
}
