// The node API client of the command line (docs/cli.md "Flag groups": remote flags and their resolution
// order; docs/identity.md "Tokens"; docs/cli.md "Output and exit status": a node's problem document is
// re-rendered with the node's code). Every request is signed with a fresh token.
//
// Resolution order:
//   key       --key, then SVC_OPERATOR_KEY, then the remote's key
//   endpoint  --node, then the endpoints a portable key carried, then the remote's
//   remote    --remote, then SVC_REMOTE, then the config file's `remote` pin, then the only
//             remote registered; several with no choice: a prompt on a TTY, else invalid-input

import { createInterface } from 'node:readline/promises';
import { loadOperatorKey, type OperatorKey } from '../auth/key-file.ts';
import { signToken } from '../auth/token.ts';
import { loadConfigFile } from '../config/file.ts';
import { PROBLEM_CONTENT_TYPE, Problem } from '../problem.ts';
import { type HttpAnswer, httpExchange } from './http.ts';
import { checkRemoteName, loadHomeKey, loadRemotes, operatorHome } from './operator-home.ts';
import { warn } from './output.ts';

/** A 2xx answer that is not the node API's JSON: say what came back, and from where. */
function notNodeAnswer(response: HttpAnswer, asked: string): Problem {
  const type = response.headers.get('content-type') || 'no content type';
  const start = response.text.replace(/\s+/g, ' ').trim().slice(0, 60);
  return new Problem(
    'invalid-input',
    'Not a node API answer',
    `${asked} answered ${response.status} with ${type} (${JSON.stringify(start)}${response.text.length > 60 ? '...' : ''}), not JSON; check the node URL (--node or the remote's endpoint)`,
  );
}

/** The remote flags as commander parses them. */
export interface RemoteFlags {
  config?: string;
  remote?: string;
  node?: string;
  key?: string;
}

/** Where a command's node calls go and what signs them. */
export interface Target {
  /** Node base URLs in the order they are tried; empty when no node is known. */
  endpoints: string[];
  /** The signing key; null when none was found. */
  key: OperatorKey | null;
  /** The remote consulted, when one was. */
  remote?: string;
  /** Where each half came from, for messages. */
  keySource?: 'flag' | 'env' | 'remote';
  endpointSource?: 'flag' | 'portable' | 'remote';
  /** The operator home consulted. */
  home: string;
}

export interface ResolveOptions {
  env?: NodeJS.ProcessEnv;
  /** Asks the operator to choose among several remotes; default: a prompt when stdin is a TTY. */
  choose?: (names: string[]) => Promise<string>;
}

/** Resolves the key, endpoints and remote of a command from its remote flags. */
export async function resolveTarget(flags: RemoteFlags, options: ResolveOptions = {}): Promise<Target> {
  const env = options.env ?? process.env;
  const home = operatorHome(env);
  const target: Target = { endpoints: [], key: null, home };

  if (flags.key) {
    target.key = await loadOperatorKey(flags.key, '--key', warn);
    target.keySource = 'flag';
  } else if (env.SVC_OPERATOR_KEY) {
    target.key = await loadOperatorKey(env.SVC_OPERATOR_KEY, 'SVC_OPERATOR_KEY', warn);
    target.keySource = 'env';
  }
  if (flags.node) {
    target.endpoints = [checkNodeUrl(flags.node)];
    target.endpointSource = 'flag';
  } else if (target.key?.endpoints?.length) {
    target.endpoints = [...target.key.endpoints];
    target.endpointSource = 'portable';
  }
  if (target.key && target.endpoints.length > 0) return target;

  const remote = await chooseRemote(flags, env, home, options.choose);
  if (!remote) return target;
  target.remote = remote.name;
  if (!target.key) {
    target.key = await loadHomeKey(home, remote.entry.key);
    target.keySource = 'remote';
  }
  if (target.endpoints.length === 0) {
    target.endpoints = [...remote.entry.endpoints];
    target.endpointSource = 'remote';
  }
  return target;
}

function checkNodeUrl(value: string): string {
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw new Problem(
      'invalid-input',
      'Invalid --node',
      `${JSON.stringify(value)} is no node base URL such as http://127.0.0.1:7311`,
    );
  }
  return url.href.replace(/\/+$/, '');
}

async function chooseRemote(
  flags: RemoteFlags,
  env: NodeJS.ProcessEnv,
  home: string,
  choose: ResolveOptions['choose'],
) {
  const index = await loadRemotes(home);
  const names = Object.keys(index.remotes).sort();
  const named = flags.remote ?? (env.SVC_REMOTE || undefined) ?? pinnedRemote(flags.config, env);
  let name: string | undefined;
  if (named !== undefined) {
    name = checkRemoteName(named);
    if (!index.remotes[name]) {
      throw new Problem(
        'not-found',
        'No such remote',
        `${JSON.stringify(name)} is not a remote in ${home}${names.length ? ` (remotes: ${names.join(', ')})` : ''}`,
      );
    }
  } else if (names.length === 1) {
    name = names[0];
  } else if (names.length > 1) {
    name = await (choose ?? promptForRemote)(names);
    if (!index.remotes[name])
      throw new Problem(
        'invalid-input',
        'No such remote',
        `${JSON.stringify(name)} is not one of ${names.join(', ')}`,
      );
  }
  return name === undefined ? null : { name, entry: index.remotes[name]! };
}

function pinnedRemote(config: string | undefined, env: NodeJS.ProcessEnv): string | undefined {
  const pin = loadConfigFile(config, env).data.remote;
  return typeof pin === 'string' ? pin : undefined;
}

