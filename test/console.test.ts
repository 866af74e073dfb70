// `svc console` end to end (docs/console.md) in headless Chromium against a real two-node fleet
// with the real runtime (runtime/bin/cell and workerd): every page shows what the node API and the
// bucket hold; an admin blocks and unblocks an application from the page and the routing document
// changes; rollback and the freeze from the page; a key scoped to one application sees only it and
// gets the API's refusal for an admin action; a request without the run's token, with another
// Host, or from another origin is refused. Requests are counted from an access log the test writes
// in Caddy's JSON format (a stand-in for the ingress at the access-log seam, named as such).
// Screenshots of every page, light and dark, go to $SVC_CONSOLE_SCREENSHOTS (default
// .state/artifacts/console/).

import assert from 'node:assert/strict';
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { readHistory } from '../src/runtime-tools/history.ts';
import {
  type Answer,
  assertProblem,
  type Bucket,
  call,
  keyArg,
  openBucket,
  type Signer,
} from './helpers/applications.ts';
import { projectDir } from './helpers/artifacts.ts';
import { CELL_BIN } from './helpers/cell.ts';
import { type ConsoleProcess, launchChromium, startConsoleProcess } from './helpers/console.ts';
import { type DnsServer, startDnsServer } from './helpers/dns.ts';
import { runSvc, type SailProcess, tempDir, waitFor } from './helpers/svc.ts';

const INGRESS_TOKEN = 'console-test-ingress-token';
const SCREENSHOTS = resolve(
  process.env.SVC_CONSOLE_SCREENSHOTS ?? join(import.meta.dirname, '..', '.state', 'artifacts', 'console'),
);
const REQUESTS = 40;
const FAILED = 4;

let bucket: Bucket;
let admin: Signer;
let shopOperator: Signer;
let nodes: SailProcess[] = [];
let adminConsole: ConsoleProcess;
let shopConsole: ConsoleProcess;
let browser: Browser;
/** The resolver the consoles' DNS check asks (SVC_DNS_SERVER): blog's domain points at blog. */
let dns: DnsServer;
const home = tempDir('svc-home-');
const accessLog = join(tempDir('svc-access-'), 'access.log');

function project(name: string, body: string, extra: Record<string, unknown> = {}): string {
  return projectDir({
    'cell.jsonc': JSON.stringify({ name, main: 'index.js', compatibility_date: '2025-06-01', ...extra }),
    'index.js': `export default { fetch() { return new Response(${JSON.stringify(body)}); } };\n`,
  });
}

async function svc(args: string[], input?: string) {
  const result = await runSvc([...args, '--node', nodes[0]!.url, '--key', keyArg(admin)], {
    env: { SVC_HOME: home, SVC_OPERATOR_KEY: undefined, SVC_REMOTE: undefined },
    input,
    timeoutMs: 180_000,
  });
  assert.equal(result.code, 0, `svc ${args.join(' ')}: ${result.stderr}`);
  return result;
}

async function readyOnBothNodes(application: string): Promise<void> {
  await waitFor(
    async () => {
      const states = await Promise.all(nodes.map((n) => call(n.url, 'GET', '/v1/state', { signer: admin })));
      return states.every((s) =>
        (s.body.processes ?? []).some(
          (p: { application: string; ready: boolean }) => p.application === application && p.ready,
        ),
      );
    },
    `${application} ready on both nodes`,
    120_000,
  );
}

async function routedHosts(): Promise<string[]> {
  const response = await fetch(`${nodes[0]!.url}/v1/ingress/routes`, {
    headers: { authorization: `Bearer ${INGRESS_TOKEN}` },
  });
  const document = (await response.json()) as { routes: { host: string }[] };
  return document.routes.map((r) => r.host);
}

/** One line of Caddy's JSON access log. */
function accessLine(host: string, status: number, seconds: number): string {
  return `${JSON.stringify({
    level: 'info',
    ts: Date.now() / 1000,
    logger: 'http.log.access.log0',
    msg: 'handled request',
    request: { host, uri: '/', method: 'GET', proto: 'HTTP/1.1' },
    bytes_read: 0,
    duration: seconds,
    size: 5,
    status,
  })}\n`;
}

