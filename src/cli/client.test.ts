// docs/cli.md "Flag groups" (remote flags and resolution order), docs/identity.md "Tokens" and
// docs/cli.md "Output and exit status" (a node's problem document keeps the node's code), for the CLI client.

import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startTestNode, type TestNode } from '../../test/helpers/in-process-node.ts';
import { generateOperatorKey, keyFileDocument, portableDocument } from '../auth/key-file.ts';
import { operatorRoutes } from '../node/routes/operators.ts';
import { keys } from '../registry/keys.ts';
import { callNode, requestNode, resolveTarget, type Target } from './client.ts';
import { saveHomeKey, saveRemotes } from './operator-home.ts';

const tempDir = () => mkdtempSync(join(tmpdir(), 'svc-client-'));

async function homeWith(remotes: Record<string, string[]>) {
  const home = tempDir();
  const index: Parameters<typeof saveRemotes>[1] = { v: 1, remotes: {} };
  const keysByRemote: Record<string, string> = {};
  for (const [name, endpoints] of Object.entries(remotes)) {
    const key = generateOperatorKey();
    await saveHomeKey(home, key);
    index.remotes[name] = { endpoints, key: key.id };
    keysByRemote[name] = key.id;
  }
  await saveRemotes(home, index);
  return { home, keysByRemote };
}

function keyFile(dir: string, doc: object): string {
  const path = join(dir, `key-${Math.random()}.json`);
  writeFileSync(path, JSON.stringify(doc), { mode: 0o600 });
  return path;
}

describe('resolution order', () => {
  test('the only remote gives key and endpoints', async () => {
    const { home, keysByRemote } = await homeWith({ prod: ['http://n1:7311', 'http://n2:7311'] });
    const target = await resolveTarget({}, { env: { SVC_HOME: home } });
    assert.equal(target.remote, 'prod');
    assert.equal(target.key?.id, keysByRemote.prod);
    assert.deepEqual(target.endpoints, ['http://n1:7311', 'http://n2:7311']);
  });

  test('remote: --remote, then SVC_REMOTE, then the config pin', async () => {
    const { home } = await homeWith({ a: ['http://a:1'], b: ['http://b:1'], c: ['http://c:1'] });
    const config = join(tempDir(), 'svc.config.jsonc');
    writeFileSync(config, '{ "remote": "c" }');
    const env = { SVC_HOME: home, SVC_REMOTE: 'b' };
    assert.equal((await resolveTarget({ remote: 'a', config }, { env })).remote, 'a');
    assert.equal((await resolveTarget({ config }, { env })).remote, 'b');
    assert.equal((await resolveTarget({ config }, { env: { SVC_HOME: home } })).remote, 'c');
  });

  test('several remotes and no choice: refused off a TTY, chosen through the prompt on one', async () => {
    const { home } = await homeWith({ a: ['http://a:1'], b: ['http://b:1'] });
    await assert.rejects(resolveTarget({}, { env: { SVC_HOME: home } }), {
      code: 'invalid-input',
      title: 'Several remotes',
    });
    const target = await resolveTarget({}, { env: { SVC_HOME: home }, choose: async (names) => names[1]! });
    assert.equal(target.remote, 'b');
  });

  test('a named remote that does not exist is not-found', async () => {
    const { home } = await homeWith({ a: ['http://a:1'] });
    await assert.rejects(resolveTarget({ remote: 'zz' }, { env: { SVC_HOME: home } }), {
      code: 'not-found',
      title: 'No such remote',
    });
  });

  test('key: --key, then SVC_OPERATOR_KEY, then the remote; endpoint from the remote', async () => {
    const { home } = await homeWith({ a: ['http://a:1'] });
    const dir = tempDir();
    const flagKey = generateOperatorKey();
    const envKey = generateOperatorKey();
    const env = { SVC_HOME: home, SVC_OPERATOR_KEY: keyFile(dir, keyFileDocument(envKey)) };
    const both = await resolveTarget({ key: keyFile(dir, keyFileDocument(flagKey)) }, { env });
    assert.equal(both.key?.id, flagKey.id);
    assert.deepEqual(both.endpoints, ['http://a:1']);
    assert.equal((await resolveTarget({}, { env })).key?.id, envKey.id);
  });

  test('the inline base64: form (the CI form)', async () => {
    const key = generateOperatorKey();
    const inline = `base64:${Buffer.from(JSON.stringify(keyFileDocument(key))).toString('base64')}`;
    const target = await resolveTarget({ key: inline, node: 'http://n:1' }, { env: { SVC_HOME: tempDir() } });
    assert.equal(target.key?.id, key.id);
  });

  test('endpoint: --node, then what a portable key carried; no remote is consulted when both are known', async () => {
    // Several remotes would refuse off a TTY: reaching them would fail the test.
    const { home } = await homeWith({ a: ['http://a:1'], b: ['http://b:1'] });
    const key = generateOperatorKey();
    const portable = keyFile(tempDir(), portableDocument(key, 'prod', ['http://p1:7311']));
    const env = { SVC_HOME: home };
    const carried = await resolveTarget({ key: portable }, { env });
    assert.deepEqual(carried.endpoints, ['http://p1:7311']);
    assert.equal(carried.remote, undefined);
    const flagged = await resolveTarget({ key: portable, node: 'http://other:9' }, { env });
    assert.deepEqual(flagged.endpoints, ['http://other:9']);
  });

  test('unreadable keys are refused naming their source', async () => {
    const env = { SVC_HOME: tempDir() };
    await assert.rejects(resolveTarget({ key: '/nonexistent/key.json' }, { env }), {
      code: 'invalid-input',
      title: 'Key file not found',
    });
    const publicOnly = keyFile(tempDir(), { id: 'op-1', publicKey: generateOperatorKey().pair.publicJwk });
    await assert.rejects(resolveTarget({ key: publicOnly }, { env }), {
      code: 'invalid-input',
      title: 'Unreadable operator key',
    });
    const mismatched = {
      ...keyFileDocument(generateOperatorKey()),
      publicKey: generateOperatorKey().pair.publicJwk,
    };
    await assert.rejects(resolveTarget({ key: keyFile(tempDir(), mismatched) }, { env }), {
      code: 'invalid-input',
      title: 'Unreadable operator key',
    });
  });
});

