// The queue wait of `svc deploy`: how long it pauses before the next upload.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { retryDelay } from './deploy-upload.ts';

test('retry delays are never sooner than retry-after asks, with jitter above it', () => {
  for (const random of [0, 0.5, 0.999]) {
    const pause = retryDelay('1', 0, () => random);
    assert.ok(pause >= 1000 && pause <= 1500, String(pause));
    assert.ok(retryDelay('3', 5, () => random) >= 3000);
  }
  // No retry-after: an exponential backoff, capped.
  assert.ok(retryDelay(undefined, 0, () => 0) >= 1000);
  assert.ok(retryDelay(undefined, 3, () => 0) >= 8000);
  assert.ok(retryDelay(undefined, 20, () => 0.999) <= 45_000);
});
