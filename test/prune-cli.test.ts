// `svc deployment prune` as a process (docs/cli.md "svc deployment" and "Output and exit status"): the
// warning first, flag refusals with the spec's titles, the consent rule on a pipe and on a real
// terminal (util-linux `script` gives the command a pseudo-terminal), `--dry-run`, and the
// capability guard. The rules themselves are tested in-process in test/prune.test.ts.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { keys } from '../src/registry/keys.ts';
import { type DirStore, openDirStore } from '../src/store/dir.ts';
import { DAY_MS, seedDeployment, seedNode, seedSelector } from './helpers/runtime-seed.ts';
import { runSvc, SVC_BIN, tempDir } from './helpers/svc.ts';

const NOW = Date.now();
const v = (n: number) => `00000000000${n}bb`;

let root: string;
let store: DirStore;
const bucket = () => ['--endpoint', `file://${root}`];
const prune = (args: string[], options: { input?: string } = {}) =>
  runSvc(['deployment', 'prune', ...bucket(), '--name', 'shop', ...args], {
    env: { SVC_SILENCE_WARNINGS: '' },
    ...options,
  });

async function deploymentExists(version: string): Promise<boolean> {
  return (
    (await store.list(keys.runtimeDeployment('shop', 'web', version), { recursive: true })).objects.length > 0
  );
}

/** Runs the command with a pseudo-terminal as its stdin, typing `answer`. */
function onTerminal(args: string[], answer: string): { code: number; output: string } {
  const command = [process.execPath, SVC_BIN, 'deployment', 'prune', ...bucket(), '--name', 'shop', ...args]
    .map((part) => `'${part.replaceAll("'", "'\\''")}'`)
    .join(' ');
  try {
    const output = execFileSync('script', ['-qefc', command, '/dev/null'], {
      input: `${answer}\n`,
      encoding: 'utf8',
    });
    return { code: 0, output };
  } catch (err) {
    const e = err as { status: number; stdout: string };
    return { code: e.status, output: e.stdout };
  }
}

describe('svc deployment prune (process)', () => {
  beforeEach(async () => {
    root = tempDir('svc-prune-cli-');
    store = await openDirStore(root);
    await seedNode(store, 'n1', { cell: '0.6.2' });
    for (const n of [1, 2, 3]) {
      await seedDeployment(store, 'shop', {
        script: 'web',
        version: v(n),
        createdMs: NOW - (4 - n) * DAY_MS,
      });
    }
    await seedSelector(store, 'shop', 'web', v(3));
  });
  afterEach(async () => {
    await store.close();
  });

  it('refuses a bad --keep or --older-than with the spec titles, after the warning', async () => {
    const keep = await prune(['--keep', '-1']);
    assert.equal(keep.code, 1);
    const lines = keep.stderr.trim().split('\n');
    assert.match(lines[0]!, /^svc: warning: /);
    assert.match(lines.at(-1)!, /^svc: Invalid --keep: .* \[urn:svc:invalid-input\]$/);
    const age = await prune(['--older-than', '2w']);
    assert.match(age.stderr, /svc: Invalid --older-than: .* \[urn:svc:invalid-input\]/);
  });

  it('refuses input that is no terminal without --yes, deleting nothing', async () => {
    const result = await prune(['--keep', '1', '--older-than', '1h'], { input: 'y\n' });
    assert.equal(result.code, 1);
    assert.match(result.stderr, /svc: Nothing to answer with: .*--yes.* \[urn:svc:invalid-input\]/);
    assert.equal(await deploymentExists(v(1)), true);
  });

  it('--dry-run prints the plan and deletes nothing; --yes deletes', async () => {
    const dry = await prune(['--keep', '1', '--older-than', '1h', '--dry-run']);
    assert.equal(dry.code, 0, dry.stderr);
    assert.match(dry.stdout, new RegExp(`delete  web/${v(1)}`));
    assert.match(
      dry.stdout,
      new RegExp(`keep    web/${v(3)}  the fleet's selector points at it; within the newest 1 deployments`),
    );
    assert.equal(await deploymentExists(v(1)), true);
    const real = await prune(['--keep', '1', '--older-than', '1h', '--yes']);
    assert.equal(real.code, 0, real.stderr);
    assert.equal(await deploymentExists(v(1)), false);
    assert.equal(await deploymentExists(v(2)), false);
    assert.equal(await deploymentExists(v(3)), true);
  });

  it('asks [y/N] on a terminal: yes deletes, anything else does not', () => {
    const declined = onTerminal(['--keep', '1', '--older-than', '1h'], 'nope');
    assert.equal(declined.code, 0, declined.output);
    assert.match(declined.output, /\[y\/N\]/);
    assert.match(declined.output, /Nothing deleted\./);
    const accepted = onTerminal(['--keep', '1', '--older-than', '1h'], 'YES');
    assert.equal(accepted.code, 0, accepted.output);
    assert.match(accepted.output, /Deleted 2 deployment\(s\)/);
  });

  it('is capability-missing, even for --dry-run, while a node runs an unverified runtime or none answers', async () => {
    await seedNode(store, 'n2', { cell: '0.9.0' });
    const result = await prune(['--dry-run']);
    assert.equal(result.code, 1);
    assert.match(
      result.stderr,
      /svc: Runtime release not verified: node n2 runs cell 0\.9\.0.* \[urn:svc:capability-missing\]/,
    );
    await seedNode(store, 'n1', { cell: '0.6.2', beatMs: NOW - 60_000 });
    await seedNode(store, 'n2', { cell: '0.6.2', beatMs: NOW - 60_000 });
    const none = await prune(['--dry-run']);
    assert.match(none.stderr, /\[urn:svc:capability-missing\]/);
  });

  it('names the application with --name and --env, refusing a bad one with invalid-slug', async () => {
    const result = await runSvc([
      'deployment',
      'prune',
      ...bucket(),
      '--name',
      'shop',
      '--env',
      'Bad',
      '--dry-run',
    ]);
    assert.match(result.stderr, /\[urn:svc:invalid-slug\]/);
  });
});
