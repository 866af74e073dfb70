// `svc completion <shell>` end to end: the script the real binary prints is loaded into the real
// shell and asked for completions the way the shell's own completion machinery asks.

import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { runSvc, tempDir } from './helpers/svc.ts';

const hasShell = (shell: string) => spawnSync(shell, ['-c', 'true']).status === 0;

/** Installs the shell from Debian's packages when the machine lacks it (the test needs it). */
function ensureShell(shell: string): void {
  if (hasShell(shell)) return;
  const installed = spawnSync('sh', ['-c', `apt-get update -qq && apt-get install -y -qq ${shell}`], {
    encoding: 'utf8',
  });
  assert.ok(hasShell(shell), `installing ${shell} failed:\n${installed.stderr}`);
}

async function scriptFile(shell: string): Promise<string> {
  const result = await runSvc(['completion', shell]);
  assert.equal(result.code, 0, result.stderr);
  const file = join(tempDir('svc-completion-'), `svc.${shell}`);
  writeFileSync(file, result.stdout);
  return file;
}

/** Runs the bash completion function for the words typed so far (the last one being completed). */
function bashComplete(file: string, words: string[]): string[] {
  const program = `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((\${#COMP_WORDS[@]} - 1)); _svc; printf '%s\\n' "\${COMPREPLY[@]}"`;
  const out = execFileSync('bash', ['--noprofile', '--norc', '-c', program, 'bash', file, ...words], {
    encoding: 'utf8',
  });
  return out.split('\n').filter((line) => line !== '');
}

test('bash: top-level commands in help order, nested subcommands, flags of the typed command', async () => {
  const file = await scriptFile('bash');
  assert.deepEqual(bashComplete(file, ['svc', '']), [
    'sail',
    'health',
    'remote',
    'operator',
    'fleet',
    'app',
    'deploy',
    'deployment',
    'trust',
    'metrics',
    'traces',
    'wg',
    'kv',
    'r2',
    'd1',
    'queues',
    'objects',
    'tail',
    'console',
  ]);
  assert.deepEqual(bashComplete(file, ['svc', 'de']), ['deploy', 'deployment']);
  assert.deepEqual(bashComplete(file, ['svc', 'fleet', '']), ['nodes', 'freeze', 'unfreeze']);
  assert.deepEqual(bashComplete(file, ['svc', 'app', 'secret', '']), ['set', 'bulk', 'list', 'remove']);
  assert.deepEqual(bashComplete(file, ['svc', 'kv', '']), ['namespace', 'key', 'bulk']);
  assert.deepEqual(bashComplete(file, ['svc', 'kv', 'key', '']), ['put', 'get', 'list', 'delete']);
  assert.deepEqual(bashComplete(file, ['svc', 'kv', 'key', 'put', '--b']), ['--binding']);
  assert.deepEqual(bashComplete(file, ['svc', 'r2', '']), ['bucket', 'object']);
  assert.deepEqual(bashComplete(file, ['svc', 'r2', 'object', '']), ['put', 'get', 'list', 'delete']);
  assert.deepEqual(bashComplete(file, ['svc', 'r2', 'object', 'put', '--b']), ['--binding', '--bucket']);
  assert.deepEqual(bashComplete(file, ['svc', 'r2', 'object', 'put', '--p']), ['--pipe']);
  // Flags of `svc fleet nodes` after another flag, not those of `svc fleet`.
  const flags = bashComplete(file, ['svc', 'fleet', 'nodes', '--json', '--buc']);
  assert.deepEqual(flags, ['--bucket']);
  assert.ok(!bashComplete(file, ['svc', '']).includes('completion'), 'the command itself stays hidden');
});

test('an unknown shell is refused with one line', async () => {
  const result = await runSvc(['completion', 'tcsh']);
  assert.equal(result.code, 1);
  assert.equal(
    result.stderr,
    'svc: Unknown shell: tcsh is not one of bash, zsh, fish [urn:svc:invalid-input]\n',
  );
});

test('zsh: the script parses', async () => {
  ensureShell('zsh');
  const file = await scriptFile('zsh');
  const check = spawnSync('zsh', ['-n', file], { encoding: 'utf8' });
  assert.equal(check.status, 0, check.stderr);
});

test('fish: the script parses and completes subcommands and flags', async () => {
  ensureShell('fish');
  const file = await scriptFile('fish');
  const check = spawnSync('fish', ['-n', file], { encoding: 'utf8' });
  assert.equal(check.status, 0, check.stderr);
  const complete = (line: string) =>
    execFileSync('fish', ['--no-config', '-c', `source ${file}; complete -C '${line}'`], { encoding: 'utf8' })
      .split('\n')
      .filter((entry) => entry !== '')
      .map((entry) => entry.split('\t')[0]);
  assert.deepEqual(complete('svc fleet '), ['freeze', 'nodes', 'unfreeze']);
  assert.ok(complete('svc fleet nodes --b').includes('--bucket'));
});
