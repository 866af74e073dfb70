// workerd for one deployment (docs/runtime.md: runs the selected
// deployment in workerd from a generated configuration, vars as bindings, assets served).
// `renderWorkerdConfig` is pure: it writes Cap'n Proto text in which every user-controlled
// value (code, var values, the asset list) is `embed`ded from a file, so nothing a user wrote
// is ever parsed as configuration.

import { createRequire } from 'node:module';
import { KV_APPLICATION_HEADER, KV_NAMESPACE_HEADER } from './bindings/kv.ts';
import {
  QUEUE_APPLICATION_HEADER,
  QUEUE_DELIVERY_DELAY_HEADER,
  QUEUE_NAME_HEADER,
} from './bindings/queue.ts';
import { QUEUE_TRIGGER_MODULE, QUEUE_TRIGGER_SOURCE } from './bindings/queue-consumer.ts';
import {
  D1_APPLICATION_HEADER,
  D1_DATABASE_HEADER,
  R2_APPLICATION_HEADER,
  R2_BUCKET_HEADER,
} from './bindings/r2-headers.ts';
import {
  SERVICE_CODEC_INTERNAL_MODULE,
  SERVICE_CODEC_MODULE,
  SERVICE_CODEC_SOURCE,
} from './bindings/service-codec.ts';
import {
  SERVICE_CALL_HEADER,
  SERVICE_CALLER_HEADER,
  SERVICE_TARGET_HEADER,
} from './bindings/service-headers.ts';
import {
  SERVICE_RPC_BINDING_MODULE,
  SERVICE_RPC_BINDING_SOURCE,
  SERVICE_RPC_ENTRY_MODULE,
  serviceRpcEntrySource,
} from './bindings/service-rpc.ts';
import { EGRESS_ENTRY_MODULE, EGRESS_MODULE, egressEntrySource, egressModuleSource } from './egress.ts';
import { ASSETS_ONLY_MODULE, ROUTER_MODULE } from './router-worker.ts';

const require = createRequire(import.meta.url);

/** The workerd binary the `workerd` npm package ships; `CELL_WORKERD` overrides it. */
export function workerdBinary(env: NodeJS.ProcessEnv = process.env): string {
  if (env.CELL_WORKERD) return env.CELL_WORKERD;
  return (require('workerd') as { default: string }).default;
}

/** The newest compatibility date the shipped workerd supports. */
export function maxCompatibilityDate(): string {
  return (require('workerd') as { compatibilityDate: string }).compatibilityDate;
}

/** The capnp field for each module type of the manifest. */
const MODULE_FIELD = {
  esm: 'esModule',
  commonjs: 'commonJsModule',
  text: 'text',
  data: 'data',
  wasm: 'wasm',
  json: 'json',
} as const;

