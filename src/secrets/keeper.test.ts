// The node's secrets keeper against a local-directory bucket: it writes the values sealed to this
// node into an owner-only file per application it runs, reads the document again only when it
// moved, drops the files of applications it no longer runs, and on the coordinator seals copies
// for a node that joined later (once the set of keys changed), without logging a value.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { tempStore } from '../../test/helpers/temp-store.ts';
import { keys } from '../registry/keys.ts';
import type { NodeRecord } from '../registry/records.ts';
import type { Store } from '../store/store.ts';
import { SecretsKeeper } from './keeper.ts';
import { generateSealKey, type SealKeyPair } from './seal.ts';
import { openSecrets, readSecrets, updateSecrets, withSecret } from './secrets.ts';

function record(id: string, pair: SealKeyPair): NodeRecord {
  return {
    v: 1,
    id,
    advertise: '',
    listen: '',
    labels: {},
    versions: { svc: '0' },
    state: 'ready',
    beatMs: Date.now(),
    startedAt: '',
    processes: [],
    sealKey: pair.publicKey,
  };
}

function keeperFor(store: Store, node: string, pair: SealKeyPair, lines: string[]) {
  let now = 0;
  const log = {
    warn: (o: object, m: string) => lines.push(JSON.stringify(o) + m),
    info: (o: object, m: string) => lines.push(JSON.stringify(o) + m),
  };
  const keeper = new SecretsKeeper({
    store,
    nodeId: node,
    pair,
    dir: join(mkdtempSync(join(tmpdir(), 'svc-keeper-')), 'secrets'),
    resealEveryMs: 60_000,
    mono: () => now,
    log,
  });
  return { keeper, advance: (ms: number) => (now += ms) };
}

/** Sets shop's TOKEN (hunter2), sealed for n1 alone. */
async function setShopToken(store: Store, n1: SealKeyPair): Promise<void> {
  await updateSecrets(store, 'shop', (doc) =>
    withSecret(doc, {
      application: 'shop',
      name: 'TOKEN',
      value: 'hunter2',
      by: 'op',
      recipients: [{ node: 'n1', key: n1.publicKey }],
      now: new Date(),
    }),
  );
}

test('files for what runs here, re-read only on change, dropped when no longer run; re-seal for a later node', async () => {
  const store = await tempStore();
  const n1 = generateSealKey();
  const n2 = generateSealKey();
  const lines: string[] = [];
  const one = keeperFor(store, 'n1', n1, lines);
  const two = keeperFor(store, 'n2', n2, lines);
  await setShopToken(store, n1);

  await one.keeper.materialize(['shop', 'plain']);
  const file = one.keeper.fileFor('shop');
  assert.deepEqual(JSON.parse(readFileSync(file, 'utf8')), { TOKEN: 'hunter2' });
  assert.equal(statSync(file).mode & 0o777, 0o600);
  assert.deepEqual(
    JSON.parse(readFileSync(one.keeper.fileFor('plain'), 'utf8')),
    {},
    'no document: no secrets',
  );

  // n2 joined after the secret was set: it has no copy yet, and says so by name only.
  await two.keeper.materialize(['shop']);
  assert.deepEqual(JSON.parse(readFileSync(two.keeper.fileFor('shop'), 'utf8')), {});
  assert.ok(lines.some((l) => l.includes('"secrets.missing"') && l.includes('TOKEN')));

  // The coordinator (n1) seals for n2 once the set of keys changes; not again until it changes or is due.
  const nodes = [record('n1', n1), record('n2', n2)];
  await one.keeper.reseal(['shop', 'plain'], nodes, Date.now());
  const doc = (await readSecrets(store, 'shop'))!;
  assert.deepEqual(openSecrets(doc.doc, { node: 'n2', pair: n2 }).values, { TOKEN: 'hunter2' });
  await two.keeper.materialize(['shop']);
  assert.deepEqual(JSON.parse(readFileSync(two.keeper.fileFor('shop'), 'utf8')), { TOKEN: 'hunter2' });

  // Nothing changed: the file is not rewritten (cell serve restarts only on a change).
  const before = statSync(file).mtimeMs;
  await one.keeper.materialize(['shop']);
  assert.equal(statSync(file).mtimeMs, before);

  // No longer run here: the file goes.
  await one.keeper.materialize([]);
  assert.throws(() => statSync(file), /ENOENT/);
  assert.ok(!lines.some((l) => l.includes('hunter2')), 'no value in any log line');
  await store.close();
});

test('the coordinator reads only listed documents, and at the interval only those that moved', async () => {
  const store = await tempStore();
  const reads: string[] = [];
  const counting = new Proxy(store, {
    get(target, property) {
      if (property === 'get')
        return (key: string) => {
          reads.push(key);
          return target.get(key);
        };
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const lines: string[] = [];
  const n1 = generateSealKey();
  const n2 = generateSealKey();
  const one = keeperFor(counting, 'n1', n1, lines);
  await setShopToken(store, n1);
  const listedEtags = new Map<string, string>();
  const list = async () => listedEtags.set('shop', (await store.stat(keys.appSecrets('shop')))!.etag);
  const listed = (application: string) => listedEtags.get(application) ?? null;
  const apps = ['shop', 'plain', 'other'];
  const nodes = [record('n1', n1), record('n2', n2)];

  await list();
  await one.keeper.reseal(apps, nodes, Date.now(), listed);
  assert.ok(reads.length > 0 && reads.every((key) => key === keys.appSecrets('shop')), reads.join());
  // Its write moved the document: the next listing shows it, and the next pass reads it once more.
  await list();
  one.advance(60_000);
  reads.length = 0;
  await one.keeper.reseal(apps, nodes, Date.now(), listed);
  assert.deepEqual(reads, [keys.appSecrets('shop')]);
  // Due again, nothing moved: no read at all.
  one.advance(60_000);
  reads.length = 0;
  await one.keeper.reseal(apps, nodes, Date.now(), listed);
  assert.deepEqual(reads, []);
  // A new node: the document is read again for it.
  const n3 = generateSealKey();
  await one.keeper.reseal(apps, [...nodes, record('n3', n3)], Date.now(), listed);
  assert.deepEqual(reads, [keys.appSecrets('shop')]);
  const doc = (await readSecrets(store, 'shop'))!;
  assert.deepEqual(openSecrets(doc.doc, { node: 'n3', pair: n3 }).values, { TOKEN: 'hunter2' });
  assert.ok(!lines.some((l) => l.includes('could not')), lines.join('\n'));
  await store.close();
});
