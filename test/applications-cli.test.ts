// docs/cli.md "svc app" (all but `app lease`, and its domains) and "Flag groups" (naming an
// application): every subcommand
// against a real node, and through the bucket path where the table gives one; the DNS check
// after `domain add` against a real DNS server on loopback.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { getApplication } from '../src/registry/applications.ts';
import { keys } from '../src/registry/keys.ts';
import type { CoordinatorLease } from '../src/registry/records.ts';
import { putJson } from '../src/store/store.ts';
import { type Bucket, keyArg, openBucket, type Signer } from './helpers/applications.ts';
import { type DnsServer, startDnsServer } from './helpers/dns.ts';
import { type RunResult, runSvc, type SailProcess, tempDir } from './helpers/svc.ts';

let bucket: Bucket;
let node: SailProcess;
let dns: DnsServer;
let admin: Signer;
let operator: Signer;
let env: NodeJS.ProcessEnv;

/** Runs `svc` with an empty operator home and no remote: nothing is found unless named. */
const svc = (args: string[], extra: NodeJS.ProcessEnv = {}) => runSvc(args, { env: { ...env, ...extra } });
const viaNode = (signer: Signer = admin) => ['--node', node.url, '--key', keyArg(signer)];
const viaBucket = () => ['--endpoint', bucket.endpoint];

function ok(result: RunResult): RunResult {
  assert.equal(result.code, 0, `exit ${result.code}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`);
  return result;
}

/** A failure: exit 1 and the spec's one line on stderr. */
function fails(result: RunResult, title: string, code: string, detail?: RegExp): void {
  assert.equal(result.code, 1, `stdout: ${result.stdout}\nstderr: ${result.stderr}`);
  const line = result.stderr.trimEnd().split('\n').at(-1)!;
  assert.ok(line.startsWith(`svc: ${title}`), line);
  assert.ok(line.endsWith(`[urn:svc:${code}]`), line);
  if (detail) assert.match(line, detail);
}

before(async () => {
  bucket = await openBucket();
  admin = await bucket.operator('op-admin', 'admin', ['*']);
  operator = await bucket.operator('op-shop', 'operator', ['shop', 'shop-*']);
  for (const name of ['shop', 'shop-dev', 'shop-staging', 'blog', 'bucketed']) await bucket.application(name);
  node = await bucket.sail(['--platform-domains', 'apps.test']);
  dns = await startDnsServer({
    'shop.apps.test': { a: ['192.0.2.10'] },
    'www.shop.example': { cname: 'shop.apps.test' },
    '*.wild.example': { cname: 'shop.apps.test' },
    'wild.example': { cname: 'shop.apps.test' },
  });
  const dir = tempDir('svc-cli-');
  env = {
    SVC_HOME: join(dir, 'home'),
    SVC_STATE_DIR: join(dir, 'state'),
    SVC_DNS_SERVER: dns.address,
    SVC_PLATFORM_DOMAINS: 'apps.test',
    SVC_OPERATOR_KEY: undefined,
    SVC_REMOTE: undefined,
  };
});
after(async () => {
  await dns?.close();
  await bucket?.close();
});

describe('naming an application', () => {
  test('invalid-slug names both parts', async () => {
    fails(
      await svc(['app', 'show', '--name', 'Shop', ...viaNode()]),
      'Invalid application name',
      'invalid-slug',
      /--name "Shop"/,
    );
    const both = await svc(['app', 'retire', '--name', 'shop', '--env', 'Dev_1', ...viaNode()]);
    fails(both, 'Invalid application name', 'invalid-slug', /--name "shop" and --env "Dev_1"/);
    fails(
      await svc(['app', 'show', '--name', 'x'.repeat(40), '--env', 'y'.repeat(30), ...viaNode()]),
      'Invalid application name',
      'invalid-slug',
    );
  });

  test('--env addresses <name>-<env>', async () => {
    const shown = ok(await svc(['app', 'show', '--name', 'shop', '--env', 'dev', '--json', ...viaNode()]));
    assert.equal(JSON.parse(shown.stdout).application.name, 'shop-dev');
  });

  test('a missing application is not-found', async () => {
    fails(await svc(['app', 'show', '--name', 'ghost', ...viaNode()]), 'No such application', 'not-found');
    fails(
      await svc(['app', 'retire', '--name', 'ghost', ...viaBucket()]),
      'No such application',
      'not-found',
    );
  });
});

