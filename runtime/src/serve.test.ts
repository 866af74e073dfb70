// `cell serve`'s start (docs/runtime.md "cell serve"): what the front is told, and the shim that
// checks the environment, makes the state folder and becomes the front. The execve test runs a
// stand-in for the front binary (a shell script printing what it was given), named as one: the
// front itself is tested with the Go program.

import assert from 'node:assert/strict';
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { readServeOptions } from '../../src/runtime-contract/environment.ts';
import { CELL_BIN, dirBucketEnv, runCell } from '../../test/helpers/cell.ts';
import { runToEnd } from '../../test/helpers/svc.ts';
import { frontBinary, frontConfig, hostContext, privateHostCommand, tuningFromEnv } from './serve.ts';
import { CELL_VERSION_LINE } from './version.ts';
import { workerdBinary } from './workerd.ts';

describe("the front's configuration", () => {
  it('carries the identity, the tuning, the contract constants and the runtime host', () => {
    const tuning = tuningFromEnv({
      CELL_SELECTOR_POLL_MS: '1000',
      CELL_LEASE_TTL_MS: '60000',
      CELL_DRAIN_MS: '500',
      CELL_START_TIMEOUT_MS: '2000',
      CELL_RETRY_MS: '300',
      CELL_UNSUPERVISED_EXIT_MS: '90000',
    });
    const privateHost = privateHostCommand(
      '/usr/bin/node',
      ['--max-semi-space-size=1'],
      '/srv/runtime/bin/cell',
    );
    assert.deepEqual(privateHost, [
      '/usr/bin/node',
      '--max-semi-space-size=1',
      '/srv/runtime/bin/cell',
      'host',
      '--stdio',
    ]);
    const context = hostContext({
      CELL_OTEL: '1',
      CELL_SECRETS_FILE: '/s/hello.json',
      CELL_WORKERD: '/opt/workerd',
      CELL_FRONT_CONFIG: '{}',
      SVC_S3_SECRET_KEY: 'never',
    });
    assert.deepEqual(context, {
      workerd: '/opt/workerd',
      secretsFile: '/s/hello.json',
      env: { CELL_OTEL: '1', CELL_SECRETS_FILE: '/s/hello.json', CELL_WORKERD: '/opt/workerd' },
    });
    const config = frontConfig(
      { application: 'hello', node: 'n1', host: '::1', port: 8080 },
      tuning,
      { otel: true, hostSocket: '/var/lib/svc/runtime.sock' },
      '/tmp/cell-hello-abc123',
      privateHost,
      context,
    );
    assert.deepEqual(config, {
      application: 'hello',
      node: 'n1',
      host: '::1',
      port: 8080,
      versionLine: CELL_VERSION_LINE,
      healthPath: '/.well-known/cell/health',
      supervisorHeader: 'cell-supervisor',
      otel: true,
      stateDir: '/tmp/cell-hello-abc123',
      pollMs: 1000,
      leaseTtlMs: 60000,
      drainMs: 500,
      stopDrainMs: 10000,
      startTimeoutMs: 2000,
      retryMs: 300,
      maxRetryMs: 300000,
      unsupervisedExitMs: 90000,
      hostSocket: '/var/lib/svc/runtime.sock',
      privateHost,
      hostContext: context,
      geoipDb: null,
    });
  });

  it('names the GeoIP database CELL_GEOIP_DB gives', () => {
    const options = readServeOptions({ CELL_GEOIP_DB: '/var/lib/geoip/GeoLite2-City.mmdb' });
    const config = frontConfig(
      { application: 'a', node: 'n', host: '127.0.0.1', port: 1 },
      tuningFromEnv({}),
      options,
      '/s',
      [],
      { workerd: workerdBinary(), secretsFile: null, env: {} },
    );
    assert.equal(config.geoipDb, '/var/lib/geoip/GeoLite2-City.mmdb');
    assert.equal(readServeOptions({ CELL_GEOIP_DB: '' }).geoipDb, undefined);
  });

  it('has the fleet defaults when nothing is tuned, and no unsupervised bound by hand', () => {
    const config = frontConfig(
      { application: 'a', node: 'n', host: '127.0.0.1', port: 1 },
      tuningFromEnv({}),
      { otel: false },
      '/s',
      [],
      { workerd: workerdBinary(), secretsFile: null, env: {} },
    );
    assert.equal(config.pollMs, 300_000);
    assert.equal(config.leaseTtlMs, 900_000);
    assert.equal(config.drainMs, 30_000);
    assert.equal(config.startTimeoutMs, 60_000);
    assert.equal(config.retryMs, 10_000);
    assert.equal(config.unsupervisedExitMs, null);
    assert.equal(config.otel, false);
  });

  it('finds the front beside the entry script unless CELL_FRONT_BIN names it', () => {
    assert.equal(frontBinary({}, '/srv/runtime/bin/cell'), '/srv/runtime/bin/cell-front');
    assert.equal(frontBinary({}, '/opt/svc/dist/cell.mjs'), '/opt/svc/dist/cell-front');
    assert.equal(frontBinary({ CELL_FRONT_BIN: '/x/front' }, '/srv/runtime/bin/cell'), '/x/front');
  });
});