export interface WorkerdPlan {
  /** Where the HTTP socket listens: `unix:/path` or `host:port`. */
  address: string;
  /** Paths below are relative to the folder holding the config file. */
  modules: { name: string; type: keyof typeof MODULE_FIELD; file: string }[];
  compatibilityDate: string;
  compatibilityFlags: string[];
  /** Each var's value sits in a file: text as is, anything else as JSON. */
  vars: { name: string; kind: 'text' | 'json'; file: string }[];
  assets: {
    /** File holding the request path → blob map. */
    filesJson: string;
    /** File holding `{ html_handling, not_found_handling }`. */
    configJson: string;
    /** Absolute folder of blobs named by content key. */
    blobsDir: string;
    /** The worker's binding to the assets, when the config names one. */
    binding: string | null;
  } | null;
  /** With cron triggers: where the trigger worker listens (`unix:/path`), else null. */
  cronAddress?: string | null;
  /**
   * Where the worker's Cache API calls (`caches.default`, `caches.open()`) go (`unix:/path`): the
   * front answers there as an always-empty cache (docs/runtime.md "Cache API"). Without it
   * workerd throws "No Cache was configured" on every call, which breaks workers that only use
   * the cache to go faster (SvelteKit's Cloudflare adapter calls `caches.default.match` on every
   * request). An external service, not a worker: a worker would cost each application an isolate.
   */
  cacheAddress?: string | null;
  /** Private CIDR ranges the operator allows the worker to reach (egress.ts `egressRanges`). */
  egressAllow?: readonly string[];
  /**
   * KV namespace bindings (docs/bindings.md "KV namespaces"), served by the runtime host at
   * `address` (`unix:/path`); the application and namespace travel in injected headers.
   */
  kv?: { address: string; application: string; namespaces: { binding: string; id: string }[] } | null;
  /**
   * R2 bucket bindings (docs/bindings.md "R2 buckets"), served on the same bindings socket; the
   * application and bucket name travel in injected headers.
   */
  r2?: { address: string; application: string; buckets: { binding: string; bucket_name: string }[] } | null;
  /**
   * D1 database bindings (docs/bindings.md "D1 databases"): workerd's own D1 module over a service
   * on the D1 socket beside the bindings socket; the application and database travel in injected headers.
   */
  d1?: {
    address: string;
    application: string;
    databases: { binding: string; database_name: string }[];
  } | null;
  /**
   * Queue producer bindings (docs/bindings.md "Queues"): workerd's `queue` binding, served on the
   * bindings socket; the application, queue and `delivery_delay` travel in injected headers.
   */
  queues?: {
    address: string;
    application: string;
    producers: { binding: string; queue: string; delivery_delay?: number }[];
  } | null;
  /**
   * With queue consumers: where the queue trigger worker listens (`unix:/path`), which hands a
   * batch to the worker's `queue` handler (docs/bindings.md "Queues"); else null.
   */
  queueTriggerAddress?: string | null;
  /**
   * Service bindings to the worker itself (docs/bindings.md "Service bindings"): each reaches
   * the named export (absent: the default), with `props` (a file holding the JSON) as `ctx.props`.
   */
  ownServices?: { binding: string; entrypoint?: string; propsFile?: string }[];
  /**
   * Service bindings to other applications of the fleet, served by the runtime host's services
   * socket at `address` (`unix:/path`); the caller and the target travel in injected headers.
   * Each binding is wrapped (bindings/service-rpc.ts) so that JS RPC reaches the target's
   * `entrypoint` with `props` (a file holding the JSON).
   */
  otherServices?: {
    address: string;
    application: string;
    bindings: { binding: string; service: string; entrypoint?: string; propsFile?: string }[];
  } | null;
  /**
   * This application's JS RPC key (bindings/service-rpc.ts): with an ES main module, a call from
   * another application bearing it reaches the worker's entrypoints.
   */
  serviceRpcKey?: string;
  /**
   * Durable Objects (docs/bindings.md "Durable Objects"): each class a namespace of the user
   * worker, stored by workerd on local disk in `storageDir` (absolute), which workerd creates
   * nothing above and writes as follows, one folder per class named by its `uniqueKey` (the
   * manifest's `storage_key`, stable across renames):
   *
   *   <storageDir>/<uniqueKey>/<object id>.sqlite   one SQLite database per object (its
   *                                                 key-value and SQL storage), 64 hex digits;
   *   <storageDir>/<uniqueKey>/metadata.sqlite      the class's pending alarms;
   *   each with its `-wal` and `-shm` files beside it (SQLite in WAL mode: a committed write may
   *   sit in the `-wal` file only, so a copy takes the three together).
   *
   * Only one workerd may run with a given `storageDir` at a time. `cell serve` uses
   * `<CELL_STATE_DIR>/objects/<application>/` unless its caller names another folder; the
   * publish load check a throwaway one. `bindings`: `durable_objects.bindings`, each reaching
   * one class; `main`: the main module's name, whose exports are checked as it loads.
   */
  durableObjects?: {
    storageDir: string;
    main: string;
    classes: { className: string; uniqueKey: string; sql: boolean }[];
    bindings: { binding: string; className: string }[];
  } | null;
  /**
   * With a GeoIP database (CELL_GEOIP_DB): the front hands `request.cf` over in CF_BLOB_HEADER,
   * which the http socket then reads (and drops from the headers the worker sees). Without one
   * workerd's own `request.cf` stays (`{ clientPid, clientUid }` of the front's connection).
   */
  cfBlob?: boolean;
}

