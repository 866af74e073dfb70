// Every bucket key svc reads or writes, in one place (docs/bucket-layout.md "What svc keeps in the
// bucket" fixes the `_svc/` and runtime `fleets/<name>/` prefixes).
// The layout is documented in docs/bucket-layout.md; change both together.

/** Where a long host's claim key is split (see `keys.domainClaim`). */
const CLAIM_SEGMENT_CHARS = 200;

/**
 * A SQLite file's history (D1 databases, Durable Objects' files) under a folder `base` ending in
 * `/`: generations, each a snapshot then WAL segments numbered from 1 (runtime/src/bindings/d1-log.ts).
 * Generation and segment numbers are zero-padded so the bucket lists them in order.
 */
export const logKeys = {
  generationsPrefix: (base: string) => `${base}generations/`,
  snapshot: (base: string, generation: number) =>
    `${base}generations/${String(generation).padStart(10, '0')}/snapshot`,
  segmentsPrefix: (base: string, generation: number) =>
    `${base}generations/${String(generation).padStart(10, '0')}/wal/`,
  segment: (base: string, generation: number, segment: number) =>
    `${base}generations/${String(generation).padStart(10, '0')}/wal/${String(segment).padStart(12, '0')}`,
} as const;

export const keys = {
  /** Operator public key and grant. */
  operator: (kid: string) => `_svc/operators/${kid}.json`,
  operatorsPrefix: '_svc/operators/',
  /** Node public key. */
  nodeKey: (kid: string) => `_svc/nodes/${kid}.json`,
  nodeKeysPrefix: '_svc/nodes/',

  /** A node's WireGuard public key, tunnel address and endpoint (never a private key). */
  wireguardPeer: (id: string) => `_svc/wireguard/${id}.json`,
  wireguardPeersPrefix: '_svc/wireguard/',

  /** Node record: addresses, labels, versions, heartbeat, processes. */
  nodeRecord: (id: string) => `_svc/fleet/nodes/${id}.json`,
  nodeRecordsPrefix: '_svc/fleet/nodes/',
  /** The coordinator lease {node, fence, expiresAt}. */
  coordinatorLease: '_svc/fleet/coordinator.json',
  /** The fleet freeze record. */
  freeze: '_svc/fleet/freeze.json',
  /** The fleet's JS RPC key for service bindings {v, key} (runtime/src/bindings/service-rpc.ts). */
  serviceRpcKey: '_svc/services/rpc-key.json',
  /**
   * The fleet change marker: rewritten (new ETag) after every registry change, so every node's
   * reconcile pass learns of a change with one HEAD instead of re-listing (docs/fleet.md).
   */
  fleetChanged: '_svc/fleet/changed.json',
  /** Runtime versions declared compatible while a fleet rolls from one to the other (docs/deploys.md). */
  runtimePairs: '_svc/fleet/runtime-pairs.json',
  /**
   * A node or operator token's `jti`, recorded fleet-wide on acceptance (docs/identity.md
   * "Single use across the fleet"); grouped by the minute after which the token is dead anyway,
   * so reaping drops whole old minutes.
   */
  tokenUse: (minute: number, jti: string) => `_svc/tokens/${minute}/${jti}`,
  tokenUseMinute: (minute: number) => `_svc/tokens/${minute}/`,
  tokenUsesPrefix: '_svc/tokens/',
  /** The bucket self-test's scratch object. */
  selfTest: (nonce: string) => `_svc/selftest/${nonce}`,

  /** Everything svc keeps for one application. */
  appPrefix: (name: string) => `_svc/apps/${name}/`,
  appsPrefix: '_svc/apps/',
  application: (name: string) => `_svc/apps/${name}/app.json`,
  trustPolicy: (name: string) => `_svc/apps/${name}/trust.json`,
  placement: (name: string) => `_svc/apps/${name}/placement.json`,
  deploy: (name: string, id: string) => `_svc/apps/${name}/deploys/${id}.json`,
  deploysPrefix: (name: string) => `_svc/apps/${name}/deploys/`,
  deployment: (name: string, version: string) => `_svc/apps/${name}/deployments/${version}.json`,
  deploymentsPrefix: (name: string) => `_svc/apps/${name}/deployments/`,
  /** The application's secrets, each sealed to every node's key (docs/decisions.md "Secrets"). */
  appSecrets: (name: string) => `_svc/apps/${name}/secrets.json`,

  /**
   * A custom domain claim; its referent is the application. A host past 200 characters is split
   * after its 200th into two segments (hosts hold no `/`, so the split reads back unambiguously):
   * every backend, the local directory with its file-name limit among them, holds every host the
   * claim rule allows (253 characters).
   */
  domainClaim: (host: string) =>
    `_svc/domains/${host.length > CLAIM_SEGMENT_CHARS ? `${host.slice(0, CLAIM_SEGMENT_CHARS)}/${host.slice(CLAIM_SEGMENT_CHARS)}` : host}.json`,
  /** The host a claim key holds; null for a key that is no claim. */
  hostOfClaim: (key: string): string | null =>
    key.startsWith('_svc/domains/') && key.endsWith('.json')
      ? key.slice('_svc/domains/'.length, -'.json'.length).replace('/', '')
      : null,
  domainClaimsPrefix: '_svc/domains/',

  /**
   * Observability, batched per node to keep request counts low (docs/observability.md). Keys are
   * sharded by UTC hour (`yyyy-mm-dd-hh`, see src/observability/hours.ts) so a reader lists only
   * the hours of its window and the reaper drops whole hours; `ms` and `seq` are zero-padded so
   * key order is time order.
   */
  eventsPrefix: '_svc/events/',
  eventsHourPrefix: (hour: string) => `_svc/events/${hour}/`,
  eventBatch: (hour: string, node: string, ms: number, seq: number) =>
    `_svc/events/${hour}/${node}/${String(ms).padStart(13, '0')}-${String(seq).padStart(6, '0')}.json`,
  metricsPrefix: '_svc/metrics/',
  metricsHourPrefix: (hour: string) => `_svc/metrics/${hour}/`,
  metricsSnapshot: (hour: string, node: string, ms: number) =>
    `_svc/metrics/${hour}/${node}/${String(ms).padStart(13, '0')}.json`,

  /** The storage protocol's keyspace: nothing else is reachable with an ingress token. */
  // A value is kept one level below its key, under a segment no storage key can hold (storage
  // keys are printable ASCII): no stored object is ever a prefix of another, which some S3
  // servers (MinIO) cannot list beneath (docs/adapter.md "Storage layout").
  ingressObject: (key: string) => `_svc/ingress/objects/${key}/\u00b7`,
  ingressObjectDir: (key: string) => `_svc/ingress/objects/${key}/`,
  ingressObjectsPrefix: '_svc/ingress/objects/',
  ingressValueSegment: '\u00b7',
  ingressLock: (name: string) => `_svc/ingress/locks/${name}.json`,

  /** The runtime's data for one application (docs/api.md: `fleets/<name>/`). */
  fleetPrefix: (name: string) => `fleets/${name}/`,
  runtimeNodeLease: (name: string, node: string) => `fleets/${name}/nodes/${node}.json`,
  runtimeNodeLeasesPrefix: (name: string) => `fleets/${name}/nodes/`,
  // The runtime's deployments (docs/runtime.md "Storage layout"): code and manifest per
  // version, records, the fleet-wide selector and per-script pointers, content-addressed blobs.
  runtimeSelector: (name: string) => `fleets/${name}/selector.json`,
  runtimeScriptPointer: (name: string, script: string) => `fleets/${name}/pointers/${script}.json`,
  runtimeScriptPointersPrefix: (name: string) => `fleets/${name}/pointers/`,
  runtimeRecord: (name: string, script: string, version: string) =>
    `fleets/${name}/records/${script}/${version}.json`,
  runtimeRecordsPrefix: (name: string) => `fleets/${name}/records/`,
  runtimeDeployPrefix: (name: string) => `fleets/${name}/deploy/`,
  runtimeDeployment: (name: string, script: string, version: string) =>
    `fleets/${name}/deploy/${script}/${version}/`,
  runtimeManifest: (name: string, script: string, version: string) =>
    `fleets/${name}/deploy/${script}/${version}/manifest.json`,
  runtimeAssetsIndex: (name: string, script: string, version: string) =>
    `fleets/${name}/deploy/${script}/${version}/assets.json`,
  runtimeModule: (name: string, script: string, version: string, module: string) =>
    `fleets/${name}/deploy/${script}/${version}/modules/${module}`,
  runtimeBlob: (name: string, hash: string) => `fleets/${name}/deploy-blobs/${hash}`,
  runtimeBlobsPrefix: (name: string) => `fleets/${name}/deploy-blobs/`,
  runtimeImage: (name: string, key: string) => `fleets/${name}/deploy/images/${key}.tar`,
  runtimeImagesPrefix: (name: string) => `fleets/${name}/deploy/images/`,
  runtimeQueuesPrefix: (name: string) => `fleets/${name}/deploy/queues/`,
  /**
   * The claim of one scheduled time of one cron schedule (docs/runtime.md "Cron triggers"): the
   * node whose `If-None-Match: *` write lands runs it. `cron` is a hash of the expression.
   */
  runtimeCronClaim: (name: string, cron: string, scheduledMs: number) =>
    `fleets/${name}/crons/${cron}/${scheduledMs}.json`,
  runtimeCronClaimsPrefix: (name: string) => `fleets/${name}/crons/`,
  /**
   * Workers KV (docs/bindings.md "KV namespaces"): one object per KV key under its namespace.
   * `encoded` is the key's UTF-8 bytes in base32hex, split into 200-character segments, then a
   * last segment `-`: byte order of the KV keys is the bucket's key order, every backend holds
   * every 512-byte key, and no entry is ever a prefix of another (runtime/src/bindings/kv.ts).
   */
  runtimeKvNamespacePrefix: (name: string, namespace: string) => `fleets/${name}/kv/${namespace}/`,
  runtimeKvEntry: (name: string, namespace: string, encoded: string) =>
    `fleets/${name}/kv/${namespace}/${encoded}/-`,
  /**
   * R2 buckets (docs/bindings.md "R2 buckets"): per object, a record (its metadata, naming its
   * body) under `objects/`, at the object key encoded as KV's keys are (`encoded`: base32hex in
   * 200-character segments, then `-`), and the body under `bodies/<version>`: a put writes the
   * body, then the record, so an object is seen whole or not at all (runtime/src/bindings/r2.ts).
   */
  runtimeR2BucketPrefix: (name: string, bucket: string) => `fleets/${name}/r2/${bucket}/`,
  runtimeR2RecordsPrefix: (name: string, bucket: string) => `fleets/${name}/r2/${bucket}/objects/`,
  /** The empty key, which R2 allows, is `objects/-`: `-` is no base32hex folder name. */
  runtimeR2Record: (name: string, bucket: string, encoded: string) =>
    `fleets/${name}/r2/${bucket}/objects/${encoded === '' ? '' : `${encoded}/`}-`,
  runtimeR2Body: (name: string, bucket: string, version: string) =>
    `fleets/${name}/r2/${bucket}/bodies/${version}`,
  /** A multipart upload: its record (`upload.json`: key, metadata, state) and one record per part. */
  runtimeR2UploadPrefix: (name: string, bucket: string, upload: string) =>
    `fleets/${name}/r2/${bucket}/uploads/${upload}/`,
  runtimeR2Upload: (name: string, bucket: string, upload: string) =>
    `fleets/${name}/r2/${bucket}/uploads/${upload}/upload.json`,
  runtimeR2UploadPart: (name: string, bucket: string, upload: string, part: number) =>
    `fleets/${name}/r2/${bucket}/uploads/${upload}/parts/${part}.json`,
  /**
   * D1 databases (docs/bindings.md "D1 databases"): per database, the owner's lease, and its
   * history as generations: each a snapshot of the database file, then the WAL segments written
   * after it, numbered from 1; a segment is written only if absent, so a generation's log has one
   * writer (runtime/src/bindings/d1-log.ts). Generation and segment numbers are zero-padded so
   * the bucket lists them in order.
   */
  runtimeD1Prefix: (name: string, database: string) => `fleets/${name}/d1/${database}/`,
  runtimeD1DatabasesPrefix: (name: string) => `fleets/${name}/d1/`,
  runtimeD1Lease: (name: string, database: string) => `fleets/${name}/d1/${database}/lease.json`,
  runtimeD1GenerationsPrefix: (name: string, database: string) =>
    logKeys.generationsPrefix(`fleets/${name}/d1/${database}/`),
  runtimeD1Snapshot: (name: string, database: string, generation: number) =>
    logKeys.snapshot(`fleets/${name}/d1/${database}/`, generation),
  runtimeD1SegmentsPrefix: (name: string, database: string, generation: number) =>
    logKeys.segmentsPrefix(`fleets/${name}/d1/${database}/`, generation),
  runtimeD1Segment: (name: string, database: string, generation: number, segment: number) =>
    logKeys.segment(`fleets/${name}/d1/${database}/`, generation, segment),
  /**
   * Durable Objects on the fleet (docs/bindings.md "Durable Objects"): one lease per application
   * (the node running its objects), and per namespace (workerd's storage folder, named by the
   * class's unique key) one history per SQLite file, laid out as a D1 database's: `<file>` is the
   * object's file name without `.sqlite` (`metadata` holds the namespace's alarms).
   */
  runtimeObjectsPrefix: (name: string) => `fleets/${name}/objects/`,
  runtimeObjectsLease: (name: string) => `fleets/${name}/objects/lease.json`,
  runtimeObjectsNamespacesPrefix: (name: string) => `fleets/${name}/objects/namespaces/`,
  runtimeObjectsNamespacePrefix: (name: string, namespace: string) =>
    `fleets/${name}/objects/namespaces/${namespace}/`,
  /** The file of a namespace that holds its pending alarms, not an object. */
  runtimeObjectsAlarmsFile: 'metadata',
  runtimeObjectLog: (name: string, namespace: string, file: string) =>
    `fleets/${name}/objects/namespaces/${namespace}/${file}/`,
  /**
   * Queues (docs/bindings.md "Queues"): one object per message waiting, named by the time it may
   * be delivered (16 zero-padded digits of milliseconds since the epoch, so the bucket lists a
   * queue's messages in delivery order) and its id.
   */
  runtimeQueuePrefix: (name: string, queue: string) => `fleets/${name}/queues/${queue}/`,
  /** Who delivers the queue's batches now: one node at a time in the fleet. */
  runtimeQueueLease: (name: string, queue: string) => `fleets/${name}/queues/${queue}/lease.json`,
  runtimeQueueMessagesPrefix: (name: string, queue: string) => `fleets/${name}/queues/${queue}/messages/`,
  runtimeQueueMessage: (name: string, queue: string, visibleMs: number, id: string) =>
    `fleets/${name}/queues/${queue}/messages/${String(visibleMs).padStart(16, '0')}-${id}`,
} as const;