async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.emulateMedia({ colorScheme: 'light' });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}-dark.png`), fullPage: true });
  await page.emulateMedia({ colorScheme: 'light' });
}

/** Every URL any page asked for: nothing may leave the console's own origin (no CDN, no font). */
const requested: string[] = [];

async function openPage(console: ConsoleProcess, path = ''): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('request', (request) => requested.push(request.url()));
  const response = await page.goto(`${console.url}${path}`);
  assert.equal(response?.status(), 200, `${path}: ${await response?.text()}`);
  return page;
}

before(async () => {
  browser = await launchChromium();
  dns = await startDnsServer({
    'blog.svc.test': { a: ['192.0.2.10'] },
    'blog.example.org': { cname: 'blog.svc.test' },
  });
  writeFileSync(accessLog, '');
  bucket = await openBucket();
  admin = await bucket.operator('op-admin', 'admin', ['*']);
  shopOperator = await bucket.operator('op-shop', 'operator', ['shop']);
  const flags = [
    ...['--cell-bin', CELL_BIN, '--cell-env', 'CELL_DRAIN_MS=1000'],
    ...['--registry-resync-ms', '1000', '--registry-node-refresh-ms', '1000'],
    ...['--ingress-token', INGRESS_TOKEN, '--platform-domains', 'svc.test'],
    ...['--observability', '--observability-flush-ms', '1000'],
  ];
  nodes = await Promise.all([
    bucket.sail([
      ...flags,
      '--node-id',
      'node-a',
      '--node-labels',
      'zone=a',
      '--ingress-access-log',
      accessLog,
    ]),
    bucket.sail([...flags, '--node-id', 'node-b', '--node-labels', 'zone=b']),
  ]);
  const shopConfig = { kv_namespaces: [{ binding: 'CACHE', id: 'shop-cache' }] };
  await svc(['deploy', project('shop', 'shop v1', shopConfig)]);
  await svc(['deploy', project('shop', 'shop v2', shopConfig)]);
  await svc(['deploy', project('blog', 'blog v1')]);
  await Promise.all([readyOnBothNodes('shop'), readyOnBothNodes('blog')]);
  await svc(['app', 'secret', 'set', 'API_TOKEN', '--name', 'shop'], 'not-shown-anywhere');
  const bucketFlags = ['--endpoint', bucket.endpoint];
  [adminConsole, shopConsole] = await Promise.all([
    startConsoleProcess(['--node', nodes[0]!.url, '--key', keyArg(admin), ...bucketFlags], {
      SVC_HOME: home,
      SVC_DNS_SERVER: dns.address,
    }),
    startConsoleProcess(['--node', nodes[1]!.url, '--key', keyArg(shopOperator), ...bucketFlags], {
      SVC_HOME: home,
      SVC_DNS_SERVER: dns.address,
    }),
  ]);
});

after(async () => {
  await browser?.close();
  await adminConsole?.stop();
  await shopConsole?.stop();
  await bucket?.close();
  await dns?.close();
});

describe('the console guards itself', () => {
  test('prints a loopback URL carrying a random token', () => {
    assert.match(adminConsole.url, /^http:\/\/127\.0\.0\.1:\d+\/[A-Za-z0-9_-]{32}\/$/);
    assert.notEqual(new URL(adminConsole.url).pathname, new URL(shopConsole.url).pathname);
  });

  test('a request without the token, or with another, is refused', async () => {
    const origin = new URL(adminConsole.url).origin;
    for (const path of ['/', '/apps', '/assets/console.js', '/not-the-token/apps']) {
      assertProblem(await get(`${origin}${path}`), 401, 'auth-invalid', 'Console token required');
    }
  });

  test('another Host (a rebound DNS name) is refused', async () => {
    const answer = await rawRequest(adminConsole.url, 'GET', {
      host: `evil.example:${new URL(adminConsole.url).port}`,
    });
    assertProblem(answer, 400, 'invalid-input', 'Unexpected Host');
  });

  test('an action posted from another origin is refused and changes nothing', async () => {
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    for (const headers of [
      { ...form, origin: 'http://evil.example' },
      { ...form, origin: 'null' },
      { ...form, 'sec-fetch-site': 'cross-site' },
      form,
    ]) {
      const answer = await rawRequest(`${adminConsole.url}act/block`, 'POST', headers, 'app=shop');
      assertProblem(answer, 403, 'auth-scope', 'Cross-origin request refused');
    }
    const shop = await call(nodes[0]!.url, 'GET', '/v1/applications/shop', { signer: admin });
    assert.equal(shop.body.application.blocked, false);
  });

  test('an unknown page or action, a form of another type or too large, broken encoding: refused', async () => {
    // Under the token a refusal is a page, with the problem's status, title and code.
    const nowhere = await fetch(`${adminConsole.url}nowhere`);
    assert.equal(nowhere.status, 404);
    assert.match(await nowhere.text(), /No such page.*urn:svc:not-found/s);
    const inherited = await fetch(`${adminConsole.url}confirm/constructor`);
    assert.equal(inherited.status, 404);
    assert.match(await inherited.text(), /No such page.*urn:svc:not-found/s);
    const origin = new URL(adminConsole.url).origin;
    const form = { origin, 'content-type': 'application/x-www-form-urlencoded' };
    for (const action of ['delete', 'constructor', '__proto__']) {
      assertProblem(
        await rawRequest(`${adminConsole.url}act/${action}`, 'POST', form, 'app=shop'),
        404,
        'not-found',
        'No such action',
      );
    }
    assertProblem(
      await rawRequest(
        `${adminConsole.url}act/block`,
        'POST',
        { ...form, 'content-type': 'application/json' },
        '{"app":"shop"}',
      ),
      400,
      'invalid-input',
      'Unsupported content type',
    );
    assertProblem(
      await rawRequest(`${adminConsole.url}act/block`, 'POST', form, `app=shop&pad=${'x'.repeat(5000)}`),
      413,
      'resource-limit',
      'Request body too large',
    );
    const broken = await fetch(`${adminConsole.url}apps/%E0%A4%A`);
    assert.equal(broken.status, 400);
    assert.match(await broken.text(), /Malformed request.*urn:svc:invalid-input/s);
    const upper = await fetch(`${adminConsole.url}apps/Shop`);
    assert.equal(upper.status, 400);
    assert.match(await upper.text(), /Invalid application name.*urn:svc:invalid-slug/s);
    assert.equal(
      (await call(nodes[0]!.url, 'GET', '/v1/applications/shop', { signer: admin })).body.application.blocked,
      false,
    );
  });

  test('no key, or a --listen that is no address: one line, before anything listens', async () => {
    const noKey = await runSvc(['console', '--node', nodes[0]!.url], {
      env: { SVC_HOME: tempDir('svc-home-') },
    });
    assert.equal(noKey.code, 1);
    assert.match(noKey.stderr, /^svc: No operator key: .*\[urn:svc:invalid-input\]$/m);
    const badListen = await runSvc(
      ['console', '--listen', 'localhost', '--node', nodes[0]!.url, '--key', keyArg(admin)],
      {
        env: { SVC_HOME: home },
      },
    );
    assert.equal(badListen.code, 1);
    assert.match(
      badListen.stderr,
      /^svc: Invalid --listen: "localhost" is not <host>:<port>.*\[urn:svc:invalid-input\]$/m,
    );
  });

  test('refuses to listen beyond loopback', async () => {
    const result = await runSvc(
      ['console', '--listen', '0.0.0.0:0', '--node', nodes[0]!.url, '--key', keyArg(admin)],
      {
        env: { SVC_HOME: home },
      },
    );
    assert.equal(result.code, 1);
    assert.match(
      result.stderr,
      /svc: Console listens on loopback only: 0\.0\.0\.0 .*\[urn:svc:invalid-input\]/,
    );
  });
});

describe('pages show the fleet', () => {
  test('fleet: both nodes with state, versions, labels and last seen; the coordinator and fence', async () => {
    const page = await openPage(adminConsole);
    const rows = await tableRows(page, '#nodes');
    assert.deepEqual(
      rows.map((r) => [r[0], r[1], r[4]]),
      [
        ['node-a', 'ready', 'zone=a'],
        ['node-b', 'ready', 'zone=b'],
      ],
    );
    for (const row of rows) {
      assert.match(row[2]!, /^\d+\.\d+\.\d+/, 'svc version');
      assert.match(row[3]!, /^\d+\.\d+\.\d+/, 'cell version');
      assert.match(row[5]!, /^\d+s ago$/);
    }
    const state = await call(nodes[0]!.url, 'GET', '/v1/state', { signer: admin });
    assert.equal(
      (await page.textContent('#coordinator'))?.trim(),
      `${state.body.coordinator.node}, fence ${state.body.coordinator.fence}`,
    );
    await screenshot(page, 'fleet');
    await page.close();
  });

  test('applications: state, where each replica serves and its process state, domains and DNS, selector', async () => {
    await call(nodes[0]!.url, 'POST', '/v1/applications/blog/domains/blog.example.org', { signer: admin });
    const page = await openPage(adminConsole, 'apps');
    // A lookup the list did not wait for shows as being checked, and is there on a later load.
    const rows = (await waitFor<string[][] | null>(
      async () => {
        const found = await tableRows(page, '#applications');
        if (!found[0]?.[3]?.endsWith('checking')) return found;
        await page.reload();
        return null;
      },
      "blog's domain checked",
      10_000,
    )) as string[][];
    assert.deepEqual(
      rows.map((r) => [r[0], r[1], r[2], r[3], r[5], r[6]]),
      [
        ['blog', 'active', 'node-a ready :PORT node-b ready :PORT', 'blog.example.org ok', 'any', 'all'],
        ['shop', 'active', 'node-a ready :PORT node-b ready :PORT', '–', 'any', 'all'],
      ],
    );
    await screenshot(page, 'applications');
    // Blog's page: the claimed domain's DNS, checked as svc app domain add checks it.
    await page.goto(`${adminConsole.url}apps/blog`);
    assert.deepEqual(await tableRows(page, '#domains'), [
      ['blog.example.org', 'ok', 'blog.example.org is a CNAME for blog.svc.test'],
    ]);
    await page.close();
  });
});

describe('one application', () => {
  test('its record, replicas, deployments with who deployed them, secret names, bindings, events and charts', async () => {
    // The stand-in ingress logs requests for shop: REQUESTS, FAILED of them 5xx, each 10 ms.
    for (let i = 0; i < REQUESTS; i++)
      appendFileSync(accessLog, accessLine('shop.svc.test', i < FAILED ? 502 : 200, 0.01));
    const history = await readHistory(bucket.store, 'shop');
    assert.equal(history.deployments.length, 2);
    const page = (await waitFor<Page | null>(
      async () => {
        const candidate = await openPage(adminConsole, 'apps/shop');
        const total = await candidate.textContent('#traffic-total');
        if (total?.startsWith(`${REQUESTS} requests`)) return candidate;
        await candidate.close();
        return null;
      },
      'the access log counted and flushed',
      30_000,
    )) as Page;
    assert.equal((await page.textContent('h1'))?.replace(/\s+/g, ' ').trim(), 'shop active');
    assert.deepEqual(
      (await tableRows(page, '#replicas')).map((r) => [r[0], r[1], r[3]]),
      [
        ['node-a', 'ready', history.deployments[0]!.deployment],
        ['node-b', 'ready', history.deployments[0]!.deployment],
      ],
    );
    assert.deepEqual(
      (await tableRows(page, '#deployments')).map((r) => [r[0], r[2], r[6]]),
      history.deployments.map((d, i) => [
        d.deployment,
        'op-admin',
        i === 0 ? 'serving' : 'Roll back to this…',
      ]),
    );
    assert.deepEqual(
      (await tableRows(page, '#secrets')).map((r) => [r[0], r[2]]),
      [['API_TOKEN', 'op-admin']],
    );
    assert.ok(!(await page.content()).includes('not-shown-anywhere'), 'no secret value on the page');
    assert.deepEqual(await tableRows(page, '#bindings'), [['CACHE', 'KV namespace', 'shop-cache']]);
    const kinds = (await tableRows(page, '#events')).map((r) => r[2]);
    assert.ok(kinds.includes('deploy.deployed'), kinds.join());
    assert.ok(kinds.includes('secret.set'), kinds.join());
    // The charts are drawn from the same numbers: uPlot canvases, and the series sums.
    assert.equal(await page.locator('[data-chart][data-drawn="true"] canvas').count(), 3);
    const series = JSON.parse((await page.textContent('#series'))!);
    assert.equal(
      series.requests.reduce((a: number, b: number) => a + b, 0),
      REQUESTS,
    );
    const withRequests = series.errorRate.filter((v: number | null) => v !== null);
    assert.ok(withRequests.length > 0);
    assert.ok(
      series.p50.some((v: number | null) => v === 13),
      'p50 in the 13 ms bucket',
    );
    await screenshot(page, 'application');
    await page.close();
  });

  test("an application outside the key's scope is the API's refusal", async () => {
    const page = await browser.newPage();
    const response = await page.goto(`${shopConsole.url}apps/blog`);
    assert.equal(response?.status(), 403);
    assert.match((await page.textContent('#refusal'))!, /Out of scope.*urn:svc:auth-scope/s);
    await page.close();
  });
});

describe('admin actions from the page', () => {
  test('block, then unblock: each confirmed, and the routing document follows', async () => {
    await waitFor(async () => (await routedHosts()).includes('shop.svc.test'), 'shop routed');
    const page = await openPage(adminConsole, 'apps/shop');
    await page.click('text=Block…');
    assert.equal(await page.textContent('h1'), 'Block shop?');
    await screenshot(page, 'confirm-block');
    await page.click('button:has-text("Block shop")');
    await page.waitForSelector('.badge-blocked');
    assert.match((await page.textContent('.notice'))!, /Blocked/);
    assert.equal(
      (await call(nodes[1]!.url, 'GET', '/v1/applications/shop', { signer: admin })).body.application.blocked,
      true,
    );
    await waitFor(async () => !(await routedHosts()).includes('shop.svc.test'), 'shop out of the routing');

    await page.click('text=Unblock…');
    await page.click('button:has-text("Unblock shop")');
    await page.waitForSelector('h1 .badge-active');
    await waitFor(async () => (await routedHosts()).includes('shop.svc.test'), 'shop routed again');
    await page.close();
  });

  test('rollback to the older deployment, confirmed, moves the selector', async () => {
    const before = await readHistory(bucket.store, 'shop');
    const older = before.deployments[1]!.deployment;
    const page = await openPage(adminConsole, 'apps/shop');
    await page.click(`#deployments tr:has-text("${older}") >> text=Roll back to this…`);
    await page.click('button:has-text("Roll back shop")');
    await page.waitForSelector('.notice');
    const after = await readHistory(bucket.store, 'shop');
    assert.equal(after.serving?.deployment, older);
    const rows = await tableRows(page, '#deployments');
    assert.equal(rows.find((r) => r[0] === older)?.[6], 'serving');
    await page.close();
  });

  test('retire, then unretire, each confirmed', async () => {
    const page = await openPage(adminConsole, 'apps/blog');
    await page.click('text=Retire…');
    await page.click('button:has-text("Retire blog")');
    await page.waitForSelector('h1 .badge-retired');
    const retired = (await call(nodes[0]!.url, 'GET', '/v1/applications/blog', { signer: admin })).body
      .application;
    assert.equal(retired.retired.by, 'op-admin');
    assert.match((await page.textContent('#record'))!, /Retired\s*since .* by op-admin, grace until/);
    await page.click('text=Unretire…');
    await page.click('button:has-text("Unretire blog")');
    await page.waitForSelector('h1 .badge-active');
    const back = (await call(nodes[0]!.url, 'GET', '/v1/applications/blog', { signer: admin })).body
      .application;
    assert.equal(back.retired, undefined);
    await page.close();
  });

  test('freeze with a reason, a rollback refused as the API refuses it, then unfreeze', async () => {
    const page = await openPage(adminConsole);
    await page.click('text=Freeze deploys…');
    await page.fill('#reason', 'console test');
    await page.click('button:has-text("Freeze deploys")');
    await page.waitForSelector('.notice');
    assert.match((await page.textContent('.facts'))!, /frozen since .* by op-admin: console test/);
    await screenshot(page, 'fleet-frozen');

    const history = await readHistory(bucket.store, 'shop');
    const other = history.deployments.find((d) => !d.serving)!.deployment;
    await page.goto(`${adminConsole.url}apps/shop`);
    await page.click(`#deployments tr:has-text("${other}") >> text=Roll back to this…`);
    const [response] = await Promise.all([
      page.waitForNavigation(),
      page.click('button:has-text("Roll back shop")'),
    ]);
    assert.equal(response?.status(), 409);
    assert.match((await page.textContent('#refusal'))!, /Deploys are frozen.*urn:svc:deploys-frozen/s);
    assert.equal((await readHistory(bucket.store, 'shop')).serving?.deployment, history.serving?.deployment);

    await page.goto(adminConsole.url);
    await page.click('text=Unfreeze…');
    await page.click('button:has-text("Unfreeze deploys")');
    await page.waitForSelector('text=Freeze deploys…');
    assertProblem(
      await call(nodes[0]!.url, 'GET', '/v1/fleet/freeze', { signer: admin }),
      404,
      'not-found',
      'Deploys are not frozen',
    );
    await page.close();
  });
});

