import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { NodeRecord } from '../../registry/records.ts';
import { nodesServing } from './deployment-moved.ts';

function node(id: string, applications: string[], advertise = `${id}.test:7300`): NodeRecord {
  return {
    id,
    advertise,
    processes: applications.map((application) => ({ application })),
  } as unknown as NodeRecord;
}

test('only nodes that report a process for the application and have an address are told', () => {
  const nodes = [
    node('a', ['shop']),
    node('b', ['blog']),
    node('c', ['shop', 'blog']),
    node('d', ['shop'], ''),
  ];
  assert.deepEqual(
    nodesServing('shop', nodes).map((n) => n.id),
    ['a', 'c'],
  );
  assert.deepEqual(nodesServing('cart', nodes), []);
});

test('a node record without processes is not told', () => {
  const bare = { id: 'e', advertise: 'e.test:7300' } as unknown as NodeRecord;
  assert.deepEqual(nodesServing('shop', [bare]), []);
});
