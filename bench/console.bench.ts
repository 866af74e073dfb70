// Target (bench/RESULTS.md "Console"): with 1,000 applications in the registry, the console's
// applications page paints its first content in under 1 s in headless Chromium. Also measured: the
// node's `GET /v1/applications` (the data the page needs), the console's whole answer for the
// page (data fetch, bucket reads and rendering), and the fleet and one-application pages; in the
// browser, first paint, first byte (the console's answer as the browser waits for it),
// DOMContentLoaded and load, the pages taken in turn each round. The load average is printed at
// the start and the end: the figures mean little without it on a shared machine.
// Run: scripts/with-node node bench/console.bench.ts [applications] [rounds]
// Needs chromium (scripts/install-chromium.sh). One real `svc sail` on a local-directory bucket;
// the applications are records only (no process runs them), as the registry holds them.

import { loadavg } from 'node:os';
import { ensureApplicationForDeploy } from '../src/registry/applications.ts';
import { call, keyArg, openBucket } from '../test/helpers/applications.ts';
import { launchChromium, startConsoleProcess } from '../test/helpers/console.ts';

const APPLICATIONS = Number(process.argv[2] ?? 1000);
const ROUNDS = Number(process.argv[3] ?? 10);

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const max = (values: number[]) => Math.max(...values);
const fmt = (values: number[]) => `median ${median(values).toFixed(0)} ms, max ${max(values).toFixed(0)} ms`;

const loadAverage = () =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');
console.log(`load average at start: ${loadAverage()}`);
const bucket = await openBucket();
const admin = await bucket.operator('op-admin', 'admin', ['*']);
const seeding = Date.now();
for (let i = 0; i < APPLICATIONS; i += 50) {
  await Promise.all(
    Array.from({ length: Math.min(50, APPLICATIONS - i) }, (_, j) =>
      ensureApplicationForDeploy(bucket.store, `app-${String(i + j).padStart(4, '0')}`, {}, 'bench'),
    ),
  );
}
console.log(`seeded ${APPLICATIONS} applications in ${Date.now() - seeding} ms`);
const node = await bucket.sail();
const consoleProcess = await startConsoleProcess([
  '--node',
  node.url,
  '--key',
  keyArg(admin),
  '--endpoint',
  bucket.endpoint,
]);
const browser = await launchChromium();
try {
  const api: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const started = performance.now();
    const answer = await call(node.url, 'GET', '/v1/applications', { signer: admin });
    api.push(performance.now() - started);
    if (answer.body.applications.length !== APPLICATIONS) throw new Error('not every application listed');
  }
  const serverAnswer: Record<string, number[]> = { '/': [], apps: [], 'apps/app-0500': [] };
  let appsBytes = 0;
  for (let i = 0; i < ROUNDS; i++) {
    for (const path of Object.keys(serverAnswer)) {
      const started = performance.now();
      const response = await fetch(`${consoleProcess.url}${path === '/' ? '' : path}`);
      const text = await response.text();
      serverAnswer[path]!.push(performance.now() - started);
      if (response.status !== 200) throw new Error(`${path}: ${response.status}`);
      if (path === 'apps') appsBytes = Buffer.byteLength(text);
    }
  }
  const pages = ['', 'apps', 'apps/app-0500'];
  const paint: Record<string, { fcp: number[]; response: number[]; dcl: number[]; load: number[] }> =
    Object.fromEntries(pages.map((path) => [path || '/', { fcp: [], response: [], dcl: [], load: [] }]));
  // Round by round over the pages rather than page by page: on a shared machine whose load moves,
  // each page sees the same load.
  for (let i = 0; i < ROUNDS; i++) {
    for (const path of pages) {
      const figures = paint[path || '/']!;
      // A fresh context each time: nothing cached, as a first visit.
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      const page = await context.newPage();
      await page.goto(`${consoleProcess.url}${path}`, { waitUntil: 'load' });
      const timing = await page.evaluate(async () => {
        const nav = performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming;
        // The paint entry, waited for: a buffered observer also sees one recorded before it.
        const fcp = await new Promise<number>((resolve) => {
          new PerformanceObserver((list) => {
            const entry = list.getEntriesByName('first-contentful-paint')[0];
            if (entry) resolve(entry.startTime);
          }).observe({ type: 'paint', buffered: true });
          setTimeout(() => resolve(Number.NaN), 5000);
        });
        return {
          fcp,
          response: nav.responseStart,
          dcl: nav.domContentLoadedEventEnd,
          load: nav.loadEventEnd,
        };
      });
      figures.fcp.push(timing.fcp);
      figures.response.push(timing.response);
      figures.dcl.push(timing.dcl);
      figures.load.push(timing.load);
      await context.close();
    }
  }
  console.log(`GET /v1/applications (${APPLICATIONS} records) from the node: ${fmt(api)}`);
  for (const [path, values] of Object.entries(serverAnswer))
    console.log(
      `console answer for ${path}: ${fmt(values)}${path === 'apps' ? ` (${(appsBytes / 1024).toFixed(0)} KiB of HTML)` : ''}`,
    );
  for (const [path, f] of Object.entries(paint)) {
    console.log(
      `chromium ${path}: first contentful paint ${fmt(f.fcp)}; first byte ${fmt(f.response)}; DOMContentLoaded ${fmt(f.dcl)}; load ${fmt(f.load)}`,
    );
  }
  console.log(`load average at the end: ${loadAverage()}`);
  const verdict = median(paint.apps!.fcp) < 1000 && max(paint.apps!.fcp) < 1000;
  console.log(`target: applications page first paint under 1 s: ${verdict ? 'met' : 'NOT met'}`);
} finally {
  await browser.close();
  await consoleProcess.stop();
  await bucket.close();
}