describe('a key scoped to one application', () => {
  test('sees only its application: its processes on the fleet page, its row, its events', async () => {
    const page = await openPage(shopConsole);
    assert.deepEqual(
      (await tableRows(page, '#nodes')).map((r) => [r[0], r[7]]),
      [
        ['node-a', '1'],
        ['node-b', '1'],
      ],
    );
    assert.match((await page.textContent('.facts'))!, /Applications\s*1 in your scope/);
    await page.goto(`${shopConsole.url}apps`);
    assert.deepEqual(
      (await tableRows(page, '#applications')).map((r) => [r[0], r[4]]),
      [['shop', 'admins only']],
    );
    await page.goto(`${shopConsole.url}events?since=1h&limit=1000`);
    const applications = new Set((await tableRows(page, '#events')).map((r) => r[3]));
    assert.deepEqual([...applications], ['shop']);
    await page.close();
  });

  test("block is refused with the API's answer, and nothing changes", async () => {
    const page = await openPage(shopConsole, 'apps/shop');
    await page.click('text=Block…');
    const [response] = await Promise.all([
      page.waitForNavigation(),
      page.click('button:has-text("Block shop")'),
    ]);
    assert.equal(response?.status(), 403);
    assert.match((await page.textContent('#refusal'))!, /Admin key required.*urn:svc:auth-scope/s);
    await screenshot(page, 'refusal');
    assert.equal(
      (await call(nodes[0]!.url, 'GET', '/v1/applications/shop', { signer: admin })).body.application.blocked,
      false,
    );

    await page.goto(`${shopConsole.url}confirm/freeze`);
    const [frozen] = await Promise.all([
      page.waitForNavigation(),
      page.click('button:has-text("Freeze deploys")'),
    ]);
    assert.equal(frozen?.status(), 403);
    assert.match((await page.textContent('#refusal'))!, /Admin key required/);
    await page.close();
  });
});

