// One node of a Durable Objects fleet as a process of its own, for the tests that kill or stop a
// node (test/objects-nodes.test.ts): an ObjectsHolder (runtime/src/bindings/objects-holder.ts) on
// the bucket the `SVC_S3_*` variables name, serving the counter worker of objects-workerd.ts in
// real workerd while it holds the application's objects. It writes one JSON line per event on
// stdout: `{"serving": url}`, `{"stopped": reason}`, `{"shipped": startedMs}` after each ship pass
// that wrote something (every write answered before `startedMs` is in the bucket).
// Environment: OBJECTS_NODE, OBJECTS_DATA_DIR, OBJECTS_TTL_MS (the lease's lifetime), the bucket.

import { ObjectsHolder } from '../../runtime/src/bindings/objects-holder.ts';
import { openBucketFromEnv } from '../../runtime/src/bucket.ts';
import { startCounterWorkerd, type Workerd } from './objects-workerd.ts';

const say = (event: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(event)}\n`);

const store = await openBucketFromEnv(process.env);
let workerd: Workerd | null = null;
const holder = new ObjectsHolder({
  store,
  application: 'app',
  node: process.env.OBJECTS_NODE ?? 'node',
  dataDir: process.env.OBJECTS_DATA_DIR ?? '',
  ttlMs: Number(process.env.OBJECTS_TTL_MS ?? 10_000),
  log: (line) => process.stderr.write(`${line}\n`),
  serve: async (dir) => {
    workerd = await startCounterWorkerd(dir);
    say({ serving: workerd.url });
  },
  stopServing: async (reason) => {
    await workerd?.stop();
    workerd = null;
    say({ stopped: reason });
  },
});
let lastShipEnd: number | null = null;
setInterval(() => {
  const ship = holder.lastShip;
  if (ship && ship.endedMs !== lastShipEnd) {
    lastShipEnd = ship.endedMs;
    say({ shipped: ship.startedMs });
  }
}, 10);
holder.start();
process.on('SIGTERM', () => {
  void holder.stop().then(() => process.exit(0));
});
