// `svc queues` (docs/cli.md "svc queues"): an application's queues through a node, as `wrangler
// queues list` and `wrangler queues consumer` show Cloudflare's: the queues its serving deployment
// names with each one's backlog and the node delivering it now, and the consumers' settings
// (docs/api.md "Queues").

import type { Command } from 'commander';
import { callApplication, type DataFlags, dataCommand, dataTarget } from './binding-data.ts';
import { formatBytes, say, table } from './output.ts';

interface QueuesAnswer {
  application: string;
  deployment: string | null;
  queues: {
    queue: string;
    producers: string[];
    consumed: boolean;
    dead_letter_of: string[];
    backlog: { messages: number; bytes: number; first_due_ms: number | null };
    delivering: { node: string; until_ms: number } | null;
  }[];
}

interface ConsumersAnswer {
  application: string;
  deployment: string | null;
  consumers: {
    queue: string;
    max_batch_size: number;
    max_batch_timeout: number;
    max_retries: number;
    dead_letter_queue: string | null;
    retry_delay: number;
    max_concurrency: number | null;
  }[];
}

type ListFlags = DataFlags & { json?: boolean };

export function registerQueues(program: Command): void {
  const queues = program
    .command('queues')
    .description("Queues: an application's queues and their backlog, through a node");
  dataCommand(
    queues,
    'list',
    'List the queues the serving deployment sends to or consumes, with their backlog',
  )
    .option('--json', 'Print JSON')
    .action((flags: ListFlags) => queuesListAction(flags));
  const consumer = queues.command('consumer').description("The queues' consumers");
  dataCommand(consumer, 'list', "List the serving deployment's consumers and their settings")
    .option('--json', 'Print JSON')
    .action((flags: ListFlags) => consumerListAction(flags));
}

async function queuesListAction(flags: ListFlags): Promise<void> {
  const found = (await callApplication(await dataTarget(flags), 'GET', '/queues')).body as QueuesAnswer;
  if (flags.json) return say(JSON.stringify(found, null, 2));
  if (found.queues.length === 0) return say(none(found, 'names no queue'));
  const now = Date.now();
  const rows = found.queues.map((q) => [
    q.queue,
    q.producers.join(', ') || '-',
    q.consumed
      ? 'yes'
      : q.dead_letter_of.length > 0
        ? `no (dead letters of ${q.dead_letter_of.join(', ')})`
        : 'no',
    String(q.backlog.messages),
    formatBytes(q.backlog.bytes),
    q.backlog.first_due_ms === null ? '-' : due(q.backlog.first_due_ms, now),
    q.delivering?.node ?? '-',
  ]);
  for (const line of table(
    ['QUEUE', 'PRODUCERS', 'CONSUMED', 'BACKLOG', 'BYTES', 'NEXT DUE', 'DELIVERING'],
    rows,
  ))
    say(line);
}

async function consumerListAction(flags: ListFlags): Promise<void> {
  const found = (await callApplication(await dataTarget(flags), 'GET', '/queues/consumers'))
    .body as ConsumersAnswer;
  if (flags.json) return say(JSON.stringify(found, null, 2));
  if (found.consumers.length === 0) return say(none(found, 'consumes no queue'));
  const rows = found.consumers.map((c) => [
    c.queue,
    String(c.max_batch_size),
    `${c.max_batch_timeout} s`,
    String(c.max_retries),
    c.dead_letter_queue ?? '-',
    `${c.retry_delay} s`,
    c.max_concurrency === null ? '-' : String(c.max_concurrency),
  ]);
  for (const line of table(
    [
      'QUEUE',
      'BATCH SIZE',
      'BATCH TIMEOUT',
      'RETRIES',
      'DEAD LETTER QUEUE',
      'RETRY DELAY',
      'MAX CONCURRENCY',
    ],
    rows,
  ))
    say(line);
}

function none(found: { application: string; deployment: string | null }, what: string): string {
  return found.deployment === null
    ? `${found.application} has no serving deployment, so no queue.`
    : `The serving deployment ${found.deployment} of ${found.application} ${what}.`;
}

/** `now`, or how long until (or since) a time, in whole seconds. */
function due(ms: number, now: number): string {
  const seconds = Math.round((ms - now) / 1000);
  if (seconds === 0) return 'now';
  return seconds > 0 ? `in ${seconds} s` : `${-seconds} s ago`;
}
