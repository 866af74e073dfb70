// TEST DOUBLE: an in-memory Store for unit tests and benchmarks, at the Store interface seam
// (src/store/store.ts). Conditional writes behave as the interface promises. Integration
// tests under test/ use the real local-directory bucket instead.

import { createHash } from 'node:crypto';
import {
  CasConflict,
  type ListResult,
  type ObjectInfo,
  type Store,
  type StoredObject,
  type WriteCondition,
} from '../../src/store/store.ts';

export class MemoryStore implements Store {
  readonly description = 'memory://test';
  readonly objects = new Map<string, StoredObject>();
  /** Counts reads, so tests can see what was cached. */
  gets = 0;

  async get(key: string): Promise<StoredObject | null> {
    this.gets++;
    const object = this.objects.get(key);
    return object ? { ...object, body: object.body.slice() } : null;
  }

  async put(key: string, body: Uint8Array | string, condition: WriteCondition = {}): Promise<string> {
    const current = this.objects.get(key);
    if (condition.ifNoneMatch === '*' && current) throw new CasConflict(key);
    if (condition.ifMatch !== undefined && current?.etag !== condition.ifMatch) throw new CasConflict(key);
    const bytes = typeof body === 'string' ? new TextEncoder().encode(body) : body.slice();
    const etag = `"${createHash('md5').update(bytes).digest('hex')}-${Date.now()}-${Math.random()}"`;
    this.objects.set(key, { key, etag, size: bytes.length, modified: new Date(), body: bytes });
    return etag;
  }

  async delete(key: string, condition: Pick<WriteCondition, 'ifMatch'> = {}): Promise<boolean> {
    const current = this.objects.get(key);
    if (condition.ifMatch !== undefined && current?.etag !== condition.ifMatch) throw new CasConflict(key);
    return this.objects.delete(key);
  }

  async list(prefix: string, options: { recursive: boolean }): Promise<ListResult> {
    const objects: ObjectInfo[] = [];
    const prefixes = new Set<string>();
    for (const key of [...this.objects.keys()].sort()) {
      if (!key.startsWith(prefix)) continue;
      const rest = key.slice(prefix.length);
      const slash = rest.indexOf('/');
      if (!options.recursive && slash >= 0) {
        prefixes.add(prefix + rest.slice(0, slash + 1));
        continue;
      }
      const { body: _body, ...info } = this.objects.get(key)!;
      objects.push(info);
    }
    return { objects, prefixes: [...prefixes] };
  }

  async stat(key: string): Promise<ObjectInfo | null> {
    const object = this.objects.get(key);
    if (!object) return null;
    const { body: _body, ...info } = object;
    return info;
  }

  async close(): Promise<void> {}

  /** Writes JSON directly, as another node or the bucket ceremony would. */
  putJson(key: string, value: unknown): Promise<string> {
    return this.put(key, JSON.stringify(value));
  }
}
