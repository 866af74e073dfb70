// docs/identity.md "Ingress tokens and their rotation" and "Key files" (node keys): the boot-time
// identity.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { pino } from 'pino';
import { MemoryStore } from '../../test/helpers/memory-store.ts';
import { establishIngressTokens, IngressTokens } from '../auth/ingress-token.ts';
import { ensureNodeKey, mintNodeToken } from '../auth/node-key.ts';
import { defaultSettings } from '../config/settings.ts';
import { keys } from '../registry/keys.ts';
import type { NodeContext } from './context.ts';
import { identityService } from './identity-service.ts';

const tempDir = () => mkdtempSync(join(tmpdir(), 'svc-auth-'));

function contextFor(stateDir: string, store = new MemoryStore(), tokens: string[] = []): NodeContext {
  const settings = defaultSettings();
  settings.node.stateDir = stateDir;
  settings.ingress.token = tokens;
  return { settings, store, nodeId: 'node-a', version: '0', log: pino({ level: 'silent' }) };
}

describe('ingress tokens', () => {
  test('none configured: one is minted and written 0600 to <stateDir>/ingress-token', async () => {
    const dir = tempDir();
    const tokens = await establishIngressTokens([], dir);
    const file = join(dir, 'ingress-token');
    assert.equal(statSync(file).mode & 0o777, 0o600);
    const written = readFileSync(file, 'utf8').trim();
    assert.ok(written.length > 40);
    assert.ok(tokens.admits(written));
    assert.ok(tokens.minted);
    const again = await establishIngressTokens([], dir);
    assert.notEqual(again.first, written, 'minted afresh at each boot');
  });

  test('configured: all are admitted, the first is written', async () => {
    const dir = tempDir();
    const tokens = await establishIngressTokens(['new-token', 'old-token'], dir);
    assert.equal(readFileSync(join(dir, 'ingress-token'), 'utf8'), 'new-token\n');
    assert.ok(tokens.admits('new-token'));
    assert.ok(tokens.admits('old-token'));
    assert.equal(tokens.admits('new-toke'), false);
    assert.equal(tokens.admits(''), false);
    assert.equal(tokens.admits(null), false);
  });

  test('a token with spaces or control characters is refused at boot', async () => {
    await assert.rejects(establishIngressTokens(['has space'], tempDir()), {
      code: 'invalid-input',
      title: 'Invalid setting ingress.token',
    });
  });

  test('comparison digests every candidate: lengths do not matter', () => {
    const tokens = new IngressTokens(['a'.repeat(64)]);
    assert.equal(tokens.admits('a'), false);
    assert.equal(tokens.admits('a'.repeat(1000)), false);
  });
});

describe('node key', () => {
  test('made once, kept 0600 in the state directory, reloaded on restart', async () => {
    const dir = tempDir();
    const first = await ensureNodeKey(dir);
    assert.equal(statSync(join(dir, 'node-key.json')).mode & 0o777, 0o600);
    const second = await ensureNodeKey(dir);
    assert.equal(second.publicJwk.x, first.publicJwk.x);
  });

  test('a key file holding no key is refused, not replaced', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'node-key.json'), '{"privateKey":{"kty":"OKP"}}');
    await assert.rejects(ensureNodeKey(dir), { code: 'invalid-input', title: 'Unreadable node key' });
  });

  test('the identity service publishes the public half and makes node tokens possible', async () => {
    const dir = tempDir();
    const ctx = contextFor(dir);
    await assert.rejects(mintNodeToken(ctx), { code: 'capability-missing' });
    await identityService().start(ctx);
    const record = JSON.parse(Buffer.from((await ctx.store.get(keys.nodeKey('node-a')))!.body).toString());
    assert.deepEqual(record.publicKey, ctx.nodeKey!.publicJwk);
    assert.equal(JSON.stringify(record).includes(ctx.nodeKey!.privateJwk.d), false);
    const signer = await ctx.auth!.verifier.verify(await mintNodeToken(ctx));
    assert.equal(signer.kind, 'node');
    assert.equal(signer.id, 'node-a');
    assert.ok(ctx.auth!.ingress!.minted);
  });

  test('a restart with a new state directory replaces the published key', async () => {
    const store = new MemoryStore();
    await identityService().start(contextFor(tempDir(), store));
    const ctx = contextFor(tempDir(), store);
    await identityService().start(ctx);
    const record = JSON.parse(Buffer.from((await store.get(keys.nodeKey('node-a')))!.body).toString());
    assert.equal(record.publicKey.x, ctx.nodeKey!.publicJwk.x);
  });

  test('a node id naming an operator key is refused at start', async () => {
    const store = new MemoryStore();
    await store.putJson(keys.operator('node-a'), { v: 1, id: 'node-a' });
    await assert.rejects(identityService().start(contextFor(tempDir(), store)), {
      code: 'reference-held',
      title: 'Node id taken',
    });
  });
});
