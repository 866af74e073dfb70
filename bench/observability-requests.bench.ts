// Bucket cost of observability (docs/observability.md "Batching, retention and cost"): requests per node per
// hour with observability on, against the same fleet with it off, at several application counts. Target: at
// most +600 per node per hour, flat in the number of applications.
//
// Reuses bench/fleet-requests.bench.ts: three nodes running the real registration, registry
// cache, lease keeper and reconcile loop on a local-directory bucket behind a counting Store, on a
// simulated clock, first 5 minutes left out and the next hour counted. With observability on each
// node also runs the real event recorder (every reconcile pass is an event) and the real meter
// (fed a request every 250 ms, spread over every application, so every snapshot carries totals
// for all of them), both flushed on the default interval, and the real shard reaper hourly (each
// node its own shards; the coordinator also its sweep for departed nodes). The retention is 0 here
// (the sweep's grace stays), so each node deletes its previous hour's objects within the counted
// hour, as it does every hour in a steady state with the real retention of 8 days.
// Run: scripts/with-node node bench/observability-requests.bench.ts [applications...]

import { defaultSettings } from '../src/config/settings.ts';
import { passEvent } from '../src/node/fleet/service.ts';
import { Meter } from '../src/observability/meter.ts';
import { LEFTOVER_GRACE_MS, reapShards } from '../src/observability/reap.ts';
import { EventRecorder } from '../src/observability/recorder.ts';
import { REAP_EVERY_MS } from '../src/observability/service.ts';
import { keys } from '../src/registry/keys.ts';
import { type SimAddOnFactory, simulate } from './fleet-requests.bench.ts';

const FLUSH_MS = defaultSettings().observability.flushMs;

function observability(apps: number): SimAddOnFactory {
  return ({ id, store, clock, isCoordinator }) => {
    const recorder = new EventRecorder({ store, nodeId: id, now: clock.wall });
    const meter = new Meter({ store, nodeId: id, applicationOf: (host) => host, now: clock.wall });
    let flushAt = clock.wall() + FLUSH_MS;
    let reapAt = clock.wall() + REAP_EVERY_MS;
    let served = 0;
    return {
      onPass: (status) => recorder.emit(passEvent(status)),
      async tick(now) {
        meter.count({
          host: `app-${served++ % apps}`,
          uri: '/',
          status: served % 50 === 0 ? 500 : 200,
          bytesIn: 0,
          bytesOut: 512,
          durationMs: served % 97,
        });
        if (now >= flushAt) {
          flushAt += FLUSH_MS;
          await recorder.flush();
          await meter.flush();
        }
        if (now >= reapAt) {
          reapAt += REAP_EVERY_MS;
          for (const prefix of [keys.eventsPrefix, keys.metricsPrefix]) {
            await reapShards(store, prefix, now, { node: id, retentionMs: 0 });
            if (isCoordinator()) await reapShards(store, prefix, now, { retentionMs: LEFTOVER_GRACE_MS });
          }
        }
      },
    };
  };
}

const sizes = process.argv.slice(2).map(Number).filter(Number.isFinite);
const counts = sizes.length > 0 ? sizes : [10, 1000];
console.log(
  '| Applications | Off: per node (n1 / n2 / n3) | On: per node (n1 / n2 / n3) | Added per node (n1 / n2 / n3) | Added, fleet mean per node | On, by kind |',
);
console.log('| --- | --- | --- | --- | --- | --- |');
for (const apps of counts) {
  const off = await simulate(apps);
  const on = await simulate(apps, observability(apps));
  const added = on.perNode.map((n, i) => n - off.perNode[i]!);
  const mean = added.reduce((a, b) => a + b, 0) / added.length;
  console.log(
    `| ${apps} | ${off.perNode.join(' / ')} | ${on.perNode.join(' / ')} | ${added.join(' / ')} | ${mean.toFixed(0)} | ${JSON.stringify(on.byKind)} |`,
  );
  process.stderr.write(`${apps} applications done\n`);
}
