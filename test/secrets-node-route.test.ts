// An application's secrets through a node (docs/api.md "Secrets"; docs/cli.md "svc app"), on a real
// `svc sail` with the real runtime over a local-directory bucket: an operator key scoped to
// `shop-*` and a CI job's workload token (from an OIDC issuer started here) set, bulk-set, list and
// remove the secrets of `shop-web` without bucket credentials, and the worker reads each value on
// `env`. The value is sealed by the command line; no bucket object, node log or command output
// carries it. Every refusal of the routes is checked for status, code and title.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { keys } from '../src/registry/keys.ts';
import { generateSealKey } from '../src/secrets/seal.ts';
import { type Recipient, type SealedSecrets, sealSecrets } from '../src/secrets/secrets.ts';
import { assertProblem, type Bucket, call, keyArg, openBucket, type Signer } from './helpers/applications.ts';
import { projectDir } from './helpers/artifacts.ts';
import { readyPort, trustIssuer } from './helpers/binding-data.ts';
import { CELL_BIN } from './helpers/cell.ts';
import { startTestIssuer, type TestIssuer } from './helpers/oidc-issuer.ts';
import { runSvc, type SailProcess, tempDir, waitFor } from './helpers/svc.ts';

const APP = 'shop-web';
/** How long the node may take to hand a changed secret to the worker. */
const FOLLOW_MS = 15_000;
const SUBJECT = 'repo:acme/shop:ref:refs/heads/main';
const unique = () => `v-${Math.random().toString(36).slice(2)}-${Date.now()}`;
const SECRET = unique();
const CI_SECRET = unique();

const SAIL_FLAGS = [
  '--cell-bin',
  CELL_BIN,
  '--cell-env',
  'CELL_DRAIN_MS=2000',
  '--registry-resync-ms',
  '1000',
  '--registry-node-refresh-ms',
  '1000',
];

let bucket: Bucket;
let node: SailProcess;
let admin: Signer;
let shop: Signer;
let other: Signer;
let nodeToken: Signer;
let issuer: TestIssuer;
let port: number;
const home = tempDir('svc-home-');
/** Everything the command line printed, grepped for the values at the end. */
const printed: string[] = [];

async function svc(args: string[], input?: string) {
  const result = await runSvc(args, {
    env: { SVC_HOME: home, SVC_OPERATOR_KEY: undefined, SVC_REMOTE: undefined, SVC_STATE_DIR: tempDir() },
    input,
    timeoutMs: 120_000,
  });
  printed.push(result.stdout, result.stderr);
  return result;
}

/** Through the node, signed with the `shop-*` key. */
const asShop = () => ['--name', 'shop', '--env', 'web', '--node', node.url, '--key', keyArg(shop)];
const workloadToken = (sub = SUBJECT) => issuer.sign({ sub, aud: 'svc' });

async function body(path: string): Promise<string | null> {
  try {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(5000) });
    const text = await response.text();
    return response.status === 200 ? text : null;
  } catch {
    return null;
  }
}

/** The worker answers `expected` for `env[name]` within FOLLOW_MS. */
async function workerSees(name: string, expected: string): Promise<void> {
  await waitFor(
    async () => (await body(`/${name}`)) === expected,
    `env.${name} to be ${expected}`,
    FOLLOW_MS,
  );
}

async function recipients(): Promise<Recipient[]> {
  const answer = await call(node.url, 'GET', `/v1/applications/${APP}/secrets`, { signer: admin });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  return answer.body.recipients;
}

function sealedBody(sealed: SealedSecrets) {
  return {
    secrets: Object.fromEntries(Object.entries(sealed).map(([name, copies]) => [name, { sealed: copies }])),
  };
}

const postSecrets = (signer: Signer | undefined, payload: unknown, application = APP, headers = {}) =>
  call(node.url, 'POST', `/v1/applications/${application}/secrets`, { signer, body: payload, headers });

/** The text of every file under `dir` smaller than 10 MB, by path. A file removed between the
 * listing and the read (the running node's lock and temporary files come and go) is left out. */