describe('node-only subcommands', () => {
  test('without a node: No node to ask', async () => {
    for (const args of [['list'], ['show'], ['block'], ['unblock'], ['label', 'a=b']]) {
      fails(await svc(['app', ...args, '--name', 'shop']), 'No node to ask', 'invalid-input');
    }
  });

  test('list: the application and its environments; --json', async () => {
    const table = ok(await svc(['app', 'list', '--name', 'shop', ...viaNode()]));
    const lines = table.stdout.trimEnd().split('\n');
    assert.match(lines[0]!, /^NAME\s+STATE\s+REPLICAS\s+SELECTOR\s+DOMAINS\s+LABELS$/);
    assert.deepEqual(
      lines.slice(1).map((l) => l.split(/\s+/)[0]),
      ['shop', 'shop-dev', 'shop-staging'],
    );
    const json = JSON.parse(
      ok(await svc(['app', 'list', '--name', 'shop', '--json', ...viaNode(operator)])).stdout,
    );
    assert.equal(json.scoped, true);
    assert.deepEqual(
      json.applications.map((a: { name: string }) => a.name),
      ['shop', 'shop-dev', 'shop-staging'],
    );
    for (const a of json.applications) assert.ok(!('labels' in a), 'a non-admin view omits labels');
    const one = JSON.parse(
      ok(await svc(['app', 'list', '--name', 'shop', '--env', 'dev', '--json', ...viaNode()])).stdout,
    );
    assert.deepEqual(
      one.applications.map((a: { name: string }) => a.name),
      ['shop-dev'],
    );
  });

  test('block, unblock, label; a non-admin is refused by the node', async () => {
    assert.match(ok(await svc(['app', 'block', '--name', 'blog', ...viaNode()])).stdout, /^Blocked blog/);
    assert.equal((await getApplication(bucket.store, 'blog')).blocked, true);
    assert.match(ok(await svc(['app', 'show', '--name', 'blog', ...viaNode()])).stdout, /state\s+blocked/);
    assert.match(ok(await svc(['app', 'unblock', '--name', 'blog', ...viaNode()])).stdout, /^Unblocked blog/);
    assert.equal((await getApplication(bucket.store, 'blog')).blocked, false);
    fails(
      await svc(['app', 'block', '--name', 'shop', ...viaNode(operator)]),
      'Admin key required',
      'auth-scope',
    );

    assert.equal(
      ok(await svc(['app', 'label', '--name', 'blog', 'team=web', 'tier=', ...viaNode()])).stdout,
      'Labels of blog: team=web,tier=\n',
    );
    assert.deepEqual((await getApplication(bucket.store, 'blog')).labels, { team: 'web', tier: '' });
    assert.equal(
      ok(await svc(['app', 'label', '--name', 'blog', ...viaNode()])).stdout,
      'Cleared the labels of blog\n',
    );
    assert.deepEqual((await getApplication(bucket.store, 'blog')).labels, {});
    fails(
      await svc(['app', 'label', '--name', 'blog', 'novalue', ...viaNode()]),
      'Invalid label',
      'invalid-input',
    );
    fails(
      await svc(['app', 'label', '--name', 'blog', 'a=1', 'a=2', ...viaNode()]),
      'Invalid label',
      'invalid-input',
    );
    fails(
      await svc(['app', 'label', '--name', 'shop', 'a=b', ...viaNode(operator)]),
      'Admin key required',
      'auth-scope',
    );
  });
});

