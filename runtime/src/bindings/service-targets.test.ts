// Where a service binding to another application goes (docs/bindings.md "Service bindings"):
// this node's ready processes first, then other live nodes'; refusals name why.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RoutingInput, RoutingNode } from '../../../src/routing/types.ts';
import { noFleet, serviceTarget } from './service-targets.ts';

const node = (id: string, address: string, extra: Partial<RoutingNode> = {}): RoutingNode => ({
  id,
  address,
  state: 'ready',
  live: true,
  processes: [
    { application: 'b', port: 9001, ready: true },
    { application: 'c', port: 9002, ready: false },
  ],
  ...extra,
});

const input = (nodes: RoutingNode[], selfNodeId = 'n2'): RoutingInput => ({
  nodes,
  applications: [
    { name: 'b', blocked: false, retired: false },
    { name: 'c', blocked: false, retired: false },
    { name: 'x', blocked: true, retired: false },
    { name: 'old', blocked: false, retired: true },
  ],
  claims: [],
  platformDomains: [],
  apiPublic: false,
  selfNodeId,
});

describe('serviceTarget', () => {
  it("lists the target's ready processes, this node's first, skipping dead and draining nodes", () => {
    const nodes = [
      node('n1', '10.0.0.1:7311'),
      node('n2', '10.0.0.2:7311'),
      node('n3', '10.0.0.3:7311', { live: false }),
      node('n4', '10.0.0.4:7311', { state: 'draining' }),
      node('n5', '[fd00::5]:7311'),
    ];
    assert.deepEqual(serviceTarget(input(nodes), 'b'), {
      upstreams: ['10.0.0.2:9001', '10.0.0.1:9001', '[fd00::5]:9001'],
    });
  });

  it('refuses an unknown, retired, blocked or not serving target, and before the first pass', () => {
    const nodes = [node('n2', '127.0.0.1:7311')];
    assert.deepEqual(serviceTarget(input(nodes), 'ghost'), {
      refused: 'no application "ghost" exists in this fleet',
    });
    assert.deepEqual(serviceTarget(input(nodes), 'old'), {
      refused: 'no application "old" exists in this fleet',
    });
    assert.deepEqual(serviceTarget(input(nodes), 'x'), { refused: 'application "x" is blocked' });
    assert.deepEqual(serviceTarget(input(nodes), 'c'), {
      refused: 'application "c" is not serving on any node of this fleet',
    });
    assert.deepEqual(serviceTarget(null, 'b'), {
      refused: 'this node has not read the fleet state yet; try again shortly',
    });
    assert.match((noFleet() as { refused: string }).refused, /without a node daemon/);
  });
});
