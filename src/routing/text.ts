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

/** The text of consecutive items (routes, routers), kept to be joined into later renderings. */
export interface Run {
  /** What the items were: frozen objects, or objects made for one rendering, which never match. */
  ids: object[];
  text: string;
}

/** How joinRuns reads an item. */
export interface RunItems<T> {
  /** An object that stands for everything the item's text is written from. */
  id(item: T): object;
  /** Whether a run ends after the item (endsRun of its name). */
  ends(item: T): boolean;
  /** Pushes the text of `items[start, end)` onto `out`, in pieces (see joinRuns). */
  write(items: readonly T[], start: number, end: number, out: string[]): void;
}

/**
 * Whether a run ends after the item of this name: about one name in 8, by a hash of the name
 * alone, so that adding or removing an item changes its own run and no other.
 */
export function endsRun(name: string): boolean {
  let hash = 0x811c9dc5; // FNV-1a
  for (let i = 0; i < name.length; i++) hash = Math.imul(hash ^ name.charCodeAt(i), 0x01000193);
  return hash >>> 29 === 0;
}

/** Where the run that starts at `start` ends (exclusive). */
export function runEnd<T>(items: readonly T[], start: number, how: RunItems<T>): number {
  let end = start + 1;
  while (end < items.length && !how.ends(items[end - 1])) end++;
  return end;
}

/** Whether `items[start, end)` are, one for one, the items `run` was written from. */
export function sameRun<T>(
  run: Run | undefined,
  items: readonly T[],
  start: number,
  end: number,
  how: RunItems<T>,
): boolean {
  if (run === undefined || run.ids.length !== end - start) return false;
  for (let i = start; i < end; i++) if (run.ids[i - start] !== how.id(items[i])) return false;
  return true;
}

/**
 * Pushes the text of every item onto `out`, one piece per run: a run of the very items of a kept
 * run is that run's text; any other is written and kept, keyed on its first item's id (a WeakMap,
 * so the text goes with its items). A run is written as many short pieces and one join rather
 * than by concatenation: V8 keeps a concatenation as a tree of its parts, and joining such trees
 * costs several times joining flat strings (see bench/RESULTS.md, Routing render).
 */
export function joinRuns<T>(
  items: readonly T[],
  how: RunItems<T>,
  runs: WeakMap<object, Run>,
  out: string[],
): void {
  for (let start = 0; start < items.length; ) {
    const end = runEnd(items, start, how);
    let run = runs.get(how.id(items[start]));
    if (!sameRun(run, items, start, end, how)) {
      const ids: object[] = [];
      const pieces: string[] = [];
      for (let i = start; i < end; i++) ids.push(how.id(items[i]));
      how.write(items, start, end, pieces);
      run = { ids, text: pieces.join('') };
      runs.set(ids[0], run);
    }
    out.push(run!.text);
    start = end;
  }
}

/** Whether two lists of pieces are the same strings, one for one (kept pieces compare by reference). */
export function samePieces(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
