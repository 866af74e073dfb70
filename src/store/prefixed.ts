// The `--prefix` bucket flag (docs/cli.md "Flag groups") for backends without a native
// prefix: every key is stored under `<prefix>/` and listings answer keys without it, so two
// fleets with different prefixes share one directory bucket as they share an S3 bucket. The
// S3 store prefixes natively (its listings ask the server for the prefix alone).

import { Problem } from '../problem.ts';
import { checkKey, type ListOptions, type ListResult, type Store, type WriteCondition } from './store.ts';

/**
 * The prefix in its stored form: no leading or trailing `/`, then one `/` appended; '' for
 * none. A prefix must itself be a valid key (no empty, `.` or `..` segment), else
 * `invalid-input` naming the setting.
 */
export function normalizePrefix(prefix: string | undefined): string {
  const trimmed = (prefix ?? '').replace(/^\/+|\/+$/g, '');
  if (trimmed === '') return '';
  try {
    checkKey(trimmed);
  } catch (err) {
    throw new Problem(
      'invalid-input',
      'Invalid setting bucket.prefix',
      `${JSON.stringify(prefix)}: ${err instanceof Problem ? err.detail : String(err)}`,
    );
  }
  return `${trimmed}/`;
}

/** The store seen under a prefix; the store itself when the prefix is empty. */
export function withPrefix(store: Store, prefix: string | undefined): Store {
  const stored = normalizePrefix(prefix);
  return stored === '' ? store : new PrefixedStore(store, stored);
}

class PrefixedStore implements Store {
  readonly description: string;
  readonly #store: Store;
  readonly #prefix: string;

  constructor(store: Store, prefix: string) {
    this.#store = store;
    this.#prefix = prefix;
    this.description = `${store.description} under ${prefix}`;
  }

  async get(key: string) {
    const object = await this.#store.get(this.#full(key));
    return object && { ...object, key };
  }

  put(key: string, body: Uint8Array | string, condition?: WriteCondition) {
    return this.#store.put(this.#full(key), body, condition);
  }

  delete(key: string, condition?: Pick<WriteCondition, 'ifMatch'>) {
    return this.#store.delete(this.#full(key), condition);
  }

  async list(prefix: string, options: ListOptions): Promise<ListResult> {
    const cut = this.#prefix.length;
    const listed = await this.#store.list(this.#prefix + prefix, options);
    return {
      objects: listed.objects.map((object) => ({ ...object, key: object.key.slice(cut) })),
      prefixes: listed.prefixes.map((p) => p.slice(cut)),
    };
  }

  async stat(key: string) {
    const info = await this.#store.stat(this.#full(key));
    return info && { ...info, key };
  }

  close() {
    return this.#store.close();
  }

  // The key is checked on its own first, so a refusal names the caller's key, not ours.
  #full(key: string): string {
    return this.#prefix + checkKey(key);
  }
}
