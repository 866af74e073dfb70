// The node's registry cache (docs/architecture.md "How a request flows":
// steady-state cost must not grow with the number of applications). Everything is read at the
// first refresh; afterwards each refresh is one listing per keyspace, and only objects whose ETag
// differs from the cached one are fetched (an S3 ETag is a checksum of the content, so an equal
// ETag is an unchanged object). Objects that left the listing leave the cache.
// docs/fleet.md "Registry cache" gives the schedule and the request budget.

import { readApplication } from '../../registry/applications.ts';
import { keys } from '../../registry/keys.ts';
import type { ListedRecord } from '../../registry/liveness.ts';
import type {
  ApplicationRecord,
  CoordinatorLease,
  DomainClaim,
  FreezeRecord,
  NodeRecord,
  PlacementRecord,
} from '../../registry/records.ts';
import { getJson, type ObjectInfo, type Store } from '../../store/store.ts';

/** A cached record and the ETag it was read at. */
export interface Cached<T> {
  value: T;
  etag: string;
}

/** Fetches of changed objects in flight at once. */
const FETCH_CONCURRENCY = 16;

export interface RegistryCacheOptions {
  store: Store;
  /** True when this node itself wrote the object at this ETag (no need to read it back). */
  ownWrite?: (key: string, etag: string) => boolean;
  /** The lease as this node last read or wrote it, when its ETag is `etag` (no need to read it again). */
  knownLease?: (etag: string) => Cached<CoordinatorLease> | null;
  /** Told about objects that are not the JSON record they should be; they are left out. */
  onUnreadable?: (key: string, err: unknown) => void;
}

export class RegistryCache {
  readonly nodes = new Map<string, Cached<NodeRecord>>();
  readonly applications = new Map<string, Cached<ApplicationRecord>>();
  readonly placements = new Map<string, Cached<PlacementRecord>>();
  readonly claims = new Map<string, Cached<DomainClaim>>();
  lease: Cached<CoordinatorLease> | null = null;
  freeze: Cached<FreezeRecord> | null = null;
  /** The change marker's ETag as the last fleet listing showed it; null when absent. */
  markerEtag: string | null = null;
  /** The node records as the last listing of `_svc/fleet/` showed them (ETags and times). */
  nodeListing: readonly ObjectInfo[] = [];
  #leaseInfo: ObjectInfo | null = null;
  #freezeInfo: ObjectInfo | null = null;
  /** Every object under `_svc/apps/` as last listed (the reaper's listings are answered from it). */
  appsListing: ObjectInfo[] = [];
  /** `appsListing` by key, built on first use after each listing. */
  #listedEtags: { listing: ObjectInfo[]; etags: Map<string, string> } | undefined;
  /** Registry changes this process made (`applicationsChanged`), counted. */
  #changes = 0;
  /** `#changes` as it was when the last finished application refresh started; -1 before the first. */
  #refreshedAt = -1;
  /** The application refresh running or queued; refreshes run one at a time. */
  #refreshing: Promise<void> = Promise.resolve();
  /** A refresh queued behind the running one and not started yet: later callers join it. */
  #queued: Promise<void> | null = null;
  /** Objects known unreadable at an ETag, so a broken object is not fetched on every refresh. */
  readonly #unreadable = new Map<string, string>();
  readonly #store: Store;
  readonly #ownWrite: (key: string, etag: string) => boolean;
  readonly #knownLease: (etag: string) => Cached<CoordinatorLease> | null;
  readonly #onUnreadable: (key: string, err: unknown) => void;

  constructor(options: RegistryCacheOptions) {
    this.#store = options.store;
    this.#ownWrite = options.ownWrite ?? (() => false);
    this.#knownLease = options.knownLease ?? (() => null);
    this.#onUnreadable = options.onUnreadable ?? (() => {});
  }

  /** Node records, the coordinator lease and the freeze: one listing of `_svc/fleet/`, then changed objects. */
  async refreshFleet(): Promise<void> {
    await this.listFleet();
    await this.syncFleet();
  }

