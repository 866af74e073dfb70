// JS RPC to another application (docs/bindings.md "Service bindings"). workerd's own RPC does not
// cross processes, so the call crosses as HTTP on the services path:
// - In the caller, the binding is a workerd wrapped binding whose module (SERVICE_RPC_BINDING_SOURCE)
//   keeps `fetch` and turns any other property into an async method: it encodes the method and
//   arguments (service-codec.ts), posts them through the services socket, and decodes the result
//   or throws what the target threw.
// - The services socket adds the target's RPC key (a keyed hash of the fleet's RPC key and the
//   target's name) and sends the call to the target's front on SERVICE_RPC_PATH.
// - In the target, a generated main module ahead of the worker's own (serviceRpcEntrySource)
//   takes a POST on that path carrying that key, and only that: anything else, the public's
//   requests included, goes to the worker's own handlers as before. It calls the entrypoint over
//   workerd's own RPC through `ctx.exports`, with the binding's `props`, so the target's
//   `WorkerEntrypoint` sees `this.ctx.props` as on Cloudflare.

import { createHmac, randomBytes } from 'node:crypto';
import { keys } from '../../../src/registry/keys.ts';
import type { Store } from '../../../src/store/store.ts';
import { updateJson } from '../../../src/store/update.ts';
import { SERVICE_CODEC_INTERNAL_MODULE, SERVICE_CODEC_MODULE } from './service-codec.ts';
import { SERVICE_RPC_ANSWER_HEADER, SERVICE_RPC_KEY_HEADER, SERVICE_RPC_PATH } from './service-headers.ts';

/** The wrapped binding's module, among the config's extension modules. */
export const SERVICE_RPC_BINDING_MODULE = 'cell-internal:service-rpc';
/** The target's generated main module. */
export const SERVICE_RPC_ENTRY_MODULE = 'cell-service-rpc-entry.js';

/**
 * The wrapped binding: its inner bindings are `fetcher` and `rpc` (the services socket, told
 * `fetch` or `rpc` by an injected header), the `binding` and `service` names for messages, and the
 * optional `entrypoint` and `props`.
 */
export const SERVICE_RPC_BINDING_SOURCE = `import { encodeValue, decodeValue } from ${JSON.stringify(SERVICE_CODEC_INTERNAL_MODULE)};

export default function serviceBinding(env) {
  const where = 'service binding ' + env.binding + ' to "' + env.service + '"';
  const call = async (method, args) => {
    let encoded;
    try {
      encoded = args.map((arg, i) => encodeValue(arg, 'argument ' + (i + 1)));
    } catch (err) {
      throw new TypeError(where + ': ' + method + '(): ' + err.message);
    }
    const answer = await env.rpc.fetch('http://' + env.service + ${JSON.stringify(SERVICE_RPC_PATH)}, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ entrypoint: env.entrypoint ?? null, props: env.props ?? null, method, args: encoded }),
    });
    const text = await answer.text();
    if (answer.headers.get(${JSON.stringify(SERVICE_RPC_ANSWER_HEADER)}) !== '1') {
      // The services socket's own refusals are sentences starting "svc: "; anything else is the
      // target's front or worker answering something that is not an RPC answer.
      throw new Error(text.startsWith('svc: ') ? text :
        'svc: ' + where + ': the target answered ' + method + '() with HTTP ' + answer.status +
        ', not as JS RPC (its main module must be an ES module)');
    }
    const outcome = JSON.parse(text);
    if ('thrown' in outcome) throw decodeValue(outcome.thrown);
    return decodeValue(outcome.value);
  };
  return new Proxy({}, {
    get(_target, property) {
      if (property === 'fetch') return (input, init) => env.fetcher.fetch(input, init);
      if (property === 'connect') return (address, options) => env.fetcher.connect(address, options);
      // Not a thenable, and no symbol-named methods, as workerd's own stubs.
      if (typeof property !== 'string' || property === 'then') return undefined;
      return (...args) => call(property, args);
    },
  });
}
`;

/**
 * The target's main module: re-exports everything `next` (the module that would otherwise be
 * first) exports, and wraps its default export's `fetch` so that a call bearing `key` runs.
 */
