// `svc tail` (docs/cli.md "svc tail", docs/observability.md "svc tail"): a live stream of an
// application's requests, console lines, uncaught exceptions and runtime lines from every node
// that runs it, as `wrangler tail` streams a Worker's. The node asked fans out to the others; this
// command reconnects to it when it is lost, saying so, and Ctrl-C ends it with exit status 0.
// It reads the stream only as fast as its output is taken, so a slow reader makes the nodes drop
// records (told in the stream), never the application slow down.

import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { type Command, Option } from 'commander';
import { signToken } from '../auth/token.ts';
import { filterQuery, parseFilters, type TailFilters, type TailMessage } from '../observability/tail.ts';
import { Problem } from '../problem.ts';
import { resolveApplicationName } from '../registry/names.ts';
import { type RemoteFlags, resolveTarget, type Target } from './client.ts';
import { addNameFlags, addRemoteFlags, repeatable } from './flags.ts';
import { note } from './output.ts';

interface TailFlags extends RemoteFlags {
  name?: string;
  env?: string;
  format?: string;
  status?: string[];
  method?: string[];
  search?: string;
  samplingRate?: string;
  nodeId?: string[];
}

const RETRY_FIRST_MS = 250;
const RETRY_MAX_MS = 2_000;

export function registerTail(program: Command): void {
  const command = program
    .command('tail')
    .description(
      "Live stream of an application's requests and console output, from every node that serves it",
    );
  addRemoteFlags(command);
  addNameFlags(command, true)
    .addOption(
      new Option(
        '--format <format>',
        'pretty, or json: one record a line (default: pretty on a terminal)',
      ).choices(['pretty', 'json']),
    )
    .option(
      '--status <status>',
      'Only requests whose outcome is ok, error or canceled (repeatable)',
      repeatable,
    )
    .option('--method <method>', 'Only requests of this HTTP method (repeatable)', repeatable)
    .option(
      '--search <text>',
      'Only requests whose URL, and console lines and exceptions whose text, hold this',
    )
    .option('--sampling-rate <rate>', 'Keep this share of requests and lines, above 0 and at most 1')
    .option('--node-id <id>', 'Only what this node serves (repeatable)', repeatable)
    .action((flags: TailFlags) => tailAction(flags));
}

async function tailAction(flags: TailFlags): Promise<void> {
  const application = resolveApplicationName(flags.name, flags.env);
  const filters = parseFilters({
    status: flags.status,
    method: flags.method,
    search: flags.search,
    sampling_rate: flags.samplingRate,
    node: flags.nodeId,
  });
  const format = flags.format ?? (process.stdout.isTTY ? 'pretty' : 'json');
  const target = await resolveTarget(flags);
  if (target.endpoints.length === 0)
    throw new Problem(
      'invalid-input',
      'No node to ask',
      'pass --node <url>, or add a remote with svc remote add',
    );
  if (!target.key)
    throw new Problem(
      'invalid-input',
      'No operator key',
      'pass --key, set SVC_OPERATOR_KEY, or add a remote with svc remote add',
    );
  // The node sends each record as one JSON line already: --format json passes it on as it came.
  const print = format === 'json' ? null : pretty;
  await follow(target, application, filters, print);
}

/** Streams until Ctrl-C (or SIGTERM), reconnecting to the node when the stream is lost. */
async function follow(
  target: Target,
  application: string,
  filters: TailFilters,
  print: Printer,
): Promise<void> {
  const ended = new AbortController();
  const end = () => ended.abort();
  process.once('SIGINT', end);
  process.once('SIGTERM', end);
  const path = `/v1/applications/${encodeURIComponent(application)}/tail?${filterQuery(filters)}`;
  let connectedOnce = false;
  let lost = false;
  let wait = RETRY_FIRST_MS;
  try {
    while (!ended.signal.aborted) {
      let reason = '';
      for (const endpoint of target.endpoints) {
        try {
          await stream(target, endpoint, path, ended.signal, print, () => {
            if (!connectedOnce)
              note(`Tailing ${application} on every node that serves it (${endpoint}); Ctrl-C ends it.`);
            else if (lost) note(`svc tail: connected again to ${endpoint}`);
            connectedOnce = true;
            lost = false;
            wait = RETRY_FIRST_MS;
          });
          reason = 'the stream ended';
        } catch (err) {
          // A refusal is final, but a node that is stopping or starting (503) is waited for once tailing.
          if (err instanceof Problem && !(connectedOnce && err.status >= 500)) throw err;
          reason =
            err instanceof Problem
              ? `${endpoint}: ${err.title}`
              : `${endpoint}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`;
          continue;
        }
        break;
      }
      if (ended.signal.aborted) return;
      if (!connectedOnce) throw new Problem('not-found', 'Node is not answering', reason);
      if (!lost) note(`svc tail: lost the node (${reason}); reconnecting`);
      lost = true;
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait = Math.min(wait * 2, RETRY_MAX_MS);
    }
  } finally {
    process.off('SIGINT', end);
    process.off('SIGTERM', end);
  }
}