describe('events, the keyboard, and nothing from elsewhere', () => {
  test('events across the fleet, filtered by application and kind', async () => {
    const page = await openPage(adminConsole, 'events?app=shop&kind=application&since=1h&limit=50');
    const rows = await tableRows(page, '#events');
    assert.deepEqual(
      rows.map((r) => [r[2], r[3], r[4]]),
      [
        ['application.unblocked', 'shop', 'op-admin'],
        ['application.blocked', 'shop', 'op-admin'],
      ],
    );
    await page.goto(`${adminConsole.url}events`);
    const kinds = new Set((await tableRows(page, '#events')).map((r) => r[2]));
    for (const kind of ['fleet.frozen', 'fleet.unfrozen', 'deployment.rolled-back', 'node.joined'])
      assert.ok(kinds.has(kind), kind);
    await screenshot(page, 'events');
    const refused = await page.goto(`${adminConsole.url}events?since=soon`);
    assert.equal(refused?.status(), 400);
    assert.match((await page.textContent('.problem'))!, /Invalid --since.*urn:svc:invalid-input/s);
    await page.close();
  });

  test('g a, g e, g f move between pages; / focuses the filter', async () => {
    const page = await openPage(adminConsole);
    await page.keyboard.press('g');
    await Promise.all([page.waitForURL(/\/apps$/), page.keyboard.press('a')]);
    await page.keyboard.press('/');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'q');
    await page.keyboard.type('blo');
    assert.deepEqual(
      await page.$$eval('#applications [role="row"]:not([hidden]) [role="rowheader"]', (cells) =>
        cells.map((cell) => cell.textContent),
      ),
      ['blog'],
    );
    await page.keyboard.press('Escape');
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    await page.keyboard.press('g');
    await Promise.all([page.waitForURL(/\/events$/), page.keyboard.press('e')]);
    await page.keyboard.press('g');
    await Promise.all([page.waitForURL(/\/$/), page.keyboard.press('f')]);
    await page.close();
  });
});

