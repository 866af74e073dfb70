// A workerd that dies costs no request (docs/runtime.md "The request path"): the real runtime
// (`cell publish` + `cell serve`: the Go front and real workerd, on the local-directory bucket)
// serving examples/hello while GET requests run without pause; the serving workerd is killed
// with SIGKILL, the front starts it again, and every request, including those sent while it
// was down, is answered 200 by the worker (the front holds them until the new workerd serves).

import assert from 'node:assert/strict';
import { Agent, request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type CellProcess, dirBucketEnv, EXAMPLES, fetchText, publish, startCell } from './helpers/cell.ts';
import { tempDir, waitFor } from './helpers/svc.ts';

const SERVE_DEADLINE_MS = 30_000;
const LOOPS = 4;

function get(url: string, agent: Agent): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { agent }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (piece) => {
        body += piece;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('a workerd that dies', () => {
  let cell: CellProcess;

  before(async () => {
    const bucket = dirBucketEnv(tempDir('cell-restart-bucket-'));
    const published = await publish(join(EXAMPLES, 'hello'), 'hello', bucket);
    assert.equal(published.code, 0, published.stderr);
    cell = await startCell('hello', 'node-a', bucket);
    await waitFor(
      async () => (await fetchText(`${cell.url}/.well-known/cell/health`))?.status === 200,
      () => `cell to serve hello\n${cell.stderr()}`,
      SERVE_DEADLINE_MS,
    );
  });

  after(async () => {
    await cell?.stop();
  });

  it('is started again while the requests sent meanwhile wait for it', async () => {
    const [first] = cell.children();
    assert.ok(first, 'a workerd serves');
    const agent = new Agent({ keepAlive: true });
    const answers: { status: number; body: string }[] = [];
    let restarted = false;
    const loop = async () => {
      while (!restarted) answers.push(await get(`${cell.url}/`, agent));
    };
    try {
      const loops = Array.from({ length: LOOPS }, loop);
      await waitFor(() => answers.length >= 20, 'requests before the kill');
      const before = answers.length;
      process.kill(first, 'SIGKILL');
      await waitFor(
        () => {
          const now = cell.children();
          return now.length === 1 && now[0] !== first && answers.length > before + 20;
        },
        () => `a new workerd serving requests\n${cell.stderr()}`,
        SERVE_DEADLINE_MS,
      );
      restarted = true;
      await Promise.all(loops);
    } finally {
      agent.destroy();
    }
    const failed = answers.filter((a) => a.status !== 200);
    assert.deepEqual(failed.slice(0, 5), [], `${failed.length} of ${answers.length} requests failed`);
    assert.match(cell.stderr(), /workerd for hello\/[0-9a-f]+ exited \(SIGKILL\)/);
  });
});