describe('cell serve, the shim', () => {
  let base: string;
  let bucket: Record<string, string>;
  const identity = { CELL_APP: 'hello', CELL_NODE: 'node-x', CELL_PORT: '8080', CELL_BIND_HOST: '127.0.0.1' };

  before(() => {
    base = mkdtempSync(join(tmpdir(), 'cell-shim-'));
    bucket = dirBucketEnv(join(base, 'bucket'));
  });

  after(() => rmSync(base, { recursive: true, force: true }));

  const stateFolders = (dir: string) => readdirSync(dir).filter((name) => name.startsWith('cell-'));

  it('refuses a missing front binary by its path, leaving no state folder', async () => {
    const states = mkdtempSync(join(base, 's'));
    const missing = join(base, 'nowhere', 'cell-front');
    const result = await runCell(['serve'], {
      env: { ...bucket, ...identity, CELL_STATE_DIR: states, CELL_FRONT_BIN: missing },
    });
    assert.equal(result.code, 1);
    assert.equal(
      result.stderr,
      `cell: cell serve needs its front binary ${missing}; build it with make setup (or make dist)\n`,
    );
    assert.deepEqual(stateFolders(states), []);
  });

  it('refuses a bad environment before anything else, as before', async () => {
    const front = join(base, 'nowhere', 'cell-front');
    const port = await runCell(['serve'], {
      env: { ...bucket, ...identity, CELL_PORT: '0', CELL_FRONT_BIN: front },
    });
    assert.equal(port.code, 1);
    assert.equal(port.stderr, 'cell: CELL_PORT must be a port number 1-65535, got "0"\n');
    const poll = await runCell(['serve'], {
      env: { ...bucket, ...identity, CELL_SELECTOR_POLL_MS: '10', CELL_FRONT_BIN: front },
    });
    assert.equal(poll.code, 1);
    assert.equal(
      poll.stderr,
      'cell: CELL_SELECTOR_POLL_MS must be a whole number of milliseconds >= 50, got "10"\n',
    );
    const noBucket = await runCell(['serve'], { env: { ...identity, CELL_FRONT_BIN: front } });
    assert.equal(noBucket.code, 1);
    assert.match(noBucket.stderr, /^cell: no bucket: SVC_S3_ENDPOINT is not set/);
  });

  it('becomes the front: same pid, argv serve <app>, the config in CELL_FRONT_CONFIG, the state folder owned', async () => {
    const states = mkdtempSync(join(base, 's'));
    // Stand-in for the front binary: prints what it was started with, then exits.
    const front = join(base, 'fake-front');
    writeFileSync(
      front,
      '#!/bin/sh\necho "pid=$$"\necho "argv=$0 $*"\nprintf "%s\\n" "$CELL_FRONT_CONFIG"\necho "app=$CELL_APP"\n',
    );
    chmodSync(front, 0o755);
    // Run through its shebang, as the supervisor does, so that Node's flags are the entry script's.
    const result = await runToEnd(CELL_BIN, ['serve'], {
      env: { ...bucket, ...identity, CELL_STATE_DIR: states, CELL_FRONT_BIN: front, CELL_OTEL: '1' },
    });
    assert.equal(result.code, 0, result.stderr);
    const [pidLine, argvLine, configLine, appLine] = result.stdout.trimEnd().split('\n');
    assert.equal(argvLine, `argv=${front} serve hello`);
    assert.equal(appLine, 'app=hello', 'the environment is passed on');
    const config = JSON.parse(configLine!);
    assert.equal(config.application, 'hello');
    assert.equal(config.node, 'node-x');
    assert.equal(config.port, 8080);
    assert.equal(config.otel, true);
    assert.equal(config.hostSocket, null, 'without the node daemon, a private host');
    assert.deepEqual(config.privateHost.slice(1), ['--max-semi-space-size=1', CELL_BIN, 'host', '--stdio']);
    assert.match(config.privateHost[0], /\/node$/);
    assert.equal(config.hostContext.workerd, workerdBinary());
    assert.equal(config.hostContext.env.CELL_OTEL, '1');
    assert.deepEqual(stateFolders(states), [config.stateDir.slice(states.length + 1)]);
    // The folder's owner is the shim's pid, which the front keeps.
    assert.equal(readFileSync(join(config.stateDir, 'owner'), 'utf8'), pidLine!.slice('pid='.length));
    assert.ok(existsSync(config.stateDir));
  });
});
