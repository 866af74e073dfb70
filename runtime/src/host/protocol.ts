// The runtime host protocol (docs/runtime.md "The runtime host"): what a front and its host say
// to each other, one JSON object per line. runtime/protocol/host-protocol.json holds an example of
// every message and is the protocol's one definition; this module and runtime/front/host.go both
// test against it. A front opens with `hello` naming its protocol version; a host of another
// version refuses it (`protocol-mismatch`) and closes, so neither side ever misreads the other.

/** The version this host speaks; runtime/protocol/host-protocol.json says the same. */
export const HOST_PROTOCOL_VERSION = 1;

/** Why a request got no result. */
export type HostErrorCode = 'protocol-mismatch' | 'bad-request' | 'failed';

/** What the host needs to act for one front, from its `hello`. */
export interface HelloRequest {
  protocol: number;
  application: string;
  node: string;
  /** The front's private folder: instance folders, sockets and the blob cache go here. */
  stateDir: string;
  context: {
    /** The workerd executable the front runs (resolved by `cell serve`, so a host of another build agrees). */
    workerd: string;
    /** The node's secrets file for the application (`CELL_SECRETS_FILE`), or null. */
    secretsFile: string | null;
    /** The `CELL_*` variables `cell serve` was started with (egress, OTel, ...). */
    env: Record<string, string>;
  };
}

/** One request after the hello: `op` and its fields, with the id its answer carries. */
export interface Request {
  id: number;
  op: string;
  fields: Record<string, unknown>;
}

/** A line that is no request: answered with `bad-request` (and the id, when one was readable). */
export class BadRequest extends Error {
  readonly id: number | null;
  constructor(message: string, id: number | null = null) {
    super(message);
    this.id = id;
  }
}

export function parseRequest(line: string): Request {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    throw new BadRequest(
      `a request must be one JSON object per line, got ${JSON.stringify(line.slice(0, 200))}`,
    );
  }
  if (!value || typeof value !== 'object' || Array.isArray(value))
    throw new BadRequest('a request must be a JSON object');
  const { id, op, ...fields } = value as Record<string, unknown>;
  if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 0)
    throw new BadRequest('a request needs a whole-number id');
  if (typeof op !== 'string') throw new BadRequest('a request needs an op', id);
  return { id, op, fields };
}

/** The hello's fields, checked; a BadRequest names what is wrong. */
export function parseHello(request: Request): HelloRequest {
  if (request.op !== 'hello')
    throw new BadRequest(`the first request must be hello, got ${JSON.stringify(request.op)}`, request.id);
  const f = request.fields;
  const context = f.context;
  if (typeof f.protocol !== 'number') throw new BadRequest('hello needs the protocol version', request.id);
  if (!context || typeof context !== 'object' || Array.isArray(context))
    throw new BadRequest('hello needs a context object', request.id);
  const c = context as Record<string, unknown>;
  const env = c.env ?? {};
  if (
    typeof env !== 'object' ||
    env === null ||
    Array.isArray(env) ||
    !Object.values(env).every((v) => typeof v === 'string')
  )
    throw new BadRequest('hello context.env must map names to strings', request.id);
  const named = (value: unknown, name: string) => {
    if (typeof value !== 'string' || value === '') throw new BadRequest(`hello needs ${name}`, request.id);
    return value;
  };
  return {
    protocol: f.protocol,
    application: named(f.application, 'application'),
    node: named(f.node, 'node'),
    stateDir: named(f.stateDir, 'stateDir'),
    context: {
      workerd: named(c.workerd, 'context.workerd'),
      secretsFile:
        c.secretsFile === null || c.secretsFile === undefined
          ? null
          : named(c.secretsFile, 'context.secretsFile'),
      env: env as Record<string, string>,
    },
  };
}

/** The refusal of a front of another version, in words an operator can act on. */
export function mismatchMessage(front: number): string {
  return `the runtime host speaks protocol ${HOST_PROTOCOL_VERSION} and this front speaks ${front}: run a cell release made for this svc (cell --version) or upgrade svc`;
}

export function resultLine(id: number, result: Record<string, unknown>): string {
  return `${JSON.stringify({ id, result })}\n`;
}

export function errorLine(id: number | null, code: HostErrorCode, message: string): string {
  return `${JSON.stringify({ id, error: { code, message } })}\n`;
}

/** The host asks the front for its health; it answers with a `health` request marked `asked`. */
export const HEALTH_ASK_LINE = `${JSON.stringify({ push: 'health' })}\n`;

export function logLine(line: string): string {
  return `${JSON.stringify({ push: 'log', line })}\n`;
}

// Field readers for the ops: each throws a BadRequest naming the field.

export function string(value: unknown, name: string): string {
  if (typeof value !== 'string') throw new BadRequest(`${name} must be a string`);
  return value;
}

export function nullableString(value: unknown, name: string): string | null {
  return value === null || value === undefined ? null : string(value, name);
}

export function number(value: unknown, name: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new BadRequest(`${name} must be a number`);
  return value;
}

export function stringList(value: unknown, name: string): string[] {
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string'))
    throw new BadRequest(`${name} must be a list of strings`);
  return value;
}

export function object(value: unknown, name: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new BadRequest(`${name} must be an object`);
  return value as Record<string, unknown>;
}