  /**
   * One listing of `_svc/fleet/`, nothing fetched: the change marker's ETag and every node
   * record's ETag and time (a node's heartbeat: src/registry/liveness.ts) in one request. Records
   * that left the listing leave the cache at once.
   */
  async listFleet(): Promise<ListedRecord[]> {
    const listing = await this.#store.list('_svc/fleet/', { recursive: true });
    const nodeObjects: ObjectInfo[] = [];
    this.#leaseInfo = null;
    this.#freezeInfo = null;
    this.markerEtag = null;
    for (const object of listing.objects) {
      if (object.key === keys.coordinatorLease) this.#leaseInfo = object;
      else if (object.key === keys.freeze) this.#freezeInfo = object;
      else if (object.key === keys.fleetChanged) this.markerEtag = object.etag;
      else if (object.key.startsWith(keys.nodeRecordsPrefix) && object.key.endsWith('.json'))
        nodeObjects.push(object);
    }
    this.nodeListing = nodeObjects;
    const present = new Set(nodeObjects.map((object) => nodeIdOf(object.key)));
    for (const id of this.nodes.keys()) if (!present.has(id)) this.nodes.delete(id);
    if (!this.#leaseInfo) this.lease = null;
    if (!this.#freezeInfo) this.freeze = null;
    return nodeObjects.map((object) => ({
      id: nodeIdOf(object.key),
      etag: object.etag,
      modified: object.modified,
    }));
  }

  /** Fetches what changed in the last `listFleet`: node records, the lease and the freeze. */
  async syncFleet(): Promise<void> {
    await Promise.all([
      this.#sync(this.nodes, this.nodeListing, nodeIdOf, (key) => this.#json<NodeRecord>(key)),
      this.#syncLease(),
      this.#syncOne(this.#freezeInfo, this.freeze, (next) => {
        this.freeze = next;
      }),
    ]);
  }

  /**
   * Application records, placements and domain claims: one listing each of `_svc/apps/` and
   * `_svc/domains/`, then the changed objects. Refreshes run one at a time (two at once could
   * leave an older read in place of a newer one); a call while one runs joins the one queued
   * behind it, which starts after the call and so sees every write made before it.
   */
  refreshApplications(): Promise<void> {
    if (this.#queued) return this.#queued;
    const queued = this.#refreshing
      .catch(() => {})
      .then(async () => {
        this.#queued = null;
        const changes = this.#changes;
        await this.#relistApplications();
        this.#refreshedAt = Math.max(this.#refreshedAt, changes);
      });
    this.#queued = queued;
    this.#refreshing = queued;
    return queued;
  }

  /**
   * This process changed the registry (its write has landed): the next `currentApplications`
   * re-lists before it answers. No request of its own.
   */
  applicationsChanged(): void {
    this.#changes++;
  }

  /**
   * Every application record, in name order, as the cache holds it, after a refresh when this
   * process changed the registry since the last one started (or none ran yet): a change made
   * through this node shows at once; one made elsewhere once a pass saw the change marker move
   * (docs/fleet.md "Registry cache").
   */
  async currentApplications(): Promise<ApplicationRecord[]> {
    if (this.#refreshedAt < this.#changes) await this.refreshApplications();
    return [...this.applications.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, cached]) => cached.value);
  }

