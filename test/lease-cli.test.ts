// `svc app lease show|drop` as a process (docs/cli.md "svc app"): the warning first, --node rule,
// the JSON keys exactly as listed, consent on a pipe, --force, and the capability guard. The
// verdicts themselves are tested in-process in test/lease.test.ts.

import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { keys } from '../src/registry/keys.ts';
import { type DirStore, openDirStore } from '../src/store/dir.ts';
import { seedNode } from './helpers/runtime-seed.ts';
import { runSvc, tempDir } from './helpers/svc.ts';

let root: string;
let store: DirStore;
const lease = (args: string[], input?: string) =>
  runSvc(['app', 'lease', ...args, '--endpoint', `file://${root}`, '--name', 'shop'], {
    env: { SVC_SILENCE_WARNINGS: '' },
    input,
  });
const put = (node: string, body: unknown) =>
  store.put(keys.runtimeNodeLease('shop', node), typeof body === 'string' ? body : JSON.stringify(body));

describe('svc app lease (process)', () => {
  beforeEach(async () => {
    root = tempDir('svc-lease-cli-');
    store = await openDirStore(root);
    await seedNode(store, 'n1', { cell: '0.6.1' });
  });
  afterEach(async () => {
    await store.close();
  });

  it('show --json: the warning first, then every lease with the listed keys', async () => {
    await put('n1', { node: 'n1', expires_ms: Date.now() + 60_000 });
    await put('n2', { node: 'other', expires_ms: Date.now() - 60_000 });
    await put('n3', 'garbage');
    const result = await lease(['show', '--json']);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr.split('\n')[0]!, /^svc: warning: app lease is internal tooling and unstable/);
    const doc = JSON.parse(result.stdout);
    assert.deepEqual(Object.keys(doc), ['application', 'leases']);
    assert.equal(doc.application, 'shop');
    assert.deepEqual(
      doc.leases.map((l: { node: string; verdict: string }) => [l.node, l.verdict]),
      [
        ['n1', 'held'],
        ['n2', 'expired'],
        ['n3', 'unreadable'],
      ],
    );
    assert.deepEqual(Object.keys(doc.leases[0]), [
      'node',
      'key',
      'listed',
      'head',
      'get',
      'verdict',
      'why',
      'expiresAt',
      'recordNode',
    ]);
    assert.deepEqual(Object.keys(doc.leases[2]), ['node', 'key', 'listed', 'head', 'get', 'verdict', 'why']);
    assert.match(doc.leases[1].why, /names node other, not n2/);
  });

  it('show --node names the node and can answer absent', async () => {
    const result = await lease(['show', '--node', 'n9', '--json']);
    const doc = JSON.parse(result.stdout);
    assert.deepEqual(Object.keys(doc), ['application', 'node', 'leases']);
    assert.equal(doc.leases[0].verdict, 'absent');
    const text = await lease(['show', '--node', 'n9']);
    assert.match(text.stdout, /^n9 {2}absent {2}fleets\/shop\/nodes\/n9\.json/);
  });

  it('refuses a bad --node with invalid-slug', async () => {
    for (const args of [
      ['show', '--node', 'a/b'],
      ['drop', '--node', 'x'.repeat(129)],
    ]) {
      const result = await lease(args);
      assert.equal(result.code, 1);
      assert.match(result.stderr, /svc: Invalid node id: .* \[urn:svc:invalid-slug\]/);
    }
  });

  it('drop: held is reference-held without --force; a pipe without --yes has nothing to answer with', async () => {
    await put('n1', { node: 'n1', expires_ms: Date.now() + 60_000 });
    const held = await lease(['drop', '--node', 'n1', '--yes']);
    assert.equal(held.code, 1);
    assert.match(held.stderr, /svc: Lease is held: .*--force.* \[urn:svc:reference-held\]/);
    const piped = await lease(['drop', '--node', 'n1', '--force'], 'y\n');
    assert.match(piped.stderr, /svc: Nothing to answer with: .* \[urn:svc:invalid-input\]/);
    assert.ok(await store.stat(keys.runtimeNodeLease('shop', 'n1')));
  });

  it('drop --force --yes --json deletes exactly that key and reads it back', async () => {
    await put('n1', { node: 'n1', expires_ms: Date.now() + 60_000 });
    await put('n2', { node: 'n2', expires_ms: Date.now() + 60_000 });
    const result = await lease(['drop', '--node', 'n1', '--force', '--yes', '--json']);
    assert.equal(result.code, 0, result.stderr);
    const doc = JSON.parse(result.stdout);
    assert.deepEqual(Object.keys(doc), [
      'application',
      'node',
      'key',
      'dryRun',
      'force',
      'deleted',
      'before',
      'after',
      'stillThere',
    ]);
    assert.equal(doc.before.verdict, 'held');
    assert.equal(doc.after.verdict, 'absent');
    assert.equal(doc.stillThere, false);
    assert.match(result.stderr, /Deleted fleets\/shop\/nodes\/n1\.json: it is gone\./);
    assert.equal(await store.stat(keys.runtimeNodeLease('shop', 'n1')), null);
    assert.ok(await store.stat(keys.runtimeNodeLease('shop', 'n2')));
  });

  it('drop --dry-run and an absent key delete nothing and ask nothing', async () => {
    await put('n1', { node: 'n1', expires_ms: Date.now() - 1 });
    const dry = await lease(['drop', '--node', 'n1', '--dry-run', '--json']);
    assert.equal(dry.code, 0, dry.stderr);
    assert.deepEqual(Object.keys(JSON.parse(dry.stdout)), [
      'application',
      'node',
      'key',
      'dryRun',
      'force',
      'deleted',
      'before',
    ]);
    assert.ok(await store.stat(keys.runtimeNodeLease('shop', 'n1')));
    const absent = await lease(['drop', '--node', 'n7']);
    assert.equal(absent.code, 0, absent.stderr);
    assert.match(absent.stdout, /Nothing to drop/);
  });

  it('is capability-missing for show and --dry-run against an unverified runtime release', async () => {
    await seedNode(store, 'n1', { cell: '0.4.9' });
    for (const args of [['show'], ['drop', '--node', 'n1', '--dry-run']]) {
      const result = await lease(args);
      assert.equal(result.code, 1);
      assert.match(result.stderr, /\[urn:svc:capability-missing\]/);
    }
  });
});
