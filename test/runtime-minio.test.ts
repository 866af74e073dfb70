// The runtime contract against a real S3 server (publish and serve
// examples/hello against MinIO; a second publish followed while a load loop runs with no failed
// request), with the bucket handed to `cell` in the SVC_S3_* variables as a node hands it.

import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  type BucketEnv,
  type CellProcess,
  copyProject,
  EXAMPLES,
  fetchText,
  publish,
  startCell,
} from './helpers/cell.ts';
import { type Minio, useMinio } from './helpers/minio.ts';
import { waitFor } from './helpers/svc.ts';

const FOLLOW_DEADLINE_MS = 30_000;

// At the top level, so the helper's `after` hook stops MinIO when the file ends, not when
// the `before` hook that first asked for it does.
const minioStarting = useMinio();

describe('cell on MinIO', () => {
  let minio: Minio;
  let bucket: BucketEnv;
  const running: CellProcess[] = [];

  before(async () => {
    minio = await minioStarting;
    const name = await minio.createBucket();
    const options = minio.bucketOptions(name);
    bucket = {
      SVC_S3_ENDPOINT: options.endpoint,
      SVC_S3_REGION: options.region,
      SVC_S3_BUCKET: options.bucket,
      SVC_S3_PREFIX: 'fleet-a/',
      SVC_S3_ACCESS_KEY: options.accessKey,
      SVC_S3_SECRET_KEY: options.secretKey,
    };
  });
  after(async () => {
    // SIGTERM: each cell stops its own workerd (a SIGKILL would leave it running).
    await Promise.all(running.map((cell) => cell.stop('SIGTERM')));
  });

  const serving = (cell: CellProcess, deployment: string) =>
    waitFor(
      async () => {
        const answer = await fetchText(`${cell.url}/.well-known/cell/health`);
        return answer?.status === 200 && JSON.parse(answer.body).deployment === deployment;
      },
      () => `cell to serve ${deployment}\n${cell.stderr()}`,
      FOLLOW_DEADLINE_MS,
    );

  it('publishes and serves examples/hello, then follows a second publish under load without a failed request', async () => {
    const first = await publish(join(EXAMPLES, 'hello'), 'hello', bucket);
    assert.equal(first.code, 0, first.stderr);
    const cell = await startCell('hello', 'node-m', bucket);
    running.push(cell);
    await serving(cell, first.published!.deployment);
    assert.match((await fetchText(`${cell.url}/`))!.body, /^Hello from svc!/);
    assert.equal(
      (await fetchText(`${cell.url}/hello.txt`))!.body,
      readFileSync(join(EXAMPLES, 'hello', 'public', 'hello.txt'), 'utf8'),
    );

    const failures: string[] = [];
    const greetings = new Set<string>();
    let stop = false;
    let requests = 0;
    const loop = async () => {
      while (!stop) {
        requests++;
        const answer = await fetchText(`${cell.url}/`);
        if (answer?.status === 200) greetings.add(answer.body.split('!')[0]!);
        else failures.push(answer ? `${answer.status} ${answer.body}` : 'no answer');
      }
    };
    const loops = Array.from({ length: 4 }, loop);
    await waitFor(() => requests > 20, 'the load loop to run');

    const project = copyProject(join(EXAMPLES, 'hello'));
    const config = readFileSync(join(project, 'cell.jsonc'), 'utf8').replace(
      '"Hello from svc"',
      '"Hello again"',
    );
    writeFileSync(join(project, 'cell.jsonc'), config);
    const second = await publish(project, 'hello', bucket);
    assert.equal(second.code, 0, second.stderr);
    await waitFor(
      () => greetings.has('Hello again'),
      () => `the second deployment\n${cell.stderr()}`,
      FOLLOW_DEADLINE_MS,
    );
    const atSwitch = requests;
    await waitFor(() => requests > atSwitch + 50, 'requests after the switch');
    stop = true;
    await Promise.all(loops);
    assert.deepEqual(failures, []);
    assert.deepEqual([...greetings].sort(), ['Hello again', 'Hello from svc']);
    assert.deepEqual(await cell.stop('SIGTERM'), { code: 0, signal: null });
  });
});