function textsUnder(dir: string): Map<string, string> {
  const texts = new Map<string, string>();
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    try {
      if (statSync(path).size < 10_000_000) texts.set(path, readFileSync(path, 'utf8'));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
  return texts;
}

before(async () => {
  bucket = await openBucket();
  admin = await bucket.operator('op-admin', 'admin', ['*']);
  shop = await bucket.operator('op-shop', 'operator', ['shop-*']);
  other = await bucket.operator('op-other', 'operator', ['other-*']);
  nodeToken = await bucket.node('node-caller');
  issuer = await startTestIssuer();
  node = await bucket.sail(SAIL_FLAGS, { SVC_LOG_LEVEL: 'info' });
  const project = projectDir({
    'cell.jsonc': JSON.stringify({
      name: APP,
      main: 'index.js',
      compatibility_date: '2025-06-01',
      vars: { GREETING: 'hi' },
    }),
    'index.js': `export default {
  fetch(request, env) {
    const name = new URL(request.url).pathname.slice(1);
    return new Response(typeof env[name] === 'string' ? env[name] : 'unset');
  },
};
`,
  });
  // The scoped key deploys too: nothing here holds bucket credentials but the test itself.
  const deployed = await svc(['deploy', project, '--node', node.url, '--key', keyArg(shop)]);
  assert.equal(deployed.code, 0, deployed.stderr);
  await trustIssuer(bucket, APP, issuer.issuer, 'repo:acme/shop:*');
  port = await readyPort(node, admin, APP);
  await workerSees('GREETING', 'hi');
});

after(async () => {
  await issuer?.close();
  await bucket?.close();
});

describe('through a node, without bucket credentials', () => {
  test('a key scoped to shop-* sets a secret; the worker reads it; list names it, never its value', {
    timeout: 120_000,
  }, async () => {
    await workerSees('API_TOKEN', 'unset');
    const set = await svc(['app', 'secret', 'set', 'API_TOKEN', ...asShop()], `${SECRET}\n`);
    assert.equal(set.code, 0, set.stderr);
    assert.equal(
      set.stdout,
      `secret API_TOKEN of ${APP} set, sealed to 1 node (${node.nodeId}); serving nodes pick it up within a pass\n`,
    );
    await workerSees('API_TOKEN', SECRET);

    const listed = await svc(['app', 'secret', 'list', ...asShop(), '--json']);
    assert.equal(listed.code, 0, listed.stderr);
    const doc = JSON.parse(listed.stdout);
    assert.equal(doc.application, APP);
    assert.deepEqual(
      doc.secrets.map((s: { name: string; by: string; nodes: string[] }) => [s.name, s.by, s.nodes]),
      [['API_TOKEN', 'op-shop', [node.nodeId]]],
    );
    const table = await svc(['app', 'secret', 'list', ...asShop()]);
    assert.match(table.stdout, /^NAME\s+CHANGED\s+BY\s+SEALED FOR\nAPI_TOKEN\s+\S+\s+op-shop\s+\S+\n$/);

    // The route recorded the change, naming the caller and the secret, never the value.
    assert.match(node.log(), /"event":"secret.set"[^\n]*"actor":"op-shop"[^\n]*"secrets":\["API_TOKEN"\]/);
    const stored = await bucket.store.get(keys.appSecrets(APP));
    assert.ok(stored, 'the secrets document is in the bucket');
  });

  test('a workload token the trust policy admits sets, bulk-sets, lists and removes with --token', {
    timeout: 120_000,
  }, async () => {
    const token = await workloadToken();
    const asCi = ['--name', APP, '--node', node.url, '--token', token];
    const set = await svc(['app', 'secret', 'set', 'CI_TOKEN', ...asCi], CI_SECRET);
    assert.equal(set.code, 0, set.stderr);
    await workerSees('CI_TOKEN', CI_SECRET);

    const file = join(tempDir('svc-bulk-'), 'secrets.json');
    writeFileSync(file, JSON.stringify({ BULK_B: `${CI_SECRET}-b`, BULK_A: `${CI_SECRET}-a` }));
    const bulk = await svc(['app', 'secret', 'bulk', file, ...asCi]);
    assert.equal(bulk.code, 0, bulk.stderr);
    assert.equal(
      bulk.stdout,
      `2 secrets of ${APP} set (BULK_A, BULK_B), sealed to 1 node (${node.nodeId}); serving nodes pick them up within a pass\n`,
    );
    await workerSees('BULK_A', `${CI_SECRET}-a`);
    await workerSees('BULK_B', `${CI_SECRET}-b`);

    const listed = JSON.parse((await svc(['app', 'secret', 'list', ...asCi, '--json'])).stdout);
    const by = Object.fromEntries(
      listed.secrets.map((s: { name: string; by: string }) => [s.name, s.by] as const),
    );
    assert.deepEqual(by, {
      API_TOKEN: 'op-shop',
      BULK_A: `${issuer.issuer}#${SUBJECT}`,
      BULK_B: `${issuer.issuer}#${SUBJECT}`,
      CI_TOKEN: `${issuer.issuer}#${SUBJECT}`,
    });

    const removed = await svc(['app', 'secret', 'remove', 'CI_TOKEN', ...asCi]);
    assert.equal(removed.code, 0, removed.stderr);
    assert.equal(removed.stdout, `secret CI_TOKEN of ${APP} removed; serving nodes drop it within a pass\n`);
    await workerSees('CI_TOKEN', 'unset');
    // The others stay.
    assert.equal(await body('/BULK_A'), `${CI_SECRET}-a`);
  });

  test('with bucket flags the same commands write the bucket (the admin path), bulk included', {
    timeout: 120_000,
  }, async () => {
    const file = join(tempDir('svc-bulk-'), 'secrets.json');
    writeFileSync(file, JSON.stringify({ ADMIN_SET: `${SECRET}-admin` }));
    const bulk = await svc(['app', 'secret', 'bulk', file, '--name', APP, '--endpoint', bucket.endpoint]);
    assert.equal(bulk.code, 0, bulk.stderr);
    assert.equal(
      bulk.stdout,
      `1 secret of ${APP} set (ADMIN_SET), sealed to 1 node (${node.nodeId}); serving nodes pick them up within a pass\n`,
    );
    await workerSees('ADMIN_SET', `${SECRET}-admin`);
    const listed = JSON.parse(
      (await svc(['app', 'secret', 'list', '--name', APP, '--endpoint', bucket.endpoint, '--json'])).stdout,
    );
    const admin = listed.secrets.find((s: { name: string }) => s.name === 'ADMIN_SET');
    assert.match(admin.by, /^bucket:/);
    // No node event: the node did not take part.
    assert.doesNotMatch(node.log(), /"event":"secret.set"[^\n]*ADMIN_SET/);
    const removed = await svc([
      'app',
      'secret',
      'remove',
      'ADMIN_SET',
      '--name',
      APP,
      '--endpoint',
      bucket.endpoint,
    ]);
    assert.equal(removed.code, 0, removed.stderr);
    await workerSees('ADMIN_SET', 'unset');
  });

  test('no bucket object, node log or command output carries a value', () => {
    const bucketDir = new URL(bucket.endpoint).pathname;
    const texts = textsUnder(bucketDir);
    assert.ok([...texts.keys()].some((f) => f.includes(`/_svc/apps/${APP}/secrets.json`)));
    for (const value of [SECRET, CI_SECRET]) {
      assert.deepEqual(
        [...texts].filter(([, text]) => text.includes(value)).map(([path]) => path),
        [],
      );
      assert.ok(!node.log().includes(value), 'the node log');
      assert.ok(!printed.join('').includes(value), 'the command output');
    }
  });
});

describe('svc app secret bulk refusals: one line, nothing set', () => {
  const cases: [string, string, RegExp][] = [
    [
      'a number',
      JSON.stringify({ GOOD: 'x', PORT: 8080 }),
      /^svc: Invalid secrets file: the value of PORT in \S+ is a number; every value must be a string \[urn:svc:invalid-input\]\n$/,
    ],
    [
      'null',
      JSON.stringify({ NOTHING: null }),
      /^svc: Invalid secrets file: the value of NOTHING in \S+ is null; every value must be a string \[urn:svc:invalid-input\]\n$/,
    ],
    [
      'an object',
      JSON.stringify({ NESTED: { a: 'b' } }),
      /^svc: Invalid secrets file: the value of NESTED in \S+ is an object; every value must be a string \[urn:svc:invalid-input\]\n$/,
    ],
    [
      'a bad name',
      JSON.stringify({ GOOD: 'x', 'bad-name': 'y' }),
      /^svc: Invalid secret name: "bad-name": .* \[urn:svc:invalid-input\]\n$/,
    ],
    [
      'an empty value',
      JSON.stringify({ EMPTY: '' }),
      /^svc: Empty secret: the value of EMPTY in \S+ is empty \[urn:svc:invalid-input\]\n$/,
    ],
    [
      'not JSON',
      '{"A": "x",',
      /^svc: Invalid secrets file: \S+ is not JSON \(.*\) \[urn:svc:invalid-input\]\n$/,
    ],
    [
      'an array',
      '["A"]',
      /^svc: Invalid secrets file: \S+ holds an array; it must hold one object of "NAME": "value" \[urn:svc:invalid-input\]\n$/,
    ],
    ['an empty object', '{}', /^svc: Invalid secrets file: \S+ names no secret \[urn:svc:invalid-input\]\n$/],
  ];
  for (const [what, text, line] of cases) {
    test(what, async () => {
      const file = join(tempDir('svc-bulk-'), 'secrets.json');
      writeFileSync(file, text);
      const result = await svc(['app', 'secret', 'bulk', file, ...asShop()]);
      assert.equal(result.code, 1);
      assert.match(result.stderr, line);
      assert.equal(result.stdout, '');
      const names = JSON.parse(
        (await svc(['app', 'secret', 'list', ...asShop(), '--json'])).stdout,
      ).secrets.map((s: { name: string }) => s.name);
      assert.ok(!names.includes('GOOD'), 'nothing of a refused file is set');
    });
  }

  test('a missing file, and --token with no node to present it to', async () => {
    const missing = await svc(['app', 'secret', 'bulk', '/nonexistent/secrets.json', ...asShop()]);
    assert.equal(missing.code, 1);
    assert.equal(
      missing.stderr,
      'svc: Unreadable secrets file: /nonexistent/secrets.json: ENOENT [urn:svc:invalid-input]\n',
    );
    const noNode = await svc(['app', 'secret', 'list', '--name', APP, '--token', await workloadToken()]);
    assert.equal(noNode.code, 1);
    assert.match(noNode.stderr, /^svc: No node to ask: .* \[urn:svc:invalid-input\]\n$/);
  });
});

describe('refusals of the secret routes', () => {
  const paths = [
    ['GET', `/v1/applications/${APP}/secrets`],
    ['POST', `/v1/applications/${APP}/secrets`],
    ['DELETE', `/v1/applications/${APP}/secrets/API_TOKEN`],
  ] as const;

  test('401 auth-invalid without a token that holds up', async () => {
    for (const [method, path] of paths) {
      assertProblem(await call(node.url, method, path), 401, 'auth-invalid', 'Token rejected');
      assertProblem(
        await call(node.url, method, path, { headers: { authorization: 'Bearer not.a.token' } }),
        401,
        'auth-invalid',
        'Token rejected',
      );
    }
  });

  test('403 auth-scope: a key that does not reach the application, a node token', async () => {
    for (const [method, path] of paths) {
      assertProblem(
        await call(node.url, method, path, { signer: other, body: method === 'POST' ? {} : undefined }),
        403,
        'auth-scope',
        'Out of scope',
        /does not reach the application "shop-web"/,
      );
      assertProblem(
        await call(node.url, method, path, { signer: nodeToken, body: method === 'POST' ? {} : undefined }),
        403,
        'auth-scope',
        'Operator key required',
      );
    }
    // The scoped key itself reaches shop-web only.
    assertProblem(
      await call(node.url, 'GET', '/v1/applications/other-web/secrets', { signer: shop }),
      403,
      'auth-scope',
      'Out of scope',
    );
  });

  test('403 trust-mismatch for a subject the trust policy does not admit; 401 for another application', async () => {
    const fork = `Bearer ${await workloadToken('repo:evil/fork:ref:refs/heads/main')}`;
    for (const [method, path] of paths) {
      assertProblem(
        await call(node.url, method, path, { headers: { authorization: fork } }),
        403,
        'trust-mismatch',
        'Workload not trusted',
      );
    }
    // The token's issuer is trusted by shop-web only: for another application it does not hold up.
    assertProblem(
      await call(node.url, 'GET', '/v1/applications/shop-api/secrets', {
        headers: { authorization: `Bearer ${await workloadToken()}` },
      }),
      401,
      'auth-invalid',
      'Token rejected',
    );
  });

  test('400 invalid-slug and 404 not-found', async () => {
    assertProblem(
      await call(node.url, 'GET', '/v1/applications/Shop_Web/secrets', { signer: admin }),
      400,
      'invalid-slug',
      'Invalid application name',
    );
    const sealed = sealedBody(sealSecrets('nosuch', { TOKEN: 'v' }, await recipients()));
    for (const [method, path, payload] of [
      ['GET', '/v1/applications/nosuch/secrets', undefined],
      ['POST', '/v1/applications/nosuch/secrets', sealed],
      ['DELETE', '/v1/applications/nosuch/secrets/TOKEN', undefined],
    ] as const) {
      assertProblem(
        await call(node.url, method, path, { signer: admin, body: payload }),
        404,
        'not-found',
        'No such application',
      );
    }
    assertProblem(
      await call(node.url, 'DELETE', `/v1/applications/${APP}/secrets/NEVER_SET`, { signer: shop }),
      404,
      'not-found',
      'No such secret',
    );
  });

  test('400 invalid-input: malformed bodies, bad names, an empty value', async () => {
    const copy = sealSecrets(APP, { T: 'v' }, await recipients()).T!;
    const malformed: unknown[] = [
      {},
      { secrets: [] },
      { secrets: {} },
      { secrets: { T: copy } },
      { secrets: { T: { sealed: { [node.nodeId]: { ...copy[node.nodeId]!, iv: 'short' } } } } },
    ];
    for (const payload of malformed) {
      assertProblem(await postSecrets(shop, payload), 400, 'invalid-input', 'Malformed request');
    }
    assertProblem(
      await postSecrets(shop, { secrets: { '9LIVES': { sealed: copy } } }),
      400,
      'invalid-input',
      'Invalid secret name',
    );
    assertProblem(
      await call(node.url, 'DELETE', `/v1/applications/${APP}/secrets/bad-name`, { signer: shop }),
      400,
      'invalid-input',
      'Invalid secret name',
    );
    const tagOnly = { ...copy[node.nodeId]!, ct: Buffer.alloc(16).toString('base64url') };
    assertProblem(
      await postSecrets(shop, { secrets: { T: { sealed: { [node.nodeId]: tagOnly } } } }),
      400,
      'invalid-input',
      'Empty secret',
    );
    assertProblem(
      await postSecrets(shop, undefined, APP, { 'content-type': 'application/json' }),
      400,
      'invalid-input',
      'Malformed request',
    );
  });

  test('413 resource-limit: a value over 32 KiB, more than 100 secrets', async () => {
    const copy = sealSecrets(APP, { T: 'v' }, await recipients()).T!;
    const big = { ...copy[node.nodeId]!, ct: Buffer.alloc(32 * 1024 + 17).toString('base64url') };
    assertProblem(
      await postSecrets(shop, { secrets: { T: { sealed: { [node.nodeId]: big } } } }),
      413,
      'resource-limit',
      'Secret too large',
    );
    const many = Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`S${i}`, { sealed: copy }]));
    assertProblem(await postSecrets(shop, { secrets: many }), 413, 'resource-limit', 'Too many secrets');
  });

  test('400 invalid-input: not sealed to the serving nodes, a copy that does not open, a var', async () => {
    const serving = await recipients();
    assert.deepEqual(
      serving.map((r) => r.node),
      [node.nodeId],
    );
    const good = sealSecrets(APP, { T: 'v' }, serving).T!;
    const stranger = sealSecrets(APP, { T: 'v' }, [{ node: 'ghost', key: serving[0]!.key }]).T!;
    const otherKey = sealSecrets(APP, { T: 'v' }, [{ node: node.nodeId, key: generateSealKey().publicKey }])
      .T!;
    for (const [sealed, detail] of [
      [{}, new RegExp(`T has no copy for ${node.nodeId}`)],
      [{ ...good, ...stranger }, /T has a copy for ghost, not serving/],
      [otherKey, new RegExp(`T's copy for ${node.nodeId} is sealed to another key`)],
    ] as const) {
      assertProblem(
        await postSecrets(shop, { secrets: { T: { sealed } } }),
        400,
        'invalid-input',
        'Not sealed to the serving nodes',
        detail,
      );
    }
    // Sealed to the right key, but for another application (or name): it would never open.
    for (const moved of [
      sealSecrets('shop-api', { T: 'v' }, serving).T!,
      sealSecrets(APP, { U: 'v' }, serving).U!,
    ]) {
      assertProblem(
        await postSecrets(shop, { secrets: { T: { sealed: moved } } }),
        400,
        'invalid-input',
        'Sealed copy does not open',
      );
    }
    assertProblem(
      await postSecrets(shop, sealedBody(sealSecrets(APP, { GREETING: 'x' }, serving))),
      400,
      'invalid-input',
      'Secret and var share a name',
      /GREETING is a var of the serving deployment/,
    );
    // None of the refused bodies set anything.
    const listed = await call(node.url, 'GET', `/v1/applications/${APP}/secrets`, { signer: shop });
    const names = listed.body.secrets.map((s: { name: string }) => s.name);
    assert.ok(!names.includes('T') && !names.includes('GREETING'), JSON.stringify(names));
  });
});
