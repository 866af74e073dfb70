// Gitignore-style patterns, one way for every file svc reads them from: `.svcignore` when
// `svc deploy` packs a project (src/cli/pack.ts), and `.assetsignore` both when `svc deploy` packs
// the assets folder and when `cell publish` collects the assets (runtime/src/assets.ts;
// docs/assets.md ".assetsignore").

export interface IgnoreRule {
  negate: boolean;
  dirOnly: boolean;
  regex: RegExp;
}

/**
 * One line, gitignore style: `#` comments and blank lines skipped; `!` re-includes;
 * a trailing `/` matches directories only; a pattern with a `/` before its end is anchored at the
 * root, otherwise it matches a name at any depth; `*` matches within a name, `**` across names,
 * `?` one character. Answers null for lines that say nothing.
 */
export function compileRule(line: string): IgnoreRule | null {
  let pattern = line.replace(/\s+$/, '');
  if (pattern === '' || pattern.startsWith('#')) return null;
  let negate = false;
  if (pattern.startsWith('!')) {
    negate = true;
    pattern = pattern.slice(1);
  }
  if (pattern.startsWith('\\')) pattern = pattern.slice(1);
  const dirOnly = pattern.endsWith('/');
  if (dirOnly) pattern = pattern.slice(0, -1);
  const anchored = pattern.includes('/');
  if (pattern.startsWith('/')) pattern = pattern.slice(1);
  if (pattern === '') return null;
  let source = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '*' && pattern[i + 1] === '*') {
      const slash = pattern[i + 2] === '/';
      source += slash ? '(?:.*/)?' : '.*';
      i += slash ? 2 : 1;
    } else if (c === '*') source += '[^/]*';
    else if (c === '?') source += '[^/]';
    else source += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  const prefix = anchored ? '^' : '^(?:.*/)?';
  return { negate, dirOnly, regex: new RegExp(`${prefix}${source}$`) };
}

/** Whether a path (relative, `/`-separated) is left out; `isDir` for directories. */
export function matchesIgnore(rules: readonly IgnoreRule[], path: string, isDir: boolean): boolean {
  let ignored = false;
  for (const rule of rules) {
    if (rule.dirOnly && !isDir) continue;
    if (!rule.regex.test(path)) continue;
    if ((rule as IgnoreRule & { fixed?: boolean }).fixed) return true;
    ignored = !rule.negate;
  }
  return ignored;
}

/**
 * Whether a file (relative, `/`-separated) is left out by a walk that skips the folders the
 * rules name: the file itself, or any folder above it, is matched.
 */
export function fileIgnoredInWalk(rules: readonly IgnoreRule[], path: string): boolean {
  for (let at = path.indexOf('/'); at > 0; at = path.indexOf('/', at + 1)) {
    if (matchesIgnore(rules, path.slice(0, at), true)) return true;
  }
  return matchesIgnore(rules, path, false);
}