describe('retire, unretire, selector, replicas: node, else bucket', () => {
  for (const [way, args] of [
    ['node', () => viaNode()],
    ['bucket', () => viaBucket()],
  ] as const) {
    test(`retire and unretire through the ${way}`, async () => {
      const retired = ok(await svc(['app', 'retire', '--name', 'bucketed', ...args()]));
      assert.match(retired.stdout, /^Retired bucketed: no longer served; unretire until \d{4}-/);
      const record = await getApplication(bucket.store, 'bucketed');
      assert.ok(record.retired);
      assert.equal(record.retired.by, way === 'node' ? 'op-admin' : record.retired.by);
      if (way === 'bucket') assert.match(record.retired.by, /^bucket:/);
      const back = ok(await svc(['app', 'unretire', '--name', 'bucketed', ...args()]));
      assert.equal(back.stdout, 'Unretired bucketed: it is served again\n');
      assert.equal((await getApplication(bucket.store, 'bucketed')).retired, undefined);
      const again = ok(await svc(['app', 'unretire', '--name', 'bucketed', ...args()]));
      assert.equal(again.stdout, 'bucketed was not retired: nothing changed, it is served as before\n');
    });

    test(`selector through the ${way}`, async () => {
      assert.equal(
        ok(
          await svc([
            'app',
            'selector',
            '--name',
            'bucketed',
            '--set',
            'zone=a',
            '--set',
            'disk=ssd',
            ...args(),
          ]),
        ).stdout,
        'bucketed runs only on nodes labelled zone=a,disk=ssd\n',
      );
      assert.deepEqual((await getApplication(bucket.store, 'bucketed')).selector, { zone: 'a', disk: 'ssd' });
      ok(await svc(['app', 'selector', '--name', 'bucketed', '--clear', ...args()]));
      assert.equal((await getApplication(bucket.store, 'bucketed')).selector, null);
      fails(
        await svc(['app', 'selector', '--name', 'bucketed', ...args()]),
        'Give --set or --clear',
        'invalid-input',
      );
      fails(
        await svc(['app', 'selector', '--name', 'bucketed', '--set', 'a=b', '--clear', ...args()]),
        'Give --set or --clear',
        'invalid-input',
      );
      fails(
        await svc(['app', 'selector', '--name', 'bucketed', '--set', 'ab', ...args()]),
        'Invalid selector',
        'invalid-input',
      );
    });

    test(`replicas through the ${way}`, async () => {
      assert.equal(
        ok(await svc(['app', 'replicas', '--name', 'bucketed', '--count', '3', ...args()])).stdout,
        'bucketed runs on 3 nodes\n',
      );
      assert.equal((await getApplication(bucket.store, 'bucketed')).replicas, 3);
      ok(await svc(['app', 'replicas', '--name', 'bucketed', '--count', 'all', ...args()]));
      assert.equal((await getApplication(bucket.store, 'bucketed')).replicas, 'all');
      for (const count of ['0', '-1', '1.5', 'some', 'ALL', '']) {
        fails(
          await svc(['app', 'replicas', '--name', 'bucketed', '--count', count, ...args()]),
          'Invalid --count',
          'invalid-input',
        );
      }
    });
  }

  test('out of scope through a node is the node auth-scope', async () => {
    fails(await svc(['app', 'retire', '--name', 'blog', ...viaNode(operator)]), 'Out of scope', 'auth-scope');
  });
});

