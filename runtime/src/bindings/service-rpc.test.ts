// The JS RPC keys (docs/bindings.md "Service bindings"): the fleet's key is one random bucket
// object, made by the first asker and then read by every other process, and each application's
// key derives from it and its name, so one application's key opens no other.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { keys } from '../../../src/registry/keys.ts';
import { DirStore } from '../../../src/store/dir.ts';
import { tempDir } from '../../../test/helpers/svc.ts';
import { applicationRpcKey } from './service-rpc.ts';

describe('JS RPC keys', () => {
  it('derives one key per application from a fleet key every process of the bucket shares', async () => {
    const root = tempDir('service-rpc-keys-');
    const first = new DirStore(root);
    const second = new DirStore(root);
    const [a1, a2] = await Promise.all([applicationRpcKey(first, 'a'), applicationRpcKey(second, 'a')]);
    assert.match(a1, /^[0-9a-f]{64}$/);
    assert.equal(a2, a1, 'two processes racing to make the fleet key end with the same one');
    assert.notEqual(await applicationRpcKey(first, 'b'), a1);
    const stored = JSON.parse(Buffer.from((await first.get(keys.serviceRpcKey))!.body).toString());
    assert.match(stored.key, /^[0-9a-f]{64}$/);
    const other = new DirStore(tempDir('service-rpc-keys-'));
    assert.notEqual(await applicationRpcKey(other, 'a'), a1, 'another fleet has another key');
  });
});