describe('keyboard only', () => {
  test('Tab to an action, Enter, and Enter again on the focused confirmation: done', async () => {
    const page = await openPage(adminConsole, 'apps/blog');
    /** Tabs until the focused element reads `text`; a bounded walk of the page's focus order. */
    async function tabTo(text: string): Promise<void> {
      for (let i = 0; i < 40; i++) {
        await page.keyboard.press('Tab');
        if ((await page.evaluate(() => document.activeElement?.textContent?.trim())) === text) return;
      }
      assert.fail(`${text} is not reachable with Tab`);
    }
    /**
     * Waits for the confirmation's autofocus: Chromium applies `autofocus` at its next rendering
     * update, which may come after the load event that ends waitForURL.
     */
    async function focusedIs(text: string): Promise<void> {
      await page.waitForFunction((want) => document.activeElement?.textContent === want, text, {
        timeout: 10_000,
      });
    }
    await tabTo('Block…');
    await Promise.all([page.waitForURL(/\/confirm\/block\?app=blog$/), page.keyboard.press('Enter')]);
    await focusedIs('Block blog');
    await Promise.all([page.waitForURL(/\/apps\/blog\?done=block$/), page.keyboard.press('Enter')]);
    assert.equal(
      (await call(nodes[0]!.url, 'GET', '/v1/applications/blog', { signer: admin })).body.application.blocked,
      true,
    );
    await tabTo('Unblock…');
    await Promise.all([page.waitForURL(/\/confirm\/unblock/), page.keyboard.press('Enter')]);
    await focusedIs('Unblock blog');
    await Promise.all([page.waitForURL(/done=unblock$/), page.keyboard.press('Enter')]);
    assert.equal(
      (await call(nodes[0]!.url, 'GET', '/v1/applications/blog', { signer: admin })).body.application.blocked,
      false,
    );
    await page.close();
  });
});