describe('domains', () => {
  test('the host is checked before anything is called, naming the rule', async () => {
    const cases: [string, RegExp][] = [
      ['https://x.example', /no scheme/],
      ['x.example/path', /no path/],
      ['x.example:8443', /no port/],
      ['*.x.example', /no wildcard/],
      ['x.example.', /no trailing dot/],
      ['a..example', /no empty label/],
      [`${'a'.repeat(64)}.example`, /at most 63/],
      ['a_b.example', /no underscore/],
      ['-a.example', /inner hyphens/],
      ['example', /at least two labels/],
      ['1.2.3.4', /digits alone/],
    ];
    for (const [host, rule] of cases) {
      // No node is named: a failure here can only be the client-side check.
      fails(
        await svc(['app', 'domain', 'add', '--name', 'shop', '--', host]),
        'Not a host to claim',
        'invalid-input',
        rule,
      );
    }
    fails(
      await svc(['app', 'domain', 'add', 'x.apps.test', '--name', 'shop']),
      'Host is under a platform domain',
      'invalid-input',
      /apps\.test/,
    );
    fails(
      await svc(['app', 'domain', 'remove', 'x.example:1', '--name', 'shop']),
      'Not a host to claim',
      'invalid-input',
    );
  });

  test('add through a node: a CNAME to a platform host is acknowledged on stdout', async () => {
    const added = ok(await svc(['app', 'domain', 'add', 'WWW.shop.example', '--name', 'shop', ...viaNode()]));
    assert.equal(
      added.stdout,
      'Claimed www.shop.example for shop\nDNS: www.shop.example is a CNAME for shop.apps.test: it points here\n',
    );
    assert.equal(added.stderr, '');
  });

  test('add: DNS that does not point here is one warning naming a platform host, exit 0', async () => {
    const added = ok(
      await svc(['app', 'domain', 'add', 'shop.example', '--name', 'shop', '--json', ...viaNode()]),
    );
    assert.deepEqual(JSON.parse(added.stdout), {
      application: 'shop',
      host: 'shop.example',
      platformHosts: ['shop.apps.test'],
      dns: 'pending',
    });
    const warnings = added.stderr.trimEnd().split('\n');
    assert.equal(warnings.length, 1);
    assert.match(
      warnings[0]!,
      /^svc: warning: DNS for shop\.example is pending: .*CNAME record: shop\.example CNAME shop\.apps\.test$/,
    );
    const silenced = ok(
      await svc(['app', 'domain', 'add', 'shop.example', '--name', 'shop', ...viaNode()], {
        SVC_SILENCE_WARNINGS: '1',
      }),
    );
    assert.equal(silenced.stderr, '');
  });

  test('add --wildcard checks a label under the host too', async () => {
    const added = ok(
      await svc([
        'app',
        'domain',
        'add',
        'wild.example',
        '--wildcard',
        '--name',
        'shop',
        '--json',
        ...viaNode(),
      ]),
    );
    assert.deepEqual(JSON.parse(added.stdout), {
      application: 'shop',
      host: 'wild.example',
      platformHosts: ['shop.apps.test'],
      dns: 'ok',
      wildcardDns: 'ok',
    });
    const half = ok(
      await svc(['app', 'domain', 'add', 'shop.example', '--wildcard', '--name', 'shop', ...viaNode()]),
    );
    assert.match(half.stdout, /^Claimed shop\.example and every name one label under it for shop\n$/);
    const warnings = half.stderr.trimEnd().split('\n');
    assert.equal(warnings.length, 2);
    assert.match(
      warnings[1]!,
      /^svc: warning: DNS for \*\.shop\.example is pending: svc-dns-check-[0-9a-f]+\.shop\.example .*CNAME shop\.apps\.test$/,
    );
  });

  test('refusals from the node: held, blocked, out of scope, wildcard scope', async () => {
    fails(
      await svc(['app', 'domain', 'add', 'shop.example', '--name', 'blog', ...viaNode()]),
      'Domain is held by another application',
      'reference-held',
      /application "shop"/,
    );
    fails(
      await svc(['app', 'domain', 'add', 'x.example', '--name', 'blog', ...viaNode(operator)]),
      'Out of scope',
      'auth-scope',
    );
    const narrow = await bucket.operator('op-narrow', 'operator', ['shop']);
    fails(
      await svc(['app', 'domain', 'add', 'n.example', '--wildcard', '--name', 'shop', ...viaNode(narrow)]),
      'Out of scope',
      'auth-scope',
      /shop-\*/,
    );
    ok(await svc(['app', 'block', '--name', 'blog', ...viaNode()]));
    fails(
      await svc(['app', 'domain', 'add', 'b.example', '--name', 'blog', ...viaNode()]),
      'Application is blocked',
      'application-blocked',
    );
    ok(await svc(['app', 'unblock', '--name', 'blog', ...viaNode()]));
  });

  test('list through the node and the bucket: sorted, (+subdomains), --json', async () => {
    for (const args of [viaNode(), viaBucket()]) {
      const listed = ok(await svc(['app', 'domain', 'list', '--name', 'shop', ...args]));
      assert.equal(
        listed.stdout,
        'shop.example (+subdomains)\nwild.example (+subdomains)\nwww.shop.example\n',
      );
      const json = JSON.parse(
        ok(await svc(['app', 'domain', 'list', '--name', 'shop', '--json', ...args])).stdout,
      );
      assert.deepEqual(json, {
        application: 'shop',
        domains: ['shop.example', 'wild.example', 'www.shop.example'],
        wildcardDomains: ['shop.example', 'wild.example'],
      });
    }
    const shown = ok(await svc(['app', 'show', '--name', 'shop', ...viaNode()]));
    assert.match(
      shown.stdout,
      /domains\s+shop\.example \(\+subdomains\)\n\s+wild\.example \(\+subdomains\)\n\s+www\.shop\.example\n/,
    );
  });

  test('add through the bucket under a platform domain only the nodes know is invalid-input naming it', async () => {
    // Nothing here names a platform domain: the node's record in the bucket does.
    fails(
      await svc(['app', 'domain', 'add', 'www.apps.test', '--name', 'bucketed', ...viaBucket()], {
        SVC_PLATFORM_DOMAINS: '',
      }),
      'Host is under a platform domain',
      'invalid-input',
      /under the platform domain apps\.test/,
    );
    assert.deepEqual((await getApplication(bucket.store, 'bucketed')).domains, []);
  });

  test('add and remove through the bucket', async () => {
    const added = ok(
      await svc(['app', 'domain', 'add', 'bucketed.example', '--name', 'bucketed', '--json', ...viaBucket()]),
    );
    assert.deepEqual(JSON.parse(added.stdout), {
      application: 'bucketed',
      host: 'bucketed.example',
      platformHosts: ['bucketed.apps.test'],
      dns: 'pending',
    });
    assert.equal((await getApplication(bucket.store, 'bucketed')).domains[0], 'bucketed.example');
    const removed = ok(
      await svc([
        'app',
        'domain',
        'remove',
        'bucketed.example',
        '--name',
        'bucketed',
        '--json',
        ...viaBucket(),
      ]),
    );
    assert.deepEqual(JSON.parse(removed.stdout), {
      application: 'bucketed',
      host: 'bucketed.example',
      platformHosts: ['bucketed.apps.test'],
    });
    assert.deepEqual((await getApplication(bucket.store, 'bucketed')).domains, []);
    fails(
      await svc(['app', 'domain', 'remove', 'bucketed.example', '--name', 'bucketed', ...viaBucket()]),
      'No such domain',
      'not-found',
    );
  });

  test('remove through the node', async () => {
    assert.equal(
      ok(await svc(['app', 'domain', 'remove', 'www.shop.example', '--name', 'shop', ...viaNode()])).stdout,
      'Released www.shop.example from shop\n',
    );
    fails(
      await svc(['app', 'domain', 'remove', 'www.shop.example', '--name', 'shop', ...viaNode()]),
      'No such domain',
      'not-found',
    );
  });
});

