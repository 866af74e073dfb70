// The applications list as written for speed (docs/console.md "How it is built"): rows in groups
// of 100 that a browser may skip as a whole off screen, the remainder in a group of its own, and
// links relative to the page. What each cell shows is checked in a browser by test/console.test.ts.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ApplicationsView, AppRecord } from './data.ts';
import { applicationsPage, type PageContext } from './pages.ts';

const ctx: PageContext = { base: '/t0ken', actor: 'op-admin', assetVersion: '1' };

function record(name: string): AppRecord {
  const at = new Date(0).toISOString();
  return {
    v: 1,
    name,
    createdAt: at,
    updatedAt: at,
    labels: {},
    blocked: false,
    selector: null,
    replicas: 'all',
    domains: [],
    wildcardDomains: [],
  };
}

function view(count: number): ApplicationsView {
  return {
    scoped: false,
    fromBucket: true,
    applications: Array.from({ length: count }, (_, i) => record(`app-${String(i).padStart(4, '0')}`)),
    replicas: new Map(),
    placements: new Map(),
    freeze: null,
    dns: new Map(),
  };
}

/** Each body group's class and the number of rows in it, in page order. */
function groups(page: string): { full: boolean; rows: number }[] {
  return page
    .split('<div role="rowgroup" class="grid-body')
    .slice(1)
    .map((part) => ({
      full: part.startsWith(' rows-100"'),
      rows: part.split('</div><div role="rowgroup"')[0]!.split('<div role="row" ').length - 1,
    }));
}

test('rows come in full groups of 100, the remainder in a group without the class', () => {
  assert.deepEqual(groups(applicationsPage(ctx, view(250), '')), [
    { full: true, rows: 100 },
    { full: true, rows: 100 },
    { full: false, rows: 50 },
  ]);
  assert.deepEqual(groups(applicationsPage(ctx, view(200), '')), [
    { full: true, rows: 100 },
    { full: true, rows: 100 },
  ]);
  // No application: the body is there, empty (the filter and the tests find no row in it).
  assert.deepEqual(groups(applicationsPage(ctx, view(0), '')), [{ full: false, rows: 0 }]);
  // The server's filter groups what it kept.
  assert.deepEqual(groups(applicationsPage(ctx, view(250), 'app-01')), [{ full: true, rows: 100 }]);
});

test('row links are relative to the page and resolve under the per-run prefix', () => {
  const page = applicationsPage(ctx, view(3), '');
  const href = /<div role="rowheader"><a href="([^"]+)">app-0001<\/a>/.exec(page)?.[1];
  assert.equal(href, 'apps/app-0001');
  for (const from of ['http://127.0.0.1:1/t0ken/apps', 'http://127.0.0.1:1/t0ken/apps?q=app'])
    assert.equal(new URL(href!, from).pathname, '/t0ken/apps/app-0001');
});
