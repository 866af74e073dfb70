// The generated workerd configuration for Durable Objects (docs/bindings.md "Durable Objects"):
// one namespace per class keyed by its storage key, stored on the local disk folder the plan
// names, each binding naming the class in the serving worker (also from the scheduled copy), and
// an entry module that refuses to load when a class is not exported.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { OBJECTS_ENTRY_MODULE, renderWorkerdConfig, type WorkerdPlan } from './workerd.ts';

const plan: WorkerdPlan = {
  address: 'unix:/tmp/x.sock',
  modules: [{ name: 'index.js', type: 'esm', file: 'modules/index.js' }],
  compatibilityDate: '2025-09-01',
  compatibilityFlags: [],
  vars: [],
  assets: null,
  durableObjects: {
    storageDir: '/state/objects/shop',
    main: 'index.js',
    classes: [
      { className: 'Room', uniqueKey: 'shop-Room', sql: true },
      { className: 'Tally', uniqueKey: 'shop-Counter', sql: false },
    ],
    bindings: [
      { binding: 'ROOM', className: 'Room' },
      { binding: 'TALLY', className: 'Tally' },
    ],
  },
};

describe('workerd config: Durable Objects', () => {
  it('declares each class with its storage key, on a writable disk service at the storage folder', () => {
    const text = renderWorkerdConfig(plan);
    assert.match(
      text,
      /durableObjectNamespaces = \[ \(className = "Room", uniqueKey = "shop-Room", enableSql = true\), \(className = "Tally", uniqueKey = "shop-Counter", enableSql = false\) \]/,
    );
    assert.match(text, /durableObjectStorage = \(localDisk = "cell-objects"\)/);
    assert.match(
      text,
      /\(name = "cell-objects", disk = \(path = "\/state\/objects\/shop", writable = true\)\)/,
    );
    assert.match(
      text,
      /\(name = "ROOM", durableObjectNamespace = \(className = "Room", serviceName = "cell-user"\)\)/,
    );
    assert.match(
      text,
      /\(name = "TALLY", durableObjectNamespace = \(className = "Tally", serviceName = "cell-user"\)\)/,
    );
  });

  it('loads the worker through an entry that checks the classes are exported', () => {
    const text = renderWorkerdConfig(plan);
    const modules = /modules = \[ \(name = "([^"]+)"/.exec(text);
    assert.equal(modules?.[1], OBJECTS_ENTRY_MODULE, 'the check is the first module');
    assert.match(text, /does not export the Durable Object class/);
  });

  it('a scheduled copy of the worker declares no namespace of its own: its bindings reach cell-user', () => {
    const text = renderWorkerdConfig({ ...plan, cronAddress: 'unix:/tmp/c.sock' });
    assert.equal(text.match(/durableObjectNamespaces/g)?.length, 1);
    const scheduled = text.slice(text.indexOf('const userScheduledWorker'));
    assert.match(scheduled, /durableObjectNamespace = \(className = "Room", serviceName = "cell-user"\)/);
    assert.doesNotMatch(scheduled, /durableObjectStorage/);
  });

  it('without Durable Objects, nothing of them', () => {
    const text = renderWorkerdConfig({ ...plan, durableObjects: null });
    assert.doesNotMatch(text, /durableObject|cell-objects/);
  });
});