/**
 * The header workerd's http socket reads `request.cf` from (HttpOptions.cfBlobHeader) when the
 * plan says `cfBlob`; the front (runtime/front/geoip.go CfBlobHeader, the same name) sets it and
 * always removes one a client sent.
 */
export const CF_BLOB_HEADER = 'cell-cf-blob';

/**
 * The trigger worker: cell asks it over its own socket to run one scheduled event, and it calls
 * the user worker's `scheduled` handler through a service binding (which needs workerd's
 * `service_binding_extra_handlers`, an experimental flag: workerd then runs with
 * `--experimental`). It answers the handler's outcome as JSON, with the message of the exception
 * when the handler threw: the binding answers only the outcome, so the trigger is also the tail
 * worker of the user worker's scheduled copy and waits (briefly) for that event's trace, which
 * names the exceptions.
 */
export const CRON_MODULE = 'cell-cron-trigger.js';
export const CRON_SOURCE = `const traces = new Map();
const key = (cron, time) => cron + ' ' + time;
// The trace follows the handler's end within milliseconds; polled, since workerd's clock stands
// still between I/O and a promise resolved from the tail's context would not wake this request.
const TRACE_POLLS = 200;
const TRACE_POLL_MS = 10;

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const cron = url.searchParams.get('cron') ?? '';
    const time = Number(url.searchParams.get('time'));
    let outcome;
    try {
      outcome = (await env.USER.scheduled({ scheduledTime: new Date(time), cron })).outcome;
    } catch (err) {
      return Response.json({ outcome: 'exception', error: String(err && err.stack || err) });
    }
    if (outcome === 'ok') return Response.json({ outcome });
    for (let poll = 0; poll < TRACE_POLLS && !traces.has(key(cron, time)); poll++)
      await new Promise((r) => setTimeout(r, TRACE_POLL_MS));
    const trace = traces.get(key(cron, time));
    traces.delete(key(cron, time));
    const thrown = trace?.exceptions?.[0];
    return Response.json(thrown ? { outcome, error: thrown.name + ': ' + thrown.message } : { outcome });
  },
  tail(items) {
    for (const item of items) {
      if (item.outcome === 'ok' || item.event?.cron === undefined) continue;
      traces.set(key(item.event.cron, item.event.scheduledTime), item);
      // A trace nobody waited for (its fetch gave up) is not kept.
      for (const k of traces.keys()) if (traces.size > 16) traces.delete(k);
    }
  },
};
`;

/**
 * With Durable Objects, the entry module: it re-exports the main module and throws as it loads
 * when a class the migrations name is not among its exports, so the publish load check fails
 * naming the class (workerd itself only warns, and every call to the class would fail).
 */
export const OBJECTS_ENTRY_MODULE = 'cell-objects-entry.js';
export function objectsEntrySource(entry: string, main: string, classes: string[]): string {
  const from = JSON.stringify(`./${entry}`);
  return `import * as entry from ${from};
const missing = ${JSON.stringify(classes)}.filter((name) => typeof entry[name] !== 'function');
if (missing.length > 0)
  throw new Error('the main module ' + ${JSON.stringify(main)} + ' does not export the Durable Object class' + (missing.length > 1 ? 'es ' : ' ') + missing.join(', ') + ', which the migrations create: export it (export class ' + missing[0] + ' extends DurableObject { ... }), or delete it with a deleted_classes migration');
export * from ${from};
export default entry.default ?? {};
`;
}

/** The compatibility date from which workerd gives every worker `ctx.exports`. */
const CTX_EXPORTS_DEFAULT_DATE = '2025-11-17';

/** The router's own compatibility date: fixed, since its code is ours. */
const ROUTER_COMPATIBILITY_DATE = '2024-09-23';

