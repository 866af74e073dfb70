// Real Workers projects on the real runtime (`cell publish` + `cell serve`, real workerd, the
// local-directory bucket): a CommonJS dependency requiring Node built-ins under nodejs_compat,
// wrangler's module rules with and without no_bundle, and cron triggers fired once per scheduled
// time across three replicas of the application (three nodes' runtime processes on one bucket).
// Projects configured by a wrangler file are converted exactly as `svc deploy` converts them.

import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { readProjectConfig } from '../src/cli/pack.ts';
import { keys } from '../src/registry/keys.ts';
import { openDirStore } from '../src/store/dir.ts';
import {
  type BucketEnv,
  type CellProcess,
  copyProject,
  dirBucketEnv,
  EXAMPLES,
  fetchText,
  publish,
  startCell,
} from './helpers/cell.ts';
import { tempDir, waitFor } from './helpers/svc.ts';

const SERVE_DEADLINE_MS = 30_000;
/** Two minute boundaries after the replicas serve, plus start-up: the cron test's own deadline. */
const CRON_DEADLINE_MS = 200_000;

/** A copy of an example with its config as the artifact carries it (`cell.jsonc`). */
async function asArtifact(example: string, edit?: (text: string) => string): Promise<string> {
  const dir = copyProject(join(EXAMPLES, example));
  const config = await readProjectConfig(dir);
  assert.ok(config, `${example} has a worker config`);
  const text = config.bytes.toString('utf8');
  writeFileSync(join(dir, config.file), edit ? edit(text) : text);
  return dir;
}

describe('real Workers projects on cell', () => {
  let bucketDir: string;
  let bucket: BucketEnv;
  const running: CellProcess[] = [];
  const serve = async (app: string, node: string) => {
    const cell = await startCell(app, node, bucket);
    running.push(cell);
    return cell;
  };
  const servedBody = async (cell: CellProcess, deployment: string, path = '/') => {
    await waitFor(
      async () => {
        const h = await fetchText(`${cell.url}/.well-known/cell/health`);
        return h?.status === 200 && JSON.parse(h.body).deployment === deployment;
      },
      () => `cell to serve ${deployment}\n${cell.stderr()}`,
      SERVE_DEADLINE_MS,
    );
    const answer = await fetchText(`${cell.url}${path}`);
    assert.equal(answer?.status, 200, `${path}: ${answer?.body}\n${cell.stderr()}`);
    return answer!.body;
  };

  before(() => {
    bucketDir = tempDir('cell-workers-bucket-');
    bucket = dirBucketEnv(bucketDir);
  });
  after(async () => {
    await Promise.all(running.map((cell) => cell.stop()));
    rmSync(bucketDir, { recursive: true, force: true });
  });

  it('serves a CommonJS dependency that requires events, buffer and util under nodejs_compat', async () => {
    const project = await asArtifact('nodejs-compat');
    const result = await publish(project, 'compat', bucket);
    assert.equal(result.code, 0, result.stderr);
    const cell = await serve('compat', 'node-a');
    const body = JSON.parse(await servedBody(cell, result.published!.deployment));
    assert.deepEqual(body, { heard: 'hello node', encoded: Buffer.from('hello node').toString('base64') });
  });

  it('loads text modules by the module rules, bundled and with no_bundle', async () => {
    const expected = {
      schema: 'CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);',
      page: '<p>hi</p>',
    };
    const bundled = await asArtifact('text-rules');
    const one = await publish(bundled, 'texts', bucket);
    assert.equal(one.code, 0, one.stderr);
    const store = await openDirStore(bucketDir);
    const manifest = JSON.parse(
      new TextDecoder().decode(
        (await store.get(keys.runtimeManifest('texts', 'text-rules', one.published!.deployment)))!.body,
      ),
    );
    const types = manifest.modules.map(
      (m: { name: string; type: string }) => `${m.type}:${m.name.replace(/^[0-9a-f]{40}-/, '')}`,
    );
    assert.deepEqual(types.sort(), ['esm:index.js', 'text:page.tmpl', 'text:schema.sql']);
    await store.close();
    const a = await serve('texts', 'node-a');
    assert.deepEqual(JSON.parse(await servedBody(a, one.published!.deployment)), expected);

    const unbundled = await asArtifact('text-rules', (text) =>
      text.replace('"rules"', '"no_bundle": true, "rules"'),
    );
    const two = await publish(unbundled, 'texts-nb', bucket);
    assert.equal(two.code, 0, two.stderr);
    const b = await serve('texts-nb', 'node-a');
    assert.deepEqual(JSON.parse(await servedBody(b, two.published!.deployment)), expected);
  });

  it('refuses a cron expression that is not five fields, naming it', async () => {
    const project = await asArtifact('cron', (text) => text.replace('* * * * *', '*/5 * * *'));
    const result = await publish(project, 'bad-cron', bucket);
    assert.equal(result.code, 1);
    assert.match(result.stderr, /"triggers\.crons" "\*\/5 \* \* \*" is no cron expression: give five fields/);
  });

  it('fires a * * * * * cron exactly once per minute across three replicas', {
    timeout: CRON_DEADLINE_MS + 60_000,
  }, async () => {
    const project = await asArtifact('cron');
    const result = await publish(project, 'ticker', bucket);
    assert.equal(result.code, 0, result.stderr);
    const deployment = result.published!.deployment;
    const replicas = await Promise.all(['node-a', 'node-b', 'node-c'].map((node) => serve('ticker', node)));
    for (const cell of replicas) await servedBody(cell, deployment);
    const servingSince = Date.now();

    const store = await openDirStore(bucketDir);
    const claims = async () => {
      const listed = await store.list(keys.runtimeCronClaimsPrefix('ticker'), { recursive: true });
      const all = [];
      for (const object of listed.objects) {
        const got = await store.get(object.key);
        if (got) all.push(JSON.parse(new TextDecoder().decode(got.body)));
      }
      return all as {
        scheduled_ms: number;
        node: string;
        outcome?: string;
        cron: string;
        deployment: string;
      }[];
    };
    // Two whole minutes after every replica served: both times fired and finished.
    const done = await waitFor(
      async () => {
        const finished = (await claims()).filter((c) => c.scheduled_ms > servingSince && c.outcome);
        return finished.length >= 2 ? finished : null;
      },
      () => `two fired minutes\n${replicas.map((r) => r.stderr()).join('\n')}`,
      CRON_DEADLINE_MS,
    );
    await store.close();
    if (!done) assert.fail('no fired minutes');
    for (const claim of done) {
      assert.equal(claim.scheduled_ms % 60_000, 0, 'a scheduled time is a whole minute');
      assert.equal(claim.outcome, 'ok');
      assert.equal(claim.cron, '* * * * *');
      assert.equal(claim.deployment, deployment);
      assert.ok(['node-a', 'node-b', 'node-c'].includes(claim.node));
      // The handler ran once for that minute, on the claiming node only.
      const marker = `cron-example fired * * * * * ${new Date(claim.scheduled_ms).toISOString()}`;
      const runs = replicas.map((r) => r.stderr().split(marker).length - 1);
      assert.deepEqual(
        runs.reduce((a, b) => a + b, 0),
        1,
        `${marker} printed ${runs.join('/')} times on the three replicas`,
      );
    }
    const times = done.map((c) => c.scheduled_ms).sort();
    assert.equal(new Set(times).size, times.length, 'one claim per scheduled time');
    assert.equal(times[1]! - times[0]!, 60_000, 'consecutive minutes, none skipped');
  });
});
