// A deploy of an application with Durable Objects never runs two workerd processes on its objects'
// storage (docs/bindings.md "Durable Objects"): the real `cell serve` serving examples/durable-objects
// from MinIO switches to a newly published deployment by stopping the serving workerd before the
// new one starts (the look's `exclusive`), while a client increments a counter; the process never
// has two workerd children, and the count goes on from every acknowledged increment.

import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import {
  type CellProcess,
  copyProject,
  EXAMPLES,
  fetchText,
  publish,
  s3BucketEnv,
  startCell,
} from './helpers/cell.ts';
import { useMinio } from './helpers/minio.ts';
import { tempDir, waitFor } from './helpers/svc.ts';

const minio = await useMinio();
const running: CellProcess[] = [];
after(async () => {
  await Promise.all(running.map((cell) => cell.stop('SIGTERM')));
});

async function deploymentServed(cell: CellProcess): Promise<string | null> {
  const answer = await fetchText(`${cell.url}/.well-known/cell/health`);
  return answer?.status === 200 ? JSON.parse(answer.body).deployment : null;
}

test('a new deployment with Durable Objects starts only once the serving workerd stopped; every acknowledged increment stays', async () => {
  const bucket = s3BucketEnv(minio.bucketOptions(await minio.createBucket()));
  const project = copyProject(join(EXAMPLES, 'durable-objects'));
  const first = await publish(project, 'counter', bucket);
  assert.equal(first.code, 0, first.stderr);
  const cell = await startCell('counter', 'node-a', bucket, { CELL_STATE_DIR: tempDir('objects-switch-') });
  running.push(cell);
  await waitFor(
    async () => (await deploymentServed(cell)) === first.published?.deployment,
    () => `v1 served\n${cell.stderr()}`,
    60_000,
  );

  let acknowledged = 0;
  let stopped = false;
  const client = (async () => {
    while (!stopped) {
      const answer = await fetchText(`${cell.url}/shared`, { method: 'POST' });
      if (answer?.status === 200) acknowledged = JSON.parse(answer.body).count;
    }
  })();
  await waitFor(() => acknowledged >= 5, 'increments on v1');

  const source = join(project, 'src', 'index.js');
  writeFileSync(source, `// v2\n${readFileSync(source, 'utf8')}`);
  const second = await publish(project, 'counter', bucket);
  assert.equal(second.code, 0, second.stderr);
  cell.child.kill('SIGHUP');
  let most = 0;
  await waitFor(
    async () => {
      most = Math.max(most, cell.children().length);
      return (await deploymentServed(cell)) === second.published?.deployment;
    },
    () => `v2 served\n${cell.stderr()}`,
    60_000,
  );
  const atSwitch = acknowledged;
  await waitFor(() => acknowledged >= atSwitch + 5, 'increments on v2');
  stopped = true;
  await client;

  assert.equal(most, 1, 'never two workerd processes at once');
  assert.match(
    cell.stderr(),
    /stopping durable-objects\/\S+ before durable-objects\/\S+ starts: one workerd at a time opens the Durable Objects/,
  );
  const read = await fetchText(`${cell.url}/shared`);
  assert.equal(
    JSON.parse(read?.body ?? '{}').count,
    acknowledged,
    'the count is every acknowledged increment',
  );
});
