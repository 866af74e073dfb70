// Request and answer bodies stream at once (docs/runtime.md "The request path"), through the real
// runtime (`cell publish` + `cell serve`: the Go front and real workerd) and through the real
// Caddy build in front of it with the shipped global options (test/helpers/streaming.ts). The
// worker echoes the request body as it reads it. Each piece is sent only once the one before has
// come back, so a path that holds the answer until the body ends, or that drops or reorders a
// piece, fails; chunked and Content-Length bodies both. How long a piece takes to come back is
// measured by bench/streaming.bench.ts, not asserted here.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type EchoPath, echoInLockstep, echoPieces, startEchoPath } from './helpers/streaming.ts';

const PIECES = 8;

describe('a request body streams to the worker while its answer streams back', () => {
  let path: EchoPath;

  before(async () => {
    path = await startEchoPath();
  });

  after(async () => {
    await path?.stop();
  });

  for (const framing of ['chunked', 'content-length'] as const) {
    it(`through the front, a ${framing} body`, async () => {
      const pieces = echoPieces(PIECES);
      const { echo } = await echoInLockstep(`${path.front}/echo`, framing, pieces);
      assert.equal(echo, pieces.join(''));
    });

    it(`through Caddy and the front, a ${framing} body`, async () => {
      const pieces = echoPieces(PIECES);
      const { echo } = await echoInLockstep(`${path.caddy}/echo`, framing, pieces);
      assert.equal(echo, pieces.join(''));
    });
  }
});