describe('delete through the bucket', () => {
  // A bucket no node runs on: a running node may hold the coordinator lease itself.
  let quiet: Bucket;
  const viaQuiet = () => ['--endpoint', quiet.endpoint];
  before(async () => {
    quiet = await openBucket();
    for (const name of ['doomed', 'forced']) await quiet.application(name);
  });
  after(async () => {
    await quiet?.close();
  });

  test('refused while a live coordinator holds the lease, saying to use --node', async () => {
    const lease: CoordinatorLease = {
      v: 1,
      node: 'node-live',
      fence: 7,
      acquiredAt: new Date().toISOString(),
      renewedAt: new Date().toISOString(),
      expiresMs: Date.now() + 600_000,
    };
    await putJson(quiet.store, keys.coordinatorLease, lease);
    fails(
      await svc(['app', 'delete', '--name', 'forced', '--force', ...viaQuiet()]),
      'A node is coordinating',
      'lease-lost',
      /node-live .*--node/,
    );
    await putJson(quiet.store, keys.coordinatorLease, { ...lease, expiresMs: Date.now() - 1 });
  });

  test('not retired is refused; --force deletes and prints the count, then every key', async () => {
    fails(
      await svc(['app', 'delete', '--name', 'forced', ...viaQuiet()]),
      'Application is not retired',
      'invalid-input',
    );
    await quiet.store.put('fleets/forced/nodes/n1.json', '{}');
    await quiet.store.put(keys.trustPolicy('forced'), '{}');
    const deleted = ok(await svc(['app', 'delete', '--name', 'forced', '--force', ...viaQuiet()]));
    assert.equal(
      deleted.stdout,
      [
        'Deleted forced: 3 store keys removed',
        keys.application('forced'),
        keys.trustPolicy('forced'),
        'fleets/forced/nodes/n1.json',
      ]
        .map((line) => `${line}\n`)
        .join(''),
    );
    const lease = (await quiet.store.get(keys.coordinatorLease))!;
    const after = JSON.parse(Buffer.from(lease.body).toString()) as CoordinatorLease;
    // Each run took the lease under a new fence: the refused run (8) and the forced one (9).
    assert.equal(after.fence, 9, 'the command held the lease under a new fence');
    assert.ok(after.expiresMs <= Date.now(), 'and let it go');
    fails(
      await svc(['app', 'delete', '--name', 'forced', '--force', ...viaQuiet()]),
      'No such application',
      'not-found',
    );
  });

  test('retired within its grace is refused', async () => {
    ok(await svc(['app', 'retire', '--name', 'doomed', ...viaQuiet()]));
    fails(
      await svc(['app', 'delete', '--name', 'doomed', ...viaQuiet()]),
      'Retirement grace period is not over',
      'invalid-input',
    );
  });
});