describe('assets', () => {
  test('every page asked for nothing outside the console: no CDN, no font, no other host', () => {
    const origins = new Set([new URL(adminConsole.url).origin, new URL(shopConsole.url).origin]);
    assert.ok(requested.length > 20, `${requested.length} requests seen`);
    const elsewhere = requested.filter(
      (url) => !origins.has(new URL(url).origin) && !url.startsWith('data:'),
    );
    assert.deepEqual(elsewhere, []);
    assert.ok(requested.some((url) => url.includes('/assets/uPlot.iife.min.js')));
  });
});

/** The cells of a table's body rows: a <table>, or a grid of ARIA rows (the applications list). */
async function tableRows(page: Page, selector: string): Promise<string[][]> {
  return page.$$eval(`${selector} tbody tr, ${selector} [role="rowgroup"]:last-child > [role="row"]`, (trs) =>
    trs.map((tr) =>
      [...tr.querySelectorAll('th, td, [role="rowheader"], [role="cell"]')].map((cell) =>
        (cell.textContent ?? '').replace(/\s+/g, ' ').replace(/:\d+/g, ':PORT').trim(),
      ),
    ),
  );
}

async function get(url: string): Promise<Answer> {
  const response = await fetch(url);
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: response.status, body, contentType: response.headers.get('content-type') };
}

/** A request with headers fetch would not let a test set (Host). */
async function rawRequest(
  url: string,
  method: string,
  headers: Record<string, string>,
  body?: string,
): Promise<Answer> {
  const { request } = await import('node:http');
  return new Promise((resolveAnswer, reject) => {
    const req = request(url, { method, headers }, (response) => {
      let text = '';
      response.on('data', (chunk) => {
        text += chunk;
      });
      response.on('end', () => {
        let parsed: unknown = text;
        try {
          parsed = JSON.parse(text);
        } catch {}
        resolveAnswer({
          status: response.statusCode ?? 0,
          body: parsed,
          contentType: response.headers['content-type'] ?? null,
        });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}
