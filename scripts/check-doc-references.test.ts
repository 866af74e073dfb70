// scripts/check-doc-references.ts, on made-up files: each kind of dangling citation is reported
// with its file and line, and the forms the repository uses pass. The citations are assembled at
// run time so this file itself holds none for the check to find.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type HeadingsOf, headingsIn, problemsIn, type SourceFile } from './check-doc-references.ts';

const page = (name: string) => `docs/${name}.md`;
const cite = (name: string, ...headings: string[]) =>
  `${page(name)} ${headings.map((h) => `"${h}"`).join(', ')}`;

const pages = new Map([
  [page('runtime'), '# The runtime\n\n## Cron triggers\n\ntext\n\n### Write order (`cell publish`)\n'],
  [page('api'), '# API\n\n## Conventions\n\n```md\n## Not a heading\n```\n\n## Error codes\n'],
]);
const headingsOf: HeadingsOf = (name) => {
  const text = pages.get(name);
  return text === undefined ? undefined : headingsIn(text);
};
const check = (...files: SourceFile[]) => problemsIn(files, headingsOf);

test('a citation of a page and heading that exist passes, whole or by its start', () => {
  assert.deepEqual(
    check(
      { path: 'a.ts', text: `// ${cite('runtime', 'Cron triggers')}: the schedule.\n` },
      {
        path: 'b.go',
        text: `// (${cite('runtime', 'Write order')}) and ${cite('api', 'Conventions', 'Error codes')}\n`,
      },
      { path: 'c.md', text: `See ${page('api')} "Conventions" and "Error codes".\n` },
    ),
    [],
  );
});

test('a made-up page is reported with its file and line', () => {
  assert.deepEqual(check({ path: 'src/x.ts', text: `// one\n// ${cite('nowhere', 'Cron triggers')}\n` }), [
    `src/x.ts:2: ${page('nowhere')} does not exist`,
  ]);
  assert.deepEqual(check({ path: 'README.md', text: `Read \`${page('nowhere')}\`.\n` }), [
    `README.md:1: ${page('nowhere')} does not exist`,
  ]);
});

test('a made-up heading is reported, and so is each bad one of a list', () => {
  assert.deepEqual(check({ path: 'a.ts', text: `// ${cite('runtime', 'Cron runs')}\n` }), [
    `a.ts:1: ${page('runtime')} has no heading "Cron runs"`,
  ]);
  assert.deepEqual(
    check({ path: 'a.go', text: `// ${cite('api', 'Conventions', 'Errors', 'Error codes')}\n` }),
    [`a.go:1: ${page('api')} has no heading "Errors"`],
  );
  // The start of a heading counts only up to a word's end; a heading inside a code block is none.
  assert.deepEqual(check({ path: 'a.ts', text: `// ${cite('runtime', 'Cron trig')}\n` }), [
    `a.ts:1: ${page('runtime')} has no heading "Cron trig"`,
  ]);
  assert.deepEqual(check({ path: 'a.ts', text: `// ${cite('api', 'Not a heading')}\n` }), [
    `a.ts:1: ${page('api')} has no heading "Not a heading"`,
  ]);
});

test('a heading quoted on the next comment line is checked (TypeScript, Go, shell)', () => {
  for (const marker of ['//', '#', ' *']) {
    const text = `${marker} implements ${page('runtime')}\n${marker} "Cron triggerz" and more\n`;
    assert.deepEqual(check({ path: 'f', text }), [`f:1: ${page('runtime')} has no heading "Cron triggerz"`]);
    const split = `${marker} implements ${page('runtime')} "Cron\n${marker} triggers" and more\n`;
    assert.deepEqual(check({ path: 'f', text: split }), []);
  }
});

test('a quoted path in code is a file name, not a citation', () => {
  assert.deepEqual(check({ path: 'a.test.ts', text: `const files = { '${page('readme')}': 'x' };\n` }), []);
});

test('citations of documents the repository does not ship are reported', () => {
  const unshipped = [
    ['Iss', 'ue 4 items 4 and 5'],
    ['iss', 'ue #12'],
    ['Sp', 'ec 1 "Operators"'],
    ['see sp', 'ec/1-node-api.md'],
    ['DES', 'IGN.md says so'],
    ['../sh', 'ared/notes'],
  ].map((parts) => parts.join(''));
  for (const line of unshipped) {
    const problems = check({ path: 'a.ts', text: `// fine\n// ${line}\n` });
    assert.equal(problems.length, 1, line);
    assert.match(problems[0] ?? '', /^a\.ts:2: .*which the repository does not ship$/, line);
  }
  assert.deepEqual(check({ path: 'a.ts', text: '// tissue 4, respect 2, inspect/ and the specs\n' }), []);
});