export function serviceRpcEntrySource(next: string, key: string): string {
  const nextModule = JSON.stringify(`./${next}`);
  return `import * as main from ${nextModule};
import { encodeValue, decodeValue } from ${JSON.stringify(`./${SERVICE_CODEC_MODULE}`)};
export * from ${nextModule};

const KEY = new TextEncoder().encode(${JSON.stringify(key)});

function isCall(request) {
  if (request.method !== 'POST') return false;
  const presented = request.headers.get(${JSON.stringify(SERVICE_RPC_KEY_HEADER)});
  if (presented === null) return false;
  const bytes = new TextEncoder().encode(presented);
  if (bytes.byteLength !== KEY.byteLength || !crypto.subtle.timingSafeEqual(bytes, KEY)) return false;
  return new URL(request.url).pathname === ${JSON.stringify(SERVICE_RPC_PATH)};
}

// What the caller sees of a thrown value: for an Error, its kind and message (its stack stays here,
// as with Cloudflare's RPC); a value the codec cannot carry becomes an Error saying so.
function encodeThrown(thrown) {
  try {
    const tree = encodeValue(thrown, 'the thrown value');
    if (Array.isArray(tree) && tree[0] === 'e') delete tree[2].stack;
    return tree;
  } catch (err) {
    return encodeValue(new Error(String(thrown && thrown.message || thrown)));
  }
}

async function answer(request, ctx) {
  let outcome;
  try {
    const call = await request.json();
    const name = call.entrypoint ?? 'default';
    const exported = ctx.exports?.[name];
    if (!exported) throw new TypeError('this application exports no entrypoint "' + name + '"');
    const stub = call.props === null ? exported : exported({ props: call.props });
    const result = await stub[call.method](...call.args.map(decodeValue));
    outcome = { value: encodeValue(result, 'the result of ' + call.method + '()') };
  } catch (err) {
    outcome = { thrown: encodeThrown(err) };
  }
  return new Response(JSON.stringify(outcome), {
    headers: { 'content-type': 'application/json', ${JSON.stringify(SERVICE_RPC_ANSWER_HEADER)}: '1' },
  });
}

function noFetch() {
  throw new TypeError("Handler does not export a fetch() function.");
}

const user = main.default;
let handler;
if (typeof user === 'function') {
  handler = class extends user {
    fetch(request) {
      if (isCall(request)) return answer(request, this.ctx);
      return typeof super.fetch === 'function' ? super.fetch(request) : noFetch();
    }
  };
} else {
  handler = Object.create(user, {
    fetch: {
      value(request, env, ctx) {
        if (isCall(request)) return answer(request, ctx);
        return typeof user.fetch === 'function' ? user.fetch.call(this, request, env, ctx) : noFetch();
      },
    },
  });
}
export default handler;
`;
}

/** The fleet's RPC key as each node read it: one read per process, created by the first asker. */
const fleetKeys = new WeakMap<Store, Promise<string>>();

/**
 * The RPC key of `application`: a keyed hash of the fleet's key (one random bucket object, made
 * by the first node that needs it) and the name, so a key one application's config holds opens
 * no other application.
 */
export async function applicationRpcKey(store: Store, application: string): Promise<string> {
  let fleet = fleetKeys.get(store);
  if (!fleet) {
    fleet = readFleetKey(store);
    fleetKeys.set(store, fleet);
    fleet.catch(() => fleetKeys.delete(store));
  }
  return createHmac('sha256', await fleet)
    .update(application)
    .digest('hex');
}

async function readFleetKey(store: Store): Promise<string> {
  const made = await updateJson<{ v: 1; key: string }>(store, keys.serviceRpcKey, (current) =>
    current ? null : { put: { v: 1, key: randomBytes(32).toString('hex') } },
  );
  if (!made.value || typeof made.value.key !== 'string' || made.value.key.length < 32)
    throw new Error(`${keys.serviceRpcKey} holds no RPC key`);
  return made.value.key;
}

/** A key for a config nothing calls (the publish load check): fresh, known to no one. */
export function unusedRpcKey(): string {
  return randomBytes(32).toString('hex');
}
