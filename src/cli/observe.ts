// `svc metrics` and `svc traces` (spec 3 "svc metrics and svc traces"): read from the bucket.

import type { Command } from 'commander';
import { addBucketFlags, addNameFlags, notBuilt } from './flags.ts';

export function registerMetrics(program: Command): void {
  addNameFlags(addBucketFlags(program.command('metrics').description('Per-application served totals')), false)
    .option('--since <when>', 'Duration such as 90s, 15m, 1h, 7d, or an ISO-8601 instant', '1h')
    .option('--json', 'Print JSON')
    .action(notBuilt('svc metrics'));
}

export function registerTraces(program: Command): void {
  addNameFlags(addBucketFlags(program.command('traces').description('Fleet events in order')), false)
    .option('--since <when>', 'Duration or ISO-8601 instant', '1h')
    .option('--limit <n>', 'Newest events kept', '200')
    .option('--all', "Include the reconcile loop's own passes")
    .option('--json', 'Print JSON')
    .action(notBuilt('svc traces'));
}