/** One connection: resolves when the stream ends or is aborted, rejects when it fails. */
async function stream(
  target: Target,
  endpoint: string,
  path: string,
  ended: AbortSignal,
  print: Printer,
  connected: () => void,
): Promise<void> {
  const url = new URL(`${endpoint}${path}`);
  const token = await signToken({ id: target.key!.id, privateKey: target.key!.pair.privateKey });
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  const response = await new Promise<IncomingMessage>((resolve, reject) => {
    const request = send(url, {
      method: 'GET',
      headers: { accept: 'application/x-ndjson', authorization: `Bearer ${token}` },
      signal: ended,
    });
    request.on('response', resolve);
    request.on('error', reject);
    request.end();
  }).catch((err: Error) => {
    if (ended.aborted) return null;
    throw err;
  });
  if (!response) return;
  if (response.statusCode !== 200) throw await refusal(response);
  connected();
  await new Promise<void>((resolve, reject) => {
    let pending = '';
    response.setEncoding('utf8');
    response.on('data', (chunk: string) => {
      pending += chunk;
      let out = '';
      let end = pending.indexOf('\n');
      while (end >= 0) {
        const line = pending.slice(0, end);
        pending = pending.slice(end + 1);
        out += render(line, print);
        end = pending.indexOf('\n');
      }
      // Read no faster than the output is taken: the nodes drop what a slow reader cannot take.
      if (out !== '' && !process.stdout.write(out)) {
        response.pause();
        process.stdout.once('drain', () => response.resume());
      }
    });
    response.on('end', resolve);
    response.on('close', resolve);
    response.on('error', (err) => (ended.aborted ? resolve() : reject(err)));
  });
}

/** How records are shown: null passes each JSON line on as the node sent it. */
type Printer = ((m: TailMessage) => string) | null;

function render(line: string, print: Printer): string {
  if (line === '') return '';
  if (print === null) return `${line}\n`;
  try {
    return `${print(JSON.parse(line) as TailMessage)}\n`;
  } catch {
    return '';
  }
}

async function refusal(response: IncomingMessage): Promise<Problem> {
  let text = '';
  for await (const chunk of response) text += String(chunk);
  let document: object = {};
  try {
    document = JSON.parse(text) as object;
  } catch {
    // Not a problem document: the status alone says it.
  }
  return Problem.fromDocument(document, response.statusCode ?? 0);
}

/** wrangler's words for an outcome in its pretty format. */
const OUTCOMES: Record<string, string> = {
  ok: 'Ok',
  canceled: 'Canceled',
  exception: 'Exception Thrown',
  exceededCpu: 'Exceeded CPU Limit',
  exceededMemory: 'Exceeded Memory Limit',
};

/** One record as a line for a person, in the manner of `wrangler tail --format pretty`. */
export function pretty(m: TailMessage): string {
  const at = new Date(m.eventTimestamp).toLocaleString();
  switch (m.kind) {
    case 'request': {
      const { request, response } = m.event ?? {
        request: { method: '?', url: '?' },
        response: { status: 0 },
      };
      const outcome = OUTCOMES[m.outcome] ?? m.outcome;
      return `${request.method} ${request.url} - ${outcome} @ ${at} [${m.node}] ${response.status} ${m.durationMs ?? 0} ms`;
    }
    case 'log':
      return m.logs.map((l) => `  (${l.level}) [${m.node}] ${l.message.join(' ')}`).join('\n');
    case 'exception':
      return m.exceptions.map((e) => `  ✘ [${m.node}] ${e.name}: ${e.message}`).join('\n');
    default:
      return `  [${m.node}] ${m.message ?? ''}`;
  }
}
