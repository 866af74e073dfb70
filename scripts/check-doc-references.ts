// `make check`: every citation of a section, `docs/<page>.md "<Heading>"` (also a page elsewhere in
// the tree, such as `bench/RESULTS.md "Density"`), anywhere in the repository (TypeScript, Go, shell,
// Markdown, the Makefile) names a page that exists and one of its headings, backticks ignored; and
// nothing cites a document the repository does not ship: a numbered issue of a tracker, a numbered
// spec, a spec folder, the design notes or the shared folder the project was once built beside.
// docs/architecture.md "Conventions" says how code cites the documents.
//
// scripts/with-node node scripts/check-doc-references.ts   (exit status 1 and one line per problem)

import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface SourceFile {
  path: string;
  text: string;
}

/** A page's headings, normalised; undefined when the page does not exist. */
export type HeadingsOf = (page: string) => Set<string> | undefined;

const TEXT_FILE =
  /(\.(ts|mts|js|mjs|go|md|sh|bash|toml|ya?ml|service|conf)|(^|\/)(Makefile|Containerfile|Dockerfile|Caddyfile))$/;

// A path to a Markdown page, not part of a longer path or address (a URL's page is not ours).
const PAGE = /(?<![\w./:-])((?:[\w.-]+\/)+[\w.-]+\.md)\b/g;
// What may follow a page before its quoted headings: nothing, a colon or a comma.
const FIRST_HEADING = /^[:,]?[ \t]+"([^"\n]+)"/;
const NEXT_HEADING = /^(?:,|;)?(?:[ \t]+(?:and|or))?[ \t]+"([^"\n]+)"/;
// A comment carried onto the next line: the break and the next line's comment marker.
const CONTINUATION = /[ \t]*\n[ \t]*(?:\/\/+|#+|\*+(?!\/))?[ \t]*/g;

// Citations of documents the repository does not ship.
const UNSHIPPED: Array<[RegExp, string]> = [
  [/\b[Ii]ssues? #?\d+/, 'cites an issue by number'],
  [/\b[Ss]pec(?:ification)?s? \d+/, 'cites a spec by number'],
  [/(?<![\w.-])spec\//, 'cites a spec folder'],
  [/\bDESIGN\.md\b/, 'cites the design notes'],
  [/\.\.\/shared\b|\/work\/shared\b/, 'cites the shared folder'],
];

export function normaliseHeading(text: string): string {
  return text.replaceAll('`', '').replace(/\s+/g, ' ').trim();
}

/** A citation names a heading by its whole text or its start ending at a word's end ("Secrets" for
 * "Secrets: sealed to the nodes"), so a reader searching the page for it lands on the section. */
export function namesHeading(headings: Set<string>, cited: string): boolean {
  const wanted = normaliseHeading(cited);
  for (const heading of headings) {
    if (heading === wanted) return true;
    if (heading.startsWith(wanted) && /^[^\p{L}\p{N}]/u.test(heading.slice(wanted.length))) return true;
  }
  return false;
}

/** The headings of a Markdown page, fenced code blocks skipped. */
export function headingsIn(markdown: string): Set<string> {
  const headings = new Set<string>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    if (fenced) continue;
    const match = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (match?.[1] !== undefined) headings.add(normaliseHeading(match[1]));
  }
  return headings;
}

function lineOf(text: string, index: number): number {
  let line = 1;
  for (let at = text.indexOf('\n'); at !== -1 && at < index; at = text.indexOf('\n', at + 1)) line++;
  return line;
}

/** The quoted headings that follow a page's name, a comment possibly running onto the next lines. */
function quotedHeadingsAfter(text: string, end: number): string[] {
  let rest = text.slice(end, end + 600).replace(CONTINUATION, ' ');
  const headings: string[] = [];
  let match = FIRST_HEADING.exec(rest);
  while (match?.[1] !== undefined) {
    headings.push(match[1]);
    rest = rest.slice(match[0].length);
    match = NEXT_HEADING.exec(rest);
  }
  return headings;
}

/** One line per problem, `path:line: what`, in the order found. */
export function problemsIn(files: SourceFile[], headingsOf: HeadingsOf): string[] {
  const problems: string[] = [];
  for (const { path, text } of files) {
    for (const match of text.matchAll(PAGE)) {
      const page = match[1] ?? '';
      const where = `${path}:${lineOf(text, match.index)}`;
      const quoted = quotedHeadingsAfter(text, match.index + match[0].length);
      // A page named without a section must exist when it is one of docs/; other paths in prose
      // (a file of another project, a placeholder) are not checked unless a heading is cited.
      // A quoted path is a file name in code (a test's fixture), not a citation.
      if (quoted.length === 0 && (!page.startsWith('docs/') || /['"]/.test(text[match.index - 1] ?? '')))
        continue;
      const headings = headingsOf(page);
      if (headings === undefined) {
        problems.push(`${where}: ${page} does not exist`);
        continue;
      }
      for (const heading of quoted) {
        if (!namesHeading(headings, heading)) problems.push(`${where}: ${page} has no heading "${heading}"`);
      }
    }
    const lines = text.split('\n');
    lines.forEach((line, index) => {
      for (const [pattern, what] of UNSHIPPED) {
        const found = pattern.exec(line);
        if (found !== null)
          problems.push(`${path}:${index + 1}: ${what} ("${found[0]}"), which the repository does not ship`);
      }
    });
  }
  return problems;
}

/** The repository's text files: tracked ones and new ones not ignored, as they are on disk. */
export function repositoryFiles(root: string): SourceFile[] {
  const listed = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: root,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  return [...new Set(listed.split('\0'))]
    .filter((path) => TEXT_FILE.test(path) && existsSync(join(root, path)))
    .map((path) => ({ path, text: readFileSync(join(root, path), 'utf8') }));
}

export function headingsFromDisk(root: string): HeadingsOf {
  const cache = new Map<string, Set<string> | undefined>();
  return (page) => {
    if (!cache.has(page)) {
      const file = join(root, page);
      cache.set(page, existsSync(file) ? headingsIn(readFileSync(file, 'utf8')) : undefined);
    }
    return cache.get(page);
  };
}

if (import.meta.main) {
  const root = new URL('../', import.meta.url).pathname;
  const problems = problemsIn(repositoryFiles(root), headingsFromDisk(root));
  for (const problem of problems) console.error(problem);
  if (problems.length > 0) {
    console.error(`${problems.length} citation(s) to fix: name a docs/<page>.md "<Heading>" that exists`);
    process.exit(1);
  }
}