/** A Cap'n Proto text literal: quotes, backslashes and control characters escaped. */
export function capnpString(text: string): string {
  let out = '"';
  for (const ch of text) {
    const code = ch.codePointAt(0)!;
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, '0')}`;
    else out += ch;
  }
  return `${out}"`;
}

export function renderWorkerdConfig(plan: WorkerdPlan): string {
  const q = capnpString;
  const userBindings = plan.vars.map((v) => `(name = ${q(v.name)}, ${v.kind} = embed ${q(v.file)})`);
  const services = ['(name = "cell-user", worker = .userWorker)'];
  if (plan.cacheAddress)
    services.push(`(name = "cell-cache", external = (address = ${q(plan.cacheAddress)}, http = ()))`);
  const extensions: string[] = [];
  let entry = 'cell-user';
  let routerWorkers = '';
  if (plan.assets) {
    const a = plan.assets;
    // The assets worker (the router without a worker behind it) exists only for the worker's
    // assets binding: workerd gives every worker service an isolate of its own, bound or not, and
    // an isolate costs an idle workerd about 1.5 MB (docs/runtime.md "Memory of an idle application").
    if (a.binding) userBindings.push(`(name = ${q(a.binding)}, service = "cell-assets")`);
    services.push(
      '(name = "cell-router", worker = .routerWorker)',
      ...(a.binding ? ['(name = "cell-assets", worker = .assetsWorker)'] : []),
      `(name = "cell-blobs", disk = (path = ${q(a.blobsDir)}, writable = false, allowDotfiles = false))`,
    );
    entry = 'cell-router';
    const assetsOnly = plan.modules.length === 1 && plan.modules[0]!.name === ASSETS_ONLY_MODULE;
    const routerBindings = [
      `(name = "MANIFEST", json = embed ${q(a.filesJson)})`,
      `(name = "CONFIG", json = embed ${q(a.configJson)})`,
      '(name = "BLOBS", service = "cell-blobs")',
    ];
    routerWorkers = `
const routerWorker :Workerd.Worker = (
  modules = [ (name = ${q(ROUTER_MODULE)}, esModule = embed ${q(ROUTER_MODULE)}) ],
  compatibilityDate = ${q(ROUTER_COMPATIBILITY_DATE)},
  bindings = [ ${[...routerBindings, ...(assetsOnly ? [] : ['(name = "FALLBACK", service = "cell-user")'])].join(', ')} ],
);
`;
    if (a.binding)
      routerWorkers += `
const assetsWorker :Workerd.Worker = (
  modules = [ (name = ${q(ROUTER_MODULE)}, esModule = embed ${q(ROUTER_MODULE)}) ],
  compatibilityDate = ${q(ROUTER_COMPATIBILITY_DATE)},
  bindings = [ ${routerBindings.join(', ')} ],
);
`;
  }
  if (plan.kv) {
    // One service per namespace: workerd replaces any header of these names a request carries,
    // and the worker's KV calls carry none of its own, so the namespace is the config's to name.
    const ids = [...new Set(plan.kv.namespaces.map((n) => n.id))];
    for (const [i, id] of ids.entries()) {
      const headers = [
        `(name = ${q(KV_APPLICATION_HEADER)}, value = ${q(plan.kv.application)})`,
        `(name = ${q(KV_NAMESPACE_HEADER)}, value = ${q(id)})`,
      ];
      services.push(
        `(name = "cell-kv-${i}", external = (address = ${q(plan.kv.address)}, http = (injectRequestHeaders = [ ${headers.join(', ')} ])))`,
      );
    }
    for (const n of plan.kv.namespaces)
      userBindings.push(`(name = ${q(n.binding)}, kvNamespace = "cell-kv-${ids.indexOf(n.id)}")`);
  }
  if (plan.r2) {
    // As KV: one service per bucket name, whose injected headers name the application and bucket.
    const names = [...new Set(plan.r2.buckets.map((b) => b.bucket_name))];
    for (const [i, name] of names.entries()) {
      const headers = [
        `(name = ${q(R2_APPLICATION_HEADER)}, value = ${q(plan.r2.application)})`,
        `(name = ${q(R2_BUCKET_HEADER)}, value = ${q(name)})`,
      ];
      services.push(
        `(name = "cell-r2-${i}", external = (address = ${q(plan.r2.address)}, http = (injectRequestHeaders = [ ${headers.join(', ')} ])))`,
      );
    }
    for (const b of plan.r2.buckets)
      userBindings.push(`(name = ${q(b.binding)}, r2Bucket = "cell-r2-${names.indexOf(b.bucket_name)}")`);
  }
  if (plan.d1) {
    // As KV: one service per database, whose injected headers name the application and database.
    const names = [...new Set(plan.d1.databases.map((d) => d.database_name))];
    for (const [i, name] of names.entries()) {
      const headers = [
        `(name = ${q(D1_APPLICATION_HEADER)}, value = ${q(plan.d1.application)})`,
        `(name = ${q(D1_DATABASE_HEADER)}, value = ${q(name)})`,
      ];
      services.push(
        `(name = "cell-d1-${i}", external = (address = ${q(plan.d1.address)}, http = (injectRequestHeaders = [ ${headers.join(', ')} ])))`,
      );
    }
    for (const d of plan.d1.databases)
      userBindings.push(
        `(name = ${q(d.binding)}, wrapped = (moduleName = "cloudflare-internal:d1-api", innerBindings = [ (name = "fetcher", service = "cell-d1-${names.indexOf(d.database_name)}") ]))`,
      );
  }
  if (plan.queues) {
    // As KV: one service per queue and delivery delay, whose injected headers name them.
    const targets = [
      ...new Set(plan.queues.producers.map((p) => JSON.stringify([p.queue, p.delivery_delay ?? null]))),
    ];
    for (const [i, target] of targets.entries()) {
      const [queue, delay] = JSON.parse(target) as [string, number | null];
      const headers = [
        `(name = ${q(QUEUE_APPLICATION_HEADER)}, value = ${q(plan.queues.application)})`,
        `(name = ${q(QUEUE_NAME_HEADER)}, value = ${q(queue)})`,
        ...(delay === null
          ? []
          : [`(name = ${q(QUEUE_DELIVERY_DELAY_HEADER)}, value = ${q(String(delay))})`]),
      ];
      services.push(
        `(name = "cell-queue-${i}", external = (address = ${q(plan.queues.address)}, http = (injectRequestHeaders = [ ${headers.join(', ')} ])))`,
      );
    }
    for (const p of plan.queues.producers) {
      const i = targets.indexOf(JSON.stringify([p.queue, p.delivery_delay ?? null]));
      userBindings.push(`(name = ${q(p.binding)}, queue = "cell-queue-${i}")`);
    }
  }
  for (const b of plan.ownServices ?? []) {
    // The same worker in the same workerd: fetch and JS RPC both work, as on Cloudflare.
    const target = [
      '(name = "cell-user"',
      ...(b.entrypoint ? [`entrypoint = ${q(b.entrypoint)}`] : []),
      ...(b.propsFile ? [`props = (json = embed ${q(b.propsFile)})`] : []),
    ].join(', ');
    userBindings.push(`(name = ${q(b.binding)}, service = ${target}))`);
  }
  if (plan.otherServices) {
    // As KV: external services per target, whose injected headers name the caller and target, one
    // for the worker's fetch and one for the wrapped binding's RPC calls (the header naming the
    // kind is replaced on both, so a worker's fetch cannot pass for a call).
    const o = plan.otherServices;
    const targets = [...new Set(o.bindings.map((b) => b.service))];
    for (const [i, target] of targets.entries()) {
      for (const kind of ['fetch', 'rpc']) {
        const headers = [
          `(name = ${q(SERVICE_CALLER_HEADER)}, value = ${q(o.application)})`,
          `(name = ${q(SERVICE_TARGET_HEADER)}, value = ${q(target)})`,
          `(name = ${q(SERVICE_CALL_HEADER)}, value = ${q(kind)})`,
        ];
        services.push(
          `(name = "cell-svc-${kind}-${i}", external = (address = ${q(o.address)}, http = (injectRequestHeaders = [ ${headers.join(', ')} ])))`,
        );
      }
    }
    for (const b of o.bindings) {
      const i = targets.indexOf(b.service);
      const inner = [
        `(name = "fetcher", service = "cell-svc-fetch-${i}")`,
        `(name = "rpc", service = "cell-svc-rpc-${i}")`,
        `(name = "binding", text = ${q(b.binding)})`,
        `(name = "service", text = ${q(b.service)})`,
        ...(b.entrypoint ? [`(name = "entrypoint", text = ${q(b.entrypoint)})`] : []),
        ...(b.propsFile ? [`(name = "props", json = embed ${q(b.propsFile)})`] : []),
      ];
      userBindings.push(
        `(name = ${q(b.binding)}, wrapped = (moduleName = ${q(SERVICE_RPC_BINDING_MODULE)}, innerBindings = [ ${inner.join(', ')} ]))`,
      );
    }
    extensions.push(
      `(name = ${q(SERVICE_CODEC_INTERNAL_MODULE)}, internal = true, esModule = ${q(SERVICE_CODEC_SOURCE)})`,
      `(name = ${q(SERVICE_RPC_BINDING_MODULE)}, internal = true, esModule = ${q(SERVICE_RPC_BINDING_SOURCE)})`,
    );
  }
  let objectsFields = '';
  if (plan.durableObjects) {
    // Each binding names its class with the service that runs it, so the scheduled copy of the
    // worker (below) reaches the one instance of each object in cell-user instead of its own.
    const o = plan.durableObjects;
    services.push(`(name = "cell-objects", disk = (path = ${q(o.storageDir)}, writable = true))`);
    for (const b of o.bindings)
      userBindings.push(
        `(name = ${q(b.binding)}, durableObjectNamespace = (className = ${q(b.className)}, serviceName = "cell-user"))`,
      );
    const namespaces = o.classes.map(
      (c) => `(className = ${q(c.className)}, uniqueKey = ${q(c.uniqueKey)}, enableSql = ${c.sql})`,
    );
    objectsFields = `
  durableObjectNamespaces = [ ${namespaces.join(', ')} ],
  durableObjectStorage = (localDisk = "cell-objects"),`;
  }
  const http = plan.cfBlob ? `(cfBlobHeader = ${q(CF_BLOB_HEADER)})` : '()';
  const sockets = [`(name = "http", address = ${q(plan.address)}, http = ${http}, service = ${q(entry)})`];
  const modules = plan.modules.map(
    (m) => `(name = ${q(m.name)}, ${MODULE_FIELD[m.type]} = embed ${q(m.file)})`,
  );
  const main = plan.modules[0];
  // The fetch wrapper goes ahead of an ES main module (docs/runtime.md "Outbound requests").
  if (main?.type === 'esm' && main.name !== ASSETS_ONLY_MODULE) {
    modules.unshift(
      `(name = ${q(EGRESS_ENTRY_MODULE)}, esModule = ${q(egressEntrySource(main.name))})`,
      `(name = ${q(EGRESS_MODULE)}, esModule = ${q(egressModuleSource(plan.egressAllow ?? []))})`,
    );
  }
  if (plan.durableObjects && main?.type === 'esm' && main.name !== ASSETS_ONLY_MODULE) {
    const o = plan.durableObjects;
    const source = objectsEntrySource(
      EGRESS_ENTRY_MODULE,
      o.main,
      o.classes.map((c) => c.className),
    );
    modules.unshift(`(name = ${q(OBJECTS_ENTRY_MODULE)}, esModule = ${q(source)})`);
  }
  const compatibilityFlags = [...plan.compatibilityFlags];
  if (plan.serviceRpcKey && main?.type === 'esm' && main.name !== ASSETS_ONLY_MODULE) {
    // The RPC entry goes ahead of whatever module is first by now (docs/bindings.md "Service
    // bindings"); ours are named plainly, so the first one's name reads back from its line.
    const next = JSON.parse(/^\(name = ("[^"\\]*")/.exec(modules[0]!)![1]!) as string;
    modules.unshift(
      `(name = ${q(SERVICE_RPC_ENTRY_MODULE)}, esModule = ${q(serviceRpcEntrySource(next, plan.serviceRpcKey))})`,
      `(name = ${q(SERVICE_CODEC_MODULE)}, esModule = ${q(SERVICE_CODEC_SOURCE)})`,
    );
    // The entry reaches the entrypoints through ctx.exports, a default from 2025-11-17 on.
    if (
      plan.compatibilityDate < CTX_EXPORTS_DEFAULT_DATE &&
      !compatibilityFlags.some((f) => f === 'enable_ctx_exports' || f === 'disable_ctx_exports')
    )
      compatibilityFlags.push('enable_ctx_exports');
  }
  // workerd's default "internet" service allows public addresses only; the operator's ranges
  // widen it, and workerd still judges every address a name resolves to.
  if (plan.egressAllow?.length) {
    services.push(
      `(name = "internet", network = (allow = [ ${['public', ...plan.egressAllow].map(q).join(', ')} ], tlsOptions = (trustBrowserCas = true)))`,
    );
  }
  const userWorkerFields = `modules = [ ${modules.join(', ')} ],
  compatibilityDate = ${q(plan.compatibilityDate)},
  compatibilityFlags = [ ${compatibilityFlags.map(q).join(', ')} ],
  bindings = [ ${userBindings.join(', ')} ]${plan.cacheAddress ? ',\n  cacheApiOutbound = "cell-cache"' : ''}`;
  let cronWorker = '';
  if (plan.cronAddress) {
    // The scheduled events run in a copy of the user worker whose tail is the trigger: a tail on
    // the serving worker would cost every request a trace and a tail event.
    services.push(
      '(name = "cell-cron", worker = .cronWorker)',
      '(name = "cell-user-scheduled", worker = .userScheduledWorker)',
    );
    sockets.push(`(name = "cron", address = ${q(plan.cronAddress)}, http = (), service = "cell-cron")`);
    cronWorker = `
const cronWorker :Workerd.Worker = (
  modules = [ (name = ${q(CRON_MODULE)}, esModule = embed ${q(CRON_MODULE)}) ],
  compatibilityDate = ${q(ROUTER_COMPATIBILITY_DATE)},
  compatibilityFlags = [ "service_binding_extra_handlers" ],
  bindings = [ (name = "USER", service = "cell-user-scheduled") ],
);

const userScheduledWorker :Workerd.Worker = (
  ${userWorkerFields},
  tails = [ "cell-cron" ],
);
`;
  }
  let queueTriggerWorker = '';
  if (plan.queueTriggerAddress) {
    services.push('(name = "cell-queue-trigger", worker = .queueTriggerWorker)');
    sockets.push(
      `(name = "queues", address = ${q(plan.queueTriggerAddress)}, http = (), service = "cell-queue-trigger")`,
    );
    queueTriggerWorker = `
const queueTriggerWorker :Workerd.Worker = (
  modules = [ (name = ${q(QUEUE_TRIGGER_MODULE)}, esModule = ${q(QUEUE_TRIGGER_SOURCE)}) ],
  compatibilityDate = ${q(ROUTER_COMPATIBILITY_DATE)},
  compatibilityFlags = [ "service_binding_extra_handlers" ],
  bindings = [ (name = "USER", service = "cell-user") ],
);
`;
  }
  return `# Generated by cell for one deployment; regenerated on every start.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [ ${services.join(', ')} ],
  sockets = [ ${sockets.join(', ')} ],${extensions.length > 0 ? `\n  extensions = [ (modules = [ ${extensions.join(', ')} ]) ],` : ''}
);

const userWorker :Workerd.Worker = (
  ${userWorkerFields},${objectsFields}
);
${routerWorkers}${cronWorker}${queueTriggerWorker}`;
}
