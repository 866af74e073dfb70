// The reference in docs/ follows the code: every command and flag of the CLI is named in
// docs/cli.md (the daemon's own flags in docs/configuration.md, which is generated), and every
// folder of the tree in docs/architecture.md. A command or folder added without its line fails here.
// That every docs/<page>.md "<Heading>" citation names a heading is `make check`'s
// (scripts/check-doc-references.ts).

import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import type { Command } from 'commander';
import { buildProgram } from './main.ts';

const root = new URL('../', import.meta.url);
const read = (path: string) => readFileSync(new URL(path, root), 'utf8');

function* commands(command: Command, path: string[] = []): Generator<{ path: string; command: Command }> {
  for (const child of command.commands) {
    const childPath = [...path, child.name()];
    yield { path: childPath.join(' '), command: child };
    yield* commands(child, childPath);
  }
}

function longFlags(command: Command): string[] {
  return command.options
    .map((option) => option.long)
    .filter((flag): flag is string => flag !== undefined && flag !== '--help' && flag !== '--version');
}

test('docs/cli.md names every command, and every flag but the daemon settings', async () => {
  const cli = read('docs/cli.md');
  const configuration = read('docs/configuration.md');
  const missing: string[] = [];
  for (const { path, command } of commands(await buildProgram())) {
    if (!cli.includes(`\`${path}`) && !cli.includes(`\`svc ${path}`)) missing.push(`command ${path}`);
    // `svc sail` takes one flag per setting; those are listed in the generated configuration page.
    const doc = path === 'sail' ? configuration : cli;
    for (const flag of longFlags(command)) {
      if (path === 'sail' && flag === '--config') continue;
      // A boolean's `--no-` form is documented once for all ("Booleans take `--no-<flag>`").
      const named = flag.startsWith('--no-') && path === 'sail' ? `--${flag.slice(5)}` : flag;
      if (!new RegExp(`${named}(?![a-z-])`).test(doc)) missing.push(`${path} ${flag}`);
    }
  }
  assert.deepEqual(missing, [], 'add these to docs/cli.md');
});

test('docs/architecture.md names every folder of the tree', () => {
  const architecture = read('docs/architecture.md');
  const folders = (dir: string): string[] =>
    readdirSync(new URL(dir, root), { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .flatMap((entry) => [`${dir}${entry.name}/`, ...folders(`${dir}${entry.name}/`)]);
  const expected = [
    ...folders('src/'),
    ...[
      'adapter/',
      'bench/',
      'bin/',
      'docs/',
      'examples/',
      'packaging/',
      'runtime/',
      'scripts/',
      'test/',
      'testdata/',
    ],
  ];
  const missing = expected.filter((folder) => !architecture.includes(`\`${folder}`));
  assert.deepEqual(missing, [], 'add these to the layout table of docs/architecture.md');
});
