import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import type { ApplicationRecord, Replicas } from '../../registry/records.ts';
import { type EligibleNode, matchesSelector, placeApplications } from './placement.ts';

function app(
  name: string,
  replicas: Replicas,
  extra: Partial<Pick<ApplicationRecord, 'selector' | 'blocked' | 'retired'>> = {},
): ApplicationRecord {
  return {
    v: 1,
    name,
    createdAt: '2025-01-01T00:00:00.000Z',
    updatedAt: '2025-01-01T00:00:00.000Z',
    labels: {},
    blocked: false,
    selector: null,
    replicas,
    domains: [],
    wildcardDomains: [],
    ...extra,
  };
}

const node = (id: string, labels: Record<string, string> = {}): EligibleNode => ({ id, labels });
const three = [node('n1', { zone: 'a' }), node('n2', { zone: 'b' }), node('n3', { zone: 'a', gpu: 'yes' })];

test('replicas all places on every eligible node', () => {
  const { placements, unplaced } = placeApplications({
    applications: [app('web', 'all')],
    nodes: three,
    previous: new Map(),
  });
  assert.deepEqual(placements.get('web'), ['n1', 'n2', 'n3']);
  assert.deepEqual(unplaced, []);
});

test('replicas N spreads by fewest placed processes, then node id', () => {
  const { placements } = placeApplications({
    applications: [app('a', 2), app('b', 2), app('c', 1)],
    nodes: three,
    previous: new Map(),
  });
  assert.deepEqual(placements.get('a'), ['n1', 'n2']);
  assert.deepEqual(placements.get('b'), ['n1', 'n3']);
  assert.deepEqual(placements.get('c'), ['n2']);
});

test('previous nodes that still match are kept', () => {
  const { placements } = placeApplications({
    applications: [app('a', 2)],
    nodes: three,
    previous: new Map([['a', ['n3', 'gone']]]),
  });
  assert.deepEqual(placements.get('a'), ['n1', 'n3']);
});

test('lowering replicas keeps a subset of the previous nodes', () => {
  const { placements } = placeApplications({
    applications: [app('a', 1)],
    nodes: three,
    previous: new Map([['a', ['n2', 'n3']]]),
  });
  assert.deepEqual(placements.get('a'), ['n2']);
});

test('a selector narrows to nodes holding every pair', () => {
  const { placements, unplaced } = placeApplications({
    applications: [
      app('a', 'all', { selector: { zone: 'a' } }),
      app('g', 1, { selector: { zone: 'a', gpu: 'yes' } }),
    ],
    nodes: three,
    previous: new Map(),
  });
  assert.deepEqual(placements.get('a'), ['n1', 'n3']);
  assert.deepEqual(placements.get('g'), ['n3']);
  assert.deepEqual(unplaced, []);
});

test('a previous node that no longer matches the selector is dropped', () => {
  const { placements } = placeApplications({
    applications: [app('a', 1, { selector: { zone: 'b' } })],
    nodes: three,
    previous: new Map([['a', ['n1']]]),
  });
  assert.deepEqual(placements.get('a'), ['n2']);
});

test('too few matching nodes places on what matches and reports the shortfall', () => {
  const { placements, unplaced } = placeApplications({
    applications: [app('a', 3, { selector: { zone: 'a' } })],
    nodes: three,
    previous: new Map(),
  });
  assert.deepEqual(placements.get('a'), ['n1', 'n3']);
  assert.equal(unplaced.length, 1);
  assert.equal(unplaced[0]!.application, 'a');
  assert.equal(unplaced[0]!.placed, 2);
  assert.match(unplaced[0]!.reason, /replicas 3 but only 2 eligible nodes match its selector/);
});

test('an unsatisfiable selector places nowhere and is reported, for N and for all', () => {
  const { placements, unplaced } = placeApplications({
    applications: [
      app('x', 1, { selector: { zone: 'mars' } }),
      app('y', 'all', { selector: { zone: 'mars' } }),
    ],
    nodes: three,
    previous: new Map([['x', ['n1']]]),
  });
  assert.deepEqual(placements.get('x'), []);
  assert.deepEqual(placements.get('y'), []);
  assert.deepEqual(
    unplaced.map((u) => [u.application, u.placed]),
    [
      ['x', 0],
      ['y', 0],
    ],
  );
  assert.match(unplaced[0]!.reason, /no eligible node matches its selector \(selector \{"zone":"mars"\}\)/);
});

test('no eligible node at all is reported as such', () => {
  const { unplaced } = placeApplications({ applications: [app('a', 1)], nodes: [], previous: new Map() });
  assert.equal(unplaced[0]!.reason, 'no node is eligible (live and not draining)');
});

