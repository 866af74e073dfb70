// What the commands that manage a binding's data through a node share (docs/cli.md "svc kv",
// "svc r2"): a subcommand with the remote flags, --name/--env and --token; the node and application
// it calls; the application's path and the token to present; and a value read from a file, refused
// before it is read when it is over the binding's limit.

import { readFile, stat } from 'node:fs/promises';
import type { Command } from 'commander';
import { Problem } from '../problem.ts';
import { resolveApplicationName } from '../registry/names.ts';
import type { AppFlags } from './app-actions.ts';
import { type CallOptions, requestNode, resolveTarget, type Target } from './client.ts';
import { addNameFlags, addRemoteFlags } from './flags.ts';
import { say, table } from './output.ts';

export interface DataFlags extends AppFlags {
  /** A bearer token to present instead of signing (a CI job's workload token). */
  token?: string;
}

/** Where a command's calls go: the node and the application. */
export interface DataTarget<Flags extends DataFlags = DataFlags> {
  target: Target;
  flags: Flags;
  application: string;
}

/** A subcommand that names the application and calls a node. */
export function dataCommand(parent: Command, name: string, description: string): Command {
  const command = parent.command(name).description(description);
  addRemoteFlags(command);
  addNameFlags(command, true);
  return command.option(
    '--token <token>',
    'Bearer token to present to the node instead of signing (a workload token)',
  );
}

export async function dataTarget<Flags extends DataFlags>(flags: Flags): Promise<DataTarget<Flags>> {
  const application = resolveApplicationName(flags.name, flags.env);
  return { target: await resolveTarget(flags), flags, application };
}

/** One call under the application, `/v1/applications/:name<rest>`, presenting --token when given. */
export async function callApplication(
  base: DataTarget,
  method: string,
  rest: string,
  options: CallOptions = {},
): Promise<{ body: unknown; headers: Pick<Headers, 'get'> }> {
  const path = `/v1/applications/${encodeURIComponent(base.application)}${rest}`;
  const token = base.flags.token === undefined ? {} : { token: base.flags.token };
  const answer = await requestNode(base.target, method, path, { ...options, ...token });
  return { body: answer.body, headers: answer.headers };
}

/** The file's bytes; one over `limit` is refused before it is read, saying `what` is at most that. */
export async function readValueFile(file: string, limit: { bytes: number; what: string }): Promise<Buffer> {
  try {
    const { size } = await stat(file);
    if (size > limit.bytes)
      throw new Problem('resource-limit', 'Value too large', `${file} is ${size} bytes; ${limit.what}`);
    return await readFile(file);
  } catch (err) {
    if (err instanceof Problem) throw err;
    throw new Problem(
      'invalid-input',
      'Unreadable value file',
      `${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
}

/** How the messages of `pickBound` name one kind of binding. */
export interface BoundWords {
  /** `KV namespace`, `R2 bucket`. */
  kind: string;
  /** The manifest field that binds them: `kv_namespaces`. */
  field: string;
  /** The flag naming one by its id, with its argument: `--namespace-id <id>`. */
  idFlag: string;
  /** The id in a sentence: `namespace id`, `bucket`. */
  idWord: string;
  /** What a deployment would bind: `a namespace`. */
  one: string;
}

/** Both --binding and the id flag given: refused before anything is asked of the node. */
export function refuseBoth(asked: { binding?: string; id?: string }, words: BoundWords): void {
  if (asked.binding !== undefined && asked.id !== undefined)
    throw new Problem(
      'invalid-input',
      `Ambiguous ${words.kind}`,
      `give --binding or ${words.idFlag.split(' ')[0]}, not both`,
    );
}

/**
 * The one binding the flags name: by `binding`, by `id`, or the only one; refuses with one line
 * when both are given, when there are several and neither is, or when the one named is not bound.
 */
export function pickBound(
  bound: { binding: string; id: string }[],
  asked: { binding?: string; id?: string },
  where: { application: string; deployment: string | null },
  words: BoundWords,
): { binding: string; id: string } {
  refuseBoth(asked, words);
  const pick =
    asked.binding !== undefined
      ? bound.find((b) => b.binding === asked.binding)
      : asked.id !== undefined
        ? bound.find((b) => b.id === asked.id)
        : bound.length === 1
          ? bound[0]
          : undefined;
  if (pick) return pick;
  const { application, deployment } = where;
  if (bound.length === 0)
    throw new Problem(
      'not-found',
      `No ${words.kind}`,
      deployment === null
        ? `${application} has no serving deployment; deploy one whose ${words.field} binds ${words.one}`
        : `the serving deployment ${deployment} of ${application} binds no ${words.kind} (${words.field})`,
    );
  const list = bound.map((b) => `${b.binding} (${b.id})`).join(', ');
  if (asked.binding === undefined && asked.id === undefined)
    throw new Problem(
      'invalid-input',
      `Several ${words.kind}s`,
      `${application} binds ${list}; choose one with --binding <NAME> or ${words.idFlag}`,
    );
  const named = asked.binding !== undefined ? `binding ${asked.binding}` : `${words.idWord} ${asked.id}`;
  throw new Problem('not-found', `No such ${words.kind}`, `${application} has no ${named}; it binds ${list}`);
}

/**
 * What a `list` of the bindings prints: the node's answer as JSON with --json, else a table
 * (`BINDING`, then `idHeader`), or a sentence saying why there is none.
 */
export function sayBound(
  found: { application: string; deployment: string | null },
  bound: { binding: string; id: string }[],
  options: { json?: boolean; kind: string; idHeader: string },
): void {
  if (options.json) {
    say(JSON.stringify(found, null, 2));
    return;
  }
  if (bound.length === 0) {
    say(
      found.deployment === null
        ? `${found.application} has no serving deployment, so no ${options.kind}.`
        : `The serving deployment ${found.deployment} of ${found.application} binds no ${options.kind}.`,
    );
    return;
  }
  for (const line of table(
    ['BINDING', options.idHeader],
    bound.map((b) => [b.binding, b.id]),
  ))
    say(line);
}
