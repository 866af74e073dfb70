// The node's runtime host socket (docs/runtime.md "The runtime host"): owner-only, a stale file
// left by a killed host is replaced, a host that still listens is never displaced, and a path
// too long for a Unix socket is refused naming the setting.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { openDirStore } from '../../../src/store/dir.ts';
import { listenHostSocket } from './socket.ts';

describe('the runtime host socket', () => {
  const dir = mkdtempSync(join(tmpdir(), 'host-sock-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const options = async () => ({
    store: await openDirStore(join(dir, 'bucket')),
    name: 'test',
    log: () => {},
  });

  it('is owner-only, answers a hello, and is removed when closed', async () => {
    const path = join(dir, 'a.sock');
    const host = await listenHostSocket(path, await options());
    try {
      assert.equal(statSync(path).mode & 0o777, 0o600);
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = connect(path, () =>
          socket.write(
            `${JSON.stringify({ id: 0, op: 'hello', protocol: 1, application: 'a', node: 'n', stateDir: dir, context: { workerd: '/w' } })}\n`,
          ),
        );
        socket.once('data', (chunk) => {
          socket.destroy();
          resolve(String(chunk));
        });
        socket.once('error', reject);
      });
      assert.deepEqual(JSON.parse(answer), { id: 0, result: { protocol: 1, host: 'test' } });
    } finally {
      await host.close();
    }
    assert.throws(() => statSync(path), /ENOENT/);
  });

  it('replaces a stale socket file, and refuses to displace a host that listens', async () => {
    const path = join(dir, 'b.sock');
    writeFileSync(path, ''); // what a killed host leaves: nothing answers there
    const first = await listenHostSocket(path, await options());
    try {
      await assert.rejects(
        listenHostSocket(path, await options()),
        new RegExp(`another runtime host is listening on ${path}: one svc sail per state directory`),
      );
    } finally {
      await first.close();
    }
  });

  it('refuses a path too long for a Unix socket, naming --state-dir', async () => {
    await assert.rejects(
      listenHostSocket(join(dir, 'x'.repeat(120), 'runtime.sock'), await options()),
      /is longer than 107 bytes; choose a shorter state directory \(--state-dir\)/,
    );
  });
});