test('blocked and retired applications are placed nowhere and not reported', () => {
  const { placements, unplaced } = placeApplications({
    applications: [
      app('b', 'all', { blocked: true }),
      app('r', 2, { retired: { at: 'x', by: 'op', graceUntil: 'y' } }),
    ],
    nodes: three,
    previous: new Map([
      ['b', ['n1']],
      ['r', ['n2', 'n3']],
    ]),
  });
  assert.deepEqual(placements.get('b'), []);
  assert.deepEqual(placements.get('r'), []);
  assert.deepEqual(unplaced, []);
});

test('an impossible replicas value places nowhere and is reported', () => {
  const { placements, unplaced } = placeApplications({
    applications: [app('a', 0)],
    nodes: three,
    previous: new Map(),
  });
  assert.deepEqual(placements.get('a'), []);
  assert.match(unplaced[0]!.reason, /not a whole number/);
});

test('matchesSelector: null and {} match; every pair must be equal; inherited keys do not count', () => {
  assert.equal(matchesSelector({}, null), true);
  assert.equal(matchesSelector({ a: '1' }, {}), true);
  assert.equal(matchesSelector({ a: '1', b: '2' }, { a: '1' }), true);
  assert.equal(matchesSelector({ a: '1' }, { a: '2' }), false);
  assert.equal(matchesSelector({}, { toString: 'x' }), false);
});

// ---- properties ----

const labelKey = fc.constantFrom('zone', 'gpu', 'disk');
const labelValue = fc.constantFrom('a', 'b');
const labels = fc.dictionary(labelKey, labelValue, { maxKeys: 3 });
const nodesArb = fc.uniqueArray(fc.record({ id: fc.stringMatching(/^n[0-9]{1,2}$/), labels }), {
  selector: (n) => n.id,
  maxLength: 8,
});
const appsArb = fc.uniqueArray(
  fc.record({
    name: fc.stringMatching(/^[a-z]{1,3}$/),
    replicas: fc.oneof(fc.constant<'all'>('all'), fc.integer({ min: 1, max: 5 })),
    selector: fc.option(fc.dictionary(labelKey, labelValue, { maxKeys: 2 }), { nil: null }),
    blocked: fc.boolean(),
  }),
  { selector: (a) => a.name, maxLength: 10 },
);
const inputArb = fc
  .tuple(nodesArb, appsArb, fc.array(fc.stringMatching(/^n[0-9]{1,2}$/), { maxLength: 5 }))
  .map(([nodes, apps, stale]) => ({
    nodes,
    applications: apps.map((a) => app(a.name, a.replicas, { selector: a.selector, blocked: a.blocked })),
    previous: new Map(apps.map((a, i) => [a.name, stale.slice(i % 3)])),
  }));

test('property: never more than N, only matching eligible nodes, no duplicates, blocked nowhere', () => {
  fc.assert(
    fc.property(inputArb, (input) => {
      const { placements, unplaced } = placeApplications(input);
      const byId = new Map(input.nodes.map((n) => [n.id, n]));
      for (const a of input.applications) {
        const placed = placements.get(a.name)!;
        assert.equal(new Set(placed).size, placed.length);
        if (a.blocked) assert.deepEqual(placed, []);
        for (const id of placed) {
          assert.ok(byId.has(id), `${id} is eligible`);
          assert.ok(matchesSelector(byId.get(id)!.labels, a.selector));
        }
        const matching = input.nodes.filter((n) => matchesSelector(n.labels, a.selector)).length;
        const wanted = a.replicas === 'all' ? matching : a.replicas;
        if (!a.blocked) assert.equal(placed.length, Math.min(wanted, matching));
        const reported = unplaced.some((u) => u.application === a.name);
        assert.equal(reported, !a.blocked && (placed.length === 0 || placed.length < wanted));
      }
    }),
  );
});

test('property: deterministic, and stable when its own answer is fed back', () => {
  fc.assert(
    fc.property(inputArb, (input) => {
      const first = placeApplications(input);
      const shuffled = {
        ...input,
        nodes: [...input.nodes].reverse(),
        applications: [...input.applications].reverse(),
      };
      assert.deepEqual(placeApplications(shuffled), first);
      const again = placeApplications({ ...input, previous: first.placements });
      assert.deepEqual(again.placements, first.placements);
    }),
  );
});

test('property: adding a node never moves an application off a node it keeps matching', () => {
  fc.assert(
    fc.property(inputArb, labels, (input, extraLabels) => {
      const first = placeApplications(input);
      const grown = placeApplications({
        ...input,
        nodes: [...input.nodes, node('zz-new', extraLabels)],
        previous: first.placements,
      });
      for (const a of input.applications) {
        if (a.replicas === 'all') continue;
        for (const id of first.placements.get(a.name)!) assert.ok(grown.placements.get(a.name)!.includes(id));
      }
    }),
  );
});
