// docs/ingress.md rule 3 and docs/api.md claim write order, as seen through routingInputFromRegistry.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { NODE_DEAD_AFTER_MS } from '../registry/liveness.ts';
import type { ApplicationRecord, DomainClaim, NodeRecord } from '../registry/records.ts';
import { routingInputFromRegistry } from './input.ts';

const now = 1_800_000_000_000;

function nodeRecord(id: string, beatMs: number, state: NodeRecord['state'] = 'ready'): NodeRecord {
  return {
    v: 1,
    id,
    advertise: `${id}.lan:7070`,
    listen: '0.0.0.0:7070',
    labels: {},
    versions: { svc: '0.1.0' },
    state,
    beatMs,
    startedAt: '2026-11-23T00:00:00Z',
    processes: [
      { application: 'shop', port: 8001, runtimeVersion: '1', ready: true, state: 'ready', restarts: 0 },
    ],
  };
}

function appRecord(name: string, extra: Partial<ApplicationRecord> = {}): ApplicationRecord {
  return {
    v: 1,
    name,
    createdAt: '',
    updatedAt: '',
    labels: {},
    blocked: false,
    selector: null,
    replicas: 'all',
    domains: [],
    wildcardDomains: [],
    ...extra,
  };
}

const claimRecord = (host: string, application: string, wildcard: boolean): DomainClaim => ({
  v: 1,
  host,
  application,
  wildcard,
  claimedAt: '',
  by: 'op-1',
});

test('liveness, state, advertised address and processes come from the node record', () => {
  const input = routingInputFromRegistry({
    nodes: [nodeRecord('n1', now - 1000), nodeRecord('n2', now - NODE_DEAD_AFTER_MS - 1, 'draining')],
    applications: [],
    claims: [],
    nowMs: now,
    platformDomains: ['svc.test'],
    apiPublic: true,
    selfNodeId: 'n1',
  });
  assert.deepEqual(input.nodes, [
    {
      id: 'n1',
      address: 'n1.lan:7070',
      state: 'ready',
      live: true,
      processes: [{ application: 'shop', port: 8001, ready: true }],
    },
    {
      id: 'n2',
      address: 'n2.lan:7070',
      state: 'draining',
      live: false,
      processes: [{ application: 'shop', port: 8001, ready: true }],
    },
  ]);
});

test('retired is the presence of the retirement; blocked is copied', () => {
  const input = routingInputFromRegistry({
    nodes: [],
    applications: [
      appRecord('a', { blocked: true }),
      appRecord('b', { retired: { at: '', by: '', graceUntil: '' } }),
    ],
    claims: [],
    nowMs: now,
    platformDomains: [],
    apiPublic: false,
    selfNodeId: 'n1',
  });
  assert.deepEqual(input.applications, [
    { name: 'a', blocked: true, retired: false },
    { name: 'b', blocked: false, retired: true },
  ]);
});

test('only claims both the record and the application agree on are routed', () => {
  const input = routingInputFromRegistry({
    nodes: [],
    applications: [
      appRecord('shop', {
        domains: ['done.example', 'listed-only.example', 'upgrading.example', 'wild.example'],
        wildcardDomains: ['wild.example'],
      }),
    ],
    claims: [
      claimRecord('done.example', 'shop', false),
      claimRecord('record-only.example', 'shop', false),
      claimRecord('upgrading.example', 'shop', true),
      claimRecord('wild.example', 'shop', true),
      claimRecord('listed-only.example', 'other', false),
    ],
    nowMs: now,
    platformDomains: [],
    apiPublic: false,
    selfNodeId: 'n1',
  });
  assert.deepEqual(input.claims, [
    { host: 'done.example', application: 'shop', wildcard: false },
    { host: 'upgrading.example', application: 'shop', wildcard: false },
    { host: 'wild.example', application: 'shop', wildcard: true },
  ]);
});
