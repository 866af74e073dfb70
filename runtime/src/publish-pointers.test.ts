// `cell publish` moves the script's pointer and the selector with a conditional write on what it
// read (docs/runtime.md "Write order"); both are read ahead, while the record and the manifest are
// written. A pointer moved between that read and the write is a lost race, tried again; a read
// ahead that failed is made again.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parsePointer } from '../../src/runtime-tools/layout.ts';
import { MemoryStore } from '../../test/helpers/memory-store.ts';
import { movePointer, newVersion, readAhead } from './publish.ts';

const KEY = 'runtime/shop/selector.json';
const [V1, V1B, V2] = [newVersion(1), newVersion(2), newVersion(3)];

function pointerOf(store: MemoryStore): { script: string; deployment: string } {
  const parsed = parsePointer(store.objects.get(KEY)!.body);
  assert.ok(parsed.ok);
  return { script: parsed.value.script, deployment: parsed.value.deployment };
}

const pointer = (deployment: string) =>
  JSON.stringify({ schema_version: 1, script: 'web', deployment, moved_ms: 0 });

describe('moving a pointer read ahead', () => {
  it('creates an absent pointer', async () => {
    const store = new MemoryStore();
    await movePointer(store, KEY, 'web', V2, readAhead(store, KEY));
    assert.deepEqual(pointerOf(store), { script: 'web', deployment: V2 });
  });

  it('notices a pointer moved since it was read, reads it again and moves it', async () => {
    const store = new MemoryStore();
    await store.put(KEY, pointer(V1));
    const ahead = readAhead(store, KEY);
    await ahead;
    await store.put(KEY, pointer(V1B)); // another publish, after the read
    const gets = store.gets;
    await movePointer(store, KEY, 'web', V2, ahead);
    assert.deepEqual(pointerOf(store), { script: 'web', deployment: V2 });
    assert.equal(store.gets - gets, 1, 'the lost race is read again once');
  });

  it('reads again when the read ahead failed', async () => {
    const store = new MemoryStore();
    await store.put(KEY, pointer(V1));
    const get = store.get.bind(store);
    store.get = async () => {
      store.get = get;
      throw new Error('the bucket did not answer');
    };
    const ahead = readAhead(store, KEY);
    await movePointer(store, KEY, 'web', V2, ahead);
    assert.deepEqual(pointerOf(store), { script: 'web', deployment: V2 });
  });
});