  async #relistApplications(): Promise<void> {
    const [apps, domains] = await Promise.all([
      this.#store.list(keys.appsPrefix, { recursive: true }),
      this.#store.list(keys.domainClaimsPrefix, { recursive: true }),
    ]);
    this.appsListing = apps.objects;
    const records: ObjectInfo[] = [];
    const placements: ObjectInfo[] = [];
    for (const object of apps.objects) {
      const name = applicationOf(object.key);
      if (name === null) continue;
      if (object.key === keys.application(name)) records.push(object);
      else if (object.key === keys.placement(name)) placements.push(object);
    }
    await Promise.all([
      this.#sync(
        this.applications,
        records,
        (key) => applicationOf(key)!,
        async (key) => {
          const found = await readApplication(this.#store, applicationOf(key)!);
          return found ? { value: found.record, etag: found.etag } : null;
        },
      ),
      this.#sync(
        this.placements,
        placements,
        (key) => applicationOf(key)!,
        (key) => this.#json<PlacementRecord>(key),
      ),
      this.#sync(
        this.claims,
        domains.objects.filter((o) => o.key.endsWith('.json')),
        (key) => keys.hostOfClaim(key)!,
        (key) => this.#json<DomainClaim>(key),
      ),
    ]);
  }

  /** The ETag of a key under `_svc/apps/` as the last listing saw it; null when it was not listed. */
  listedEtag(key: string): string | null {
    if (this.#listedEtags?.listing !== this.appsListing) {
      this.#listedEtags = {
        listing: this.appsListing,
        etags: new Map(this.appsListing.map((object) => [object.key, object.etag])),
      };
    }
    return this.#listedEtags.etags.get(key) ?? null;
  }

  /** Records a write this node made, so the cache does not wait for a listing to learn it. */
  notePlacement(record: PlacementRecord, etag: string): void {
    this.placements.set(record.application, { value: record, etag });
  }

  async #sync<T>(
    map: Map<string, Cached<T>>,
    listed: readonly ObjectInfo[],
    idOf: (key: string) => string,
    fetch: (key: string) => Promise<Cached<T> | null>,
  ): Promise<void> {
    const present = new Set<string>();
    const changed: ObjectInfo[] = [];
    for (const object of listed) {
      const id = idOf(object.key);
      present.add(id);
      if (map.get(id)?.etag === object.etag) continue;
      if (this.#unreadable.get(object.key) === object.etag) continue;
      if (this.#ownWrite(object.key, object.etag)) continue;
      changed.push(object);
    }
    for (const id of map.keys()) if (!present.has(id)) map.delete(id);
    await forEachLimited(changed, FETCH_CONCURRENCY, async (object) => {
      const found = await this.#read(object, fetch);
      const id = idOf(object.key);
      if (found) map.set(id, found);
      else map.delete(id);
    });
  }

  /** The lease as the keeper knows it when the listing shows its ETag (renewals cost no read). */
  async #syncLease(): Promise<void> {
    const info = this.#leaseInfo;
    const known = info && this.lease?.etag !== info.etag ? this.#knownLease(info.etag) : null;
    if (known) this.lease = known;
    else
      await this.#syncOne(info, this.lease, (next) => {
        this.lease = next;
      });
  }

  async #syncOne<T>(
    info: ObjectInfo | null,
    current: Cached<T> | null,
    set: (next: Cached<T> | null) => void,
  ): Promise<void> {
    if (!info) return set(null);
    if (current?.etag === info.etag || this.#ownWrite(info.key, info.etag)) return;
    set(await this.#read(info, (key) => this.#json<T>(key)));
  }

  async #read<T>(
    object: ObjectInfo,
    fetch: (key: string) => Promise<Cached<T> | null>,
  ): Promise<Cached<T> | null> {
    try {
      const found = await fetch(object.key);
      this.#unreadable.delete(object.key);
      return found;
    } catch (err) {
      if (!(err instanceof SyntaxError)) throw err;
      this.#unreadable.set(object.key, object.etag);
      this.#onUnreadable(object.key, err);
      return null;
    }
  }

  #json<T>(key: string): Promise<Cached<T> | null> {
    return getJson<T>(this.#store, key);
  }
}

/** The node id a node record's key names. */
function nodeIdOf(key: string): string {
  return key.slice(keys.nodeRecordsPrefix.length, -'.json'.length);
}

/** The application a key under `_svc/apps/` belongs to; null for anything else. */
function applicationOf(key: string): string | null {
  if (!key.startsWith(keys.appsPrefix)) return null;
  const rest = key.slice(keys.appsPrefix.length);
  const slash = rest.indexOf('/');
  return slash > 0 ? rest.slice(0, slash) : null;
}

async function forEachLimited<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>) {
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await work(items[next++]!);
  });
  await Promise.all(workers);
}
