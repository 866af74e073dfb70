// Cron runs in the fleet's events (docs/runtime.md "Cron triggers", docs/observability.md
// "Events"), end to end with real parts: a real `svc sail` node with --observability on a
// local-directory bucket, the real runtime (cell serve, workerd), examples/cron deployed with the
// real `svc deploy`, and a copy of it whose `scheduled` handler throws. Each scheduled minute
// becomes one `cron.ran` event that `svc traces` shows, with the application, the node, the
// expression, the scheduled time and the outcome (the exception's message when it threw), and one
// line in the node's log.

import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { type Bucket, call, keyArg, openBucket, type Signer } from './helpers/applications.ts';
import { CELL_BIN, copyProject, EXAMPLES, isRunning } from './helpers/cell.ts';
import { runSvc, type SailProcess, waitFor } from './helpers/svc.ts';

/** Start-up, a deploy each, then the next minute boundary and a flush of the events. */
const CRON_EVENT_MS = 150_000;
const SERVE_MS = 60_000;

interface CronEvent {
  kind: string;
  at: string;
  node: string;
  application: string;
  cron: string;
  scheduled: string;
  deployment: string;
  outcome: string;
  error?: string;
}

let bucket: Bucket | undefined;
/** Runtime process groups to kill if the test fails before the daemon stopped them. */
const runtimePids: number[] = [];
after(async () => {
  await bucket?.close();
  for (const pid of runtimePids) if (isRunning(pid)) process.kill(-pid, 'SIGKILL');
});

async function readyProcess(node: SailProcess, signer: Signer, application: string): Promise<void> {
  const ready = await waitFor(
    async () => {
      const state = await call(node.url, 'GET', '/v1/state', { signer });
      const processes = (state.body as { processes: { application: string; ready: boolean; pid?: number }[] })
        .processes;
      return processes.find((p) => p.application === application && p.ready);
    },
    () => `${application} ready on ${node.nodeId}\n${node.log()}`,
    SERVE_MS,
  );
  if (ready?.pid) runtimePids.push(ready.pid);
}

test('each cron run is an event in svc traces, with its outcome, and a line in the node log', {
  timeout: CRON_EVENT_MS + 2 * SERVE_MS,
}, async () => {
  bucket = await openBucket();
  const admin = await bucket.operator('op-admin', 'admin', ['*']);
  const node = await bucket.sail(
    ['--cell-bin', CELL_BIN, '--node-id', 'cron-node', '--observability', '--observability-flush-ms', '300'],
    { SVC_LOG_LEVEL: 'info' },
  );

  const ticker = copyProject(join(EXAMPLES, 'cron'));
  const failing = copyProject(join(EXAMPLES, 'cron'));
  const source = join(failing, 'src', 'index.js');
  const original = readFileSync(source, 'utf8');
  const throwing = original.replace(
    /async scheduled\(controller\) \{/,
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the worker's source, interpolated by the worker.
    'async scheduled(controller) {\n    throw new TypeError(`no stock to count at ${controller.cron}`);',
  );
  assert.notEqual(throwing, original, 'the handler of examples/cron is where this test expects it');
  writeFileSync(source, throwing);
  for (const [project, name] of [
    [ticker, 'ticker'],
    [failing, 'ticker-failing'],
  ] as const) {
    const deployed = await runSvc(
      ['deploy', project, '--name', name, '--node', node.url, '--key', keyArg(admin)],
      {
        timeoutMs: 90_000,
      },
    );
    assert.equal(deployed.code, 0, deployed.stderr);
    await readyProcess(node, admin, name);
  }

  const endpoint = ['--endpoint', bucket.endpoint];
  const cronEvents = async (application: string): Promise<CronEvent[]> => {
    const run = await runSvc(['traces', ...endpoint, '--name', application, '--json']);
    assert.equal(run.code, 0, run.stderr);
    return (JSON.parse(run.stdout).events as CronEvent[]).filter((e) => e.kind === 'cron.ran');
  };
  const pair = await waitFor(
    async () => {
      const found = [(await cronEvents('ticker'))[0], (await cronEvents('ticker-failing'))[0]];
      return found[0] && found[1] ? found : null;
    },
    'a cron.ran event of each application',
    CRON_EVENT_MS,
  );
  assert.ok(pair);
  const [ran, failed] = pair;
  assert.ok(ran && failed);

  for (const event of [ran, failed]) {
    assert.equal(event.node, 'cron-node');
    assert.equal(event.cron, '* * * * *');
    assert.match(event.scheduled, /^\d{4}-\d\d-\d\dT\d\d:\d\d:00\.000Z$/, 'a whole minute');
    assert.ok(Date.parse(event.at) >= Date.parse(event.scheduled), 'recorded after its time');
    assert.match(event.deployment, /\S/);
  }
  assert.equal(ran.application, 'ticker');
  assert.equal(ran.outcome, 'ok');
  assert.equal(ran.error, undefined);
  assert.equal(failed.application, 'ticker-failing');
  assert.equal(failed.outcome, 'exception');
  assert.equal(failed.error, 'TypeError: no stock to count at * * * * *');

  // The table names the run and its outcome on the application's row.
  const table = await runSvc(['traces', ...endpoint, '--name', 'ticker-failing']);
  assert.equal(table.code, 0, table.stderr);
  assert.match(
    table.stdout,
    /cron-node\s+cron\.ran\s+ticker-failing\s+-\s+cron="\* \* \* \* \*" scheduled=\S+Z/,
  );
  assert.match(table.stdout, /outcome=exception error="TypeError: no stock to count at \* \* \* \* \*"/);

  // The node's log has a line for each run, the failed one as a warning.
  const lines = node
    .log()
    .split('\n')
    .filter((line) => line.includes('"msg":"cron ran'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  const logged = (application: string) => lines.find((l) => l.application === application && l.scheduled);
  assert.equal(logged('ticker')?.msg, 'cron ran');
  assert.equal(logged('ticker')?.outcome, 'ok');
  assert.equal(logged('ticker')?.scheduled, ran.scheduled);
  assert.equal(logged('ticker-failing')?.msg, 'cron ran and failed');
  assert.equal(logged('ticker-failing')?.error, 'TypeError: no stock to count at * * * * *');
});
