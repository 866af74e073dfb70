import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Command } from 'commander';
import { buildProgram } from '../main.ts';
import { completionScript, completionTree } from './completion.ts';

function sample(): Command {
  const program = new Command('svc').version('1', '-V, --version');
  const fleet = program.command('fleet').description('Fleet');
  fleet.command('nodes').description('List nodes').option('--json', 'as JSON');
  program.command('secret-thing', { hidden: true });
  return program;
}

test('the tree lists each visible command path with its subcommands and flags', () => {
  const tree = completionTree(sample());
  assert.deepEqual(
    tree.map((entry) => entry.path.join(' ')),
    ['', 'fleet', 'fleet nodes'],
  );
  assert.deepEqual(
    tree[0]?.subcommands.map((s) => s.name),
    ['fleet'],
  );
  assert.deepEqual(
    tree[0]?.flags.map((f) => f.name),
    ['--version', '-V', '--help'],
  );
  assert.deepEqual(
    tree[2]?.flags.map((f) => f.name),
    ['--json', '--help'],
  );
});

test('the real program: top level in help order, completion itself hidden, nested groups present', async () => {
  const tree = completionTree(await buildProgram());
  const top = tree.find((entry) => entry.path.length === 0);
  assert.deepEqual(
    top?.subcommands.map((s) => s.name),
    [
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
    ],
  );
  const paths = tree.map((entry) => entry.path.join(' '));
  assert.ok(paths.includes('app secret set'));
  for (const path of [
    'kv namespace list',
    'kv key put',
    'kv key get',
    'kv key list',
    'kv key delete',
    'kv bulk put',
    'r2 bucket list',
    'r2 object put',
    'r2 object get',
    'r2 object list',
    'r2 object delete',
    'd1 list',
    'd1 execute',
    'd1 export',
    'd1 migrations list',
    'd1 migrations apply',
    'd1 time-travel info',
    'd1 time-travel restore',
  ])
    assert.ok(paths.includes(path), path);
  assert.ok(!paths.some((path) => path.startsWith('completion')));
  const sail = tree.find((entry) => entry.path.join(' ') === 'sail');
  assert.ok(sail?.flags.some((f) => f.name === '--bucket'));
});

test('each shell script names every subcommand and quotes descriptions with quotes in them', () => {
  const program = sample();
  program.command('quoted').description("it's quoted");
  for (const shell of ['bash', 'zsh', 'fish'] as const) {
    const script = completionScript(shell, program);
    assert.match(script, /nodes/);
    assert.match(script, shell === 'fish' ? /-l json/ : /--json/);
    assert.doesNotMatch(script, /secret-thing/);
  }
  assert.match(completionScript('fish', program), /-d 'it'\\''s quoted'/);
  assert.match(completionScript('bash', program), /complete -F _svc svc/);
  assert.match(completionScript('zsh', program), /^#compdef svc/);
});