/** Several remotes and no choice: ask on a TTY, refuse otherwise. */
async function promptForRemote(names: string[]): Promise<string> {
  if (!process.stdin.isTTY) {
    throw new Problem(
      'invalid-input',
      'Several remotes',
      `choose one with --remote or SVC_REMOTE (remotes: ${names.join(', ')})`,
    );
  }
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    names.forEach((name, i) => {
      process.stderr.write(`  ${i + 1}) ${name}\n`);
    });
    const answer = (await rl.question(`Remote to use [1-${names.length}]: `)).trim();
    const chosen = /^\d+$/.test(answer) ? names[Number(answer) - 1] : names.find((name) => name === answer);
    if (!chosen)
      throw new Problem(
        'invalid-input',
        'No remote chosen',
        `${JSON.stringify(answer)} is none of the remotes listed`,
      );
    return chosen;
  } finally {
    rl.close();
  }
}

/** Whether a target names a node to ask (commands with a bucket path fall back otherwise). */
export function hasNode(target: Target): boolean {
  return target.endpoints.length > 0;
}

export interface CallOptions {
  /** A JSON request body. */
  body?: unknown;
  /** Query parameters; undefined values are left out. */
  query?: Record<string, string | number | boolean | undefined>;
  /** A raw request body instead of JSON; sent as application/octet-stream unless told. */
  raw?: { body: string | Uint8Array; contentType?: string };
  /** Extra request headers. */
  headers?: Record<string, string>;
  /** A bearer token to present instead of signing (`svc deploy --token`). */
  token?: string;
  /** Per-attempt deadline; default 60 s for JSON calls, none for raw bodies. */
  timeoutMs?: number;
  /** Title of the refusal when no node is known (default: No node to ask). */
  noNodeTitle?: string;
  /** A 2xx answer is bytes, not JSON: `body` is its Buffer (`svc kv key get`). */
  binary?: boolean;
}

/** A successful answer. */
export interface NodeAnswer {
  status: number;
  headers: Pick<Headers, 'get'>;
  /** Parsed JSON, the text of a non-JSON answer, or undefined when empty. */
  body: unknown;
}

/** Calls the node and answers the parsed JSON body; a non-2xx answer throws the node's Problem. */
export async function callNode(
  target: Target,
  method: string,
  path: string,
  options: CallOptions = {},
): Promise<unknown> {
  return (await requestNode(target, method, path, options)).body;
}

/**
 * As callNode, answering status and headers too (a deploy's `Location`). Endpoints are
 * tried in order only while none answers at all; any HTTP answer is final. Each attempt
 * signs a fresh token: tokens are single use.
 */
export async function requestNode(
  target: Target,
  method: string,
  path: string,
  options: CallOptions = {},
): Promise<NodeAnswer> {
  if (target.endpoints.length === 0) {
    throw new Problem(
      'invalid-input',
      options.noNodeTitle ?? 'No node to ask',
      'pass --node <url>, or add a remote with svc remote add',
    );
  }
  if (options.token === undefined && !target.key) {
    throw new Problem(
      'invalid-input',
      'No operator key',
      'pass --key, set SVC_OPERATOR_KEY, or add a remote with svc remote add',
    );
  }
  const failures: string[] = [];
  for (const endpoint of target.endpoints) {
    const url = new URL(`${endpoint}${path}`);
    for (const [name, value] of Object.entries(options.query ?? {})) {
      if (value !== undefined) url.searchParams.set(name, String(value));
    }
    const headers: Record<string, string> = { accept: 'application/json', ...options.headers };
    let body: string | Uint8Array | undefined;
    if (options.raw) {
      body = options.raw.body;
      headers['content-type'] = options.raw.contentType ?? 'application/octet-stream';
    } else if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] = 'application/json';
    }
    const token =
      options.token ?? (await signToken({ id: target.key!.id, privateKey: target.key!.pair.privateKey }));
    headers.authorization = `Bearer ${token}`;
    const timeoutMs = options.timeoutMs ?? (options.raw ? undefined : 60_000);
    let response: HttpAnswer;
    try {
      response = await httpExchange(url, {
        method,
        headers,
        ...(body === undefined ? {} : { body }),
        timeoutMs,
      });
    } catch (err) {
      failures.push(`${endpoint}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      continue;
    }
    return readAnswer(response, `${method} ${url.href}`, options.binary === true);
  }
  throw new Problem('not-found', 'Node is not answering', failures.join('; '));
}

function readAnswer(response: HttpAnswer, asked: string, binary = false): NodeAnswer {
  const { text, status } = response;
  if (binary && status >= 200 && status < 300)
    return { status, headers: response.headers, body: response.bytes };
  const type = response.headers.get('content-type') ?? '';
  let body: unknown = text === '' ? undefined : text;
  if (text !== '' && (type.startsWith('application/json') || type.startsWith(PROBLEM_CONTENT_TYPE))) {
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
    }
  }
  const ok = status >= 200 && status < 300;
  // A wrong URL or a proxy's login page answers 200 too: every node answer is a JSON document.
  if (ok && body !== undefined && (typeof body !== 'object' || body === null))
    throw notNodeAnswer(response, asked);
  if (ok) return { status, headers: response.headers, body };
  const problem = Problem.fromDocument(typeof body === 'object' ? body : {}, status);
  const retryAfter = response.headers.get('retry-after');
  if (retryAfter !== null)
    (problem as { headers: Record<string, string> }).headers = { 'retry-after': retryAfter };
  throw problem;
}