describe('calls', () => {
  let node: TestNode;
  let target: Target;
  before(async () => {
    node = await startTestNode([operatorRoutes]);
    const key = generateOperatorKey('op-cli');
    await node.store.putJson(keys.operator('op-cli'), {
      v: 1,
      id: 'op-cli',
      publicKey: key.pair.publicJwk,
      role: 'operator',
      applications: ['shop-*'],
      registeredAt: '',
      registeredBy: 'bucket',
    });
    target = { endpoints: [node.url], key, home: tempDir() };
  });
  after(() => node.close());

  test('each call signs a fresh token; the JSON answer is returned', async () => {
    const first = (await callNode(target, 'GET', '/v1/operators')) as {
      operators: { id: string }[];
      scoped: true;
    };
    assert.deepEqual(
      first.operators.map((o) => o.id),
      ['op-cli'],
    );
    assert.equal(first.scoped, true);
    await callNode(target, 'GET', '/v1/operators');
  });

  test("a refusal is the node's problem, code kept", async () => {
    await assert.rejects(callNode(target, 'DELETE', '/v1/operators/op-cli'), {
      code: 'invalid-input',
      title: 'Cannot revoke your own key',
      status: 400,
    });
    await assert.rejects(
      callNode({ ...target, key: generateOperatorKey('op-cli') }, 'GET', '/v1/operators'),
      {
        code: 'auth-invalid',
        title: 'Token rejected',
      },
    );
  });

  test('no node: invalid-input, No node to ask; no key: invalid-input', async () => {
    await assert.rejects(callNode({ ...target, endpoints: [] }, 'GET', '/v1/operators'), {
      code: 'invalid-input',
      title: 'No node to ask',
    });
    await assert.rejects(callNode({ ...target, key: null }, 'GET', '/v1/operators'), {
      code: 'invalid-input',
      title: 'No operator key',
    });
  });

  test('an endpoint that does not answer is skipped for the next', async () => {
    const answer = await requestNode(
      { ...target, endpoints: ['http://127.0.0.1:1', node.url] },
      'GET',
      '/v1/operators',
    );
    assert.equal(answer.status, 200);
    await assert.rejects(callNode({ ...target, endpoints: ['http://127.0.0.1:1'] }, 'GET', '/v1/operators'), {
      code: 'not-found',
      title: 'Node is not answering',
    });
  });

  test('a given token is presented instead of signing', async () => {
    await assert.rejects(callNode({ ...target, key: null }, 'GET', '/v1/operators', { token: 'x.y.z' }), {
      code: 'auth-invalid',
    });
  });
});

describe('what a node call reaches and reads', () => {
  const key = generateOperatorKey();

  /** A loopback server on the first free port of `ports`, answering every request with `answer`. */
  async function serveOn(ports: number[], answer: { type: string; body: string }) {
    const { createServer } = await import('node:http');
    for (const port of ports) {
      const server = createServer((_request, response) => {
        response.writeHead(200, { 'content-type': answer.type }).end(answer.body);
      });
      const listening = await new Promise<boolean>((resolve) => {
        server.once('error', () => resolve(false));
        server.listen(port, '127.0.0.1', () => resolve(true));
      });
      if (listening) return { server, url: `http://127.0.0.1:${port}` };
    }
    throw new Error(`none of ${ports.join(', ')} is free`);
  }

  test('a node on a port fetch refuses (6000, 6665-6669) is reached', async () => {
    const { server, url } = await serveOn([6665, 6666, 6667, 6668, 6669, 6000], {
      type: 'application/json',
      body: '{"operators":[]}',
    });
    try {
      const body = await callNode({ endpoints: [url], key, home: tempDir() }, 'GET', '/v1/operators');
      assert.deepEqual(body, { operators: [] });
    } finally {
      server.close();
    }
  });

  test('a 200 that is not JSON (a login page) is refused, saying what came back and from where', async () => {
    const { server } = await serveOn([0], {
      type: 'text/html',
      body: '<html><title>Proxy login</title></html>',
    });
    const port = (server.address() as { port: number }).port;
    const base = `http://127.0.0.1:${port}`;
    try {
      await assert.rejects(callNode({ endpoints: [base], key, home: tempDir() }, 'GET', '/v1/operators'), {
        code: 'invalid-input',
        title: 'Not a node API answer',
        detail: new RegExp(
          `^GET ${base}/v1/operators answered 200 with text/html \\("<html><title>Proxy login</title></html>"\\), not JSON; check the node URL`,
        ),
      });
    } finally {
      server.close();
    }
  });
});
