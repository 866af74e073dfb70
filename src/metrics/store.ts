// Times and counts every request the daemon makes to the bucket (docs/observability.md
// "Prometheus metrics": svc_bucket_requests_total, svc_bucket_request_duration_seconds). The
// daemon wraps the store it opens once, so every part of it is measured without knowing.

import { isCasConflict, type Store } from '../store/store.ts';
import type { BucketOperation, BucketOutcome, NodeMetrics } from './node-metrics.ts';

/** The store, each request of it counted by operation and outcome. */
export function meteredStore(store: Store, metrics: Pick<NodeMetrics, 'bucketRequest'>): Store {
  const timed = async <T>(
    operation: BucketOperation,
    run: () => Promise<T>,
    absent: (value: T) => boolean = () => false,
  ): Promise<T> => {
    const started = performance.now();
    const seconds = () => (performance.now() - started) / 1000;
    try {
      const value = await run();
      metrics.bucketRequest(operation, absent(value) ? 'not-found' : 'ok', seconds());
      return value;
    } catch (err) {
      metrics.bucketRequest(operation, outcomeOf(err), seconds());
      throw err;
    }
  };
  return {
    get: (key) =>
      timed(
        'get',
        () => store.get(key),
        (object) => object === null,
      ),
    put: (key, body, condition) => timed('put', () => store.put(key, body, condition)),
    delete: (key, condition) =>
      timed(
        'delete',
        () => store.delete(key, condition),
        (deleted) => !deleted,
      ),
    list: (prefix, options) => timed('list', () => store.list(prefix, options)),
    stat: (key) =>
      timed(
        'stat',
        () => store.stat(key),
        (info) => info === null,
      ),
    close: () => store.close(),
    get description() {
      return store.description;
    },
  };
}

/** A lost condition is the bucket answering as asked, told apart from the bucket failing. */
function outcomeOf(err: unknown): BucketOutcome {
  return isCasConflict(err) ? 'conflict' : 'error';
}
