// A client for both ingress protocols (docs/ingress.md "The storage protocol" and "The routing document"),
// used by tests and benchmarks. Failures report the problem document's title and detail when
// present, otherwise the status alone (docs/ingress.md "The storage protocol (version 1)").

import type { StorageStat } from '../../src/ingress/storage.ts';
import { storageKeyToPath } from '../../src/ingress/storage-keys.ts';
import type { FleetRouting } from '../../src/routing/types.ts';

/** A non-2xx answer, carrying what the node said. */
export class IngressError extends Error {
  readonly status: number;
  readonly type: string | undefined;
  readonly title: string | undefined;
  readonly detail: string | undefined;

  constructor(status: number, problem: { type?: string; title?: string; detail?: string } | undefined) {
    const said = problem?.title
      ? `${problem.title}${problem.detail ? `: ${problem.detail}` : ''}`
      : `HTTP ${status}`;
    super(said);
    this.name = 'IngressError';
    this.status = status;
    this.type = problem?.type;
    this.title = problem?.title;
    this.detail = problem?.detail;
  }
}

export class IngressClient {
  readonly baseUrl: string;
  readonly #token: string;

  /** `baseUrl` may carry a path prefix; it is preserved. */
  constructor(baseUrl: string, token: string) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
    this.#token = token.trim();
  }

  /** One request with the protocol headers; answers the response when 2xx, else throws IngressError. */
  async request(method: string, path: string, body?: Uint8Array): Promise<Response> {
    const response = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${this.#token}`, 'x-svc-storage-version': '1' },
      body: body as Uint8Array<ArrayBuffer> | undefined,
    });
    if (response.ok) return response;
    const text = await response.text();
    let problem: { type?: string; title?: string; detail?: string } | undefined;
    try {
      problem = JSON.parse(text);
    } catch {
      problem = undefined;
    }
    throw new IngressError(response.status, problem);
  }

  async routes(prefer?: string): Promise<FleetRouting> {
    const query = prefer === undefined ? '' : `?prefer=${encodeURIComponent(prefer)}`;
    return (await this.request('GET', `/v1/ingress/routes${query}`)).json() as Promise<FleetRouting>;
  }

  async routesIn(format: string, prefer?: string): Promise<string> {
    const query = prefer === undefined ? '' : `?prefer=${encodeURIComponent(prefer)}`;
    return (await this.request('GET', `/v1/ingress/routes/${encodeURIComponent(format)}${query}`)).text();
  }

  async put(key: string, value: Uint8Array): Promise<void> {
    await this.request('PUT', `/v1/storage/objects/${storageKeyToPath(key)}`, value);
  }

  /** The value, or null on 404. */
  async get(key: string): Promise<Uint8Array | null> {
    return this.#orNull(
      async () =>
        new Uint8Array(
          await (await this.request('GET', `/v1/storage/objects/${storageKeyToPath(key)}`)).arrayBuffer(),
        ),
    );
  }

  /** true when deleted, false on 404. */
  async delete(key: string): Promise<boolean> {
    return (
      (await this.#orNull(async () =>
        this.request('DELETE', `/v1/storage/objects/${storageKeyToPath(key)}`),
      )) !== null
    );
  }

  /** Keys at or under the prefix; [] on 404. */
  async list(prefix: string, recursive: boolean): Promise<string[]> {
    const query = new URLSearchParams({ prefix, recursive: recursive ? 'true' : 'false' });
    return (
      (await this.#orNull(
        async () => (await this.request('GET', `/v1/storage/list?${query}`)).json() as Promise<string[]>,
      )) ?? []
    );
  }

  async stat(key: string): Promise<StorageStat | null> {
    const query = new URLSearchParams({ key });
    return this.#orNull(
      async () => (await this.request('GET', `/v1/storage/stat?${query}`)).json() as Promise<StorageStat>,
    );
  }

  /** Try-acquire once: true when granted, false on 409. `token` identifies the acquisition for restamps. */
  async tryLock(name: string, token?: string): Promise<boolean> {
    const response = await fetch(`${this.baseUrl}/v1/storage/locks/${storageKeyToPath(name)}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${this.#token}`,
        'x-svc-storage-version': '1',
        ...(token ? { 'x-svc-lock-token': token } : {}),
      },
    });
    if (response.status === 204) return true;
    if (response.status === 409) return false;
    throw new IngressError(response.status, await response.json().catch(() => undefined));
  }

  async unlock(name: string): Promise<void> {
    await this.request('DELETE', `/v1/storage/locks/${storageKeyToPath(name)}`);
  }

  async #orNull<T>(call: () => Promise<T>): Promise<T | null> {
    try {
      return await call();
    } catch (err) {
      if (err instanceof IngressError && err.status === 404) return null;
      throw err;
    }
  }
}
