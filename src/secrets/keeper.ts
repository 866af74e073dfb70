// The node's part in secrets (docs/decisions.md "Secrets"), run in every reconcile pass before
// the supervisor is told what to run:
//
// - For each application this node runs, the secrets document is looked at (one HEAD; read
//   only when its ETag moved), the copies sealed to this node are opened and written to
//   `<state dir>/secrets/<name>.json` (0600, replaced by rename). `cell serve` is given that
//   path (never a value) and restarts its deployment when the file changes.
// - On the coordinator, copies are sealed for serving nodes that have none (a node that joined
//   later, or one with a new key) whenever the set of nodes' keys changes, and at the resync
//   interval. Only documents the registry listing shows are read, and at the interval only those
//   whose ETag moved since they were last resealed, so an idle fleet costs no read per application.
//
// Values are never logged: lines name applications, secrets and nodes only.

import { mkdirSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { replaceStateFile } from '../config/state-file.ts';
import { keys } from '../registry/keys.ts';
import type { NodeRecord } from '../registry/records.ts';
import type { Store } from '../store/store.ts';
import type { SealKeyPair } from './seal.ts';
import { openSecrets, readSecrets, recipientsOf, resealed, updateSecrets } from './secrets.ts';

export interface SecretsKeeperOptions {
  store: Store;
  nodeId: string;
  pair: SealKeyPair;
  /** `<state dir>/secrets`. */
  dir: string;
  /** How often the coordinator looks for missing copies even when no node key changed. */
  resealEveryMs: number;
  mono: () => number;
  log: { warn(obj: object, msg: string): void; info(obj: object, msg: string): void };
}

export class SecretsKeeper {
  readonly #o: SecretsKeeperOptions;
  /** Application -> the document ETag last acted on ('' when it was absent). */
  readonly #seen = new Map<string, string>();
  /** Application -> the listed document ETag last resealed for the current recipients. */
  readonly #resealed = new Map<string, string>();
  #recipientsSeen = '';
  #resealAt = Number.NEGATIVE_INFINITY;

  constructor(options: SecretsKeeperOptions) {
    this.#o = options;
    mkdirSync(options.dir, { recursive: true, mode: 0o700 });
  }

  /** Where `cell serve` of one application reads its secrets. */
  fileFor(application: string): string {
    return join(this.#o.dir, `${application}.json`);
  }

  /**
   * Brings the files of the applications this node runs up to date; drops the others. `listed`
   * answers a secrets document's ETag from the node's registry listing (null: none listed), so
   * a pass costs no request per application; without it each document is looked up. Answers the
   * applications whose file changed: their runtime processes are told (SIGHUP) to read it.
   */
  async materialize(
    applications: readonly string[],
    listed?: (application: string) => string | null,
  ): Promise<string[]> {
    const changed: string[] = [];
    const wanted = new Set(applications);
    for (const application of [...this.#seen.keys()]) {
      if (wanted.has(application)) continue;
      this.#seen.delete(application);
      await rm(this.fileFor(application), { force: true });
    }
    for (const application of applications) {
      try {
        if (await this.#materializeOne(application, listed)) changed.push(application);
      } catch (err) {
        this.#o.log.warn({ err, application }, 'could not bring the secrets of an application up to date');
      }
    }
    return changed;
  }

  async #materializeOne(
    application: string,
    listed?: (application: string) => string | null,
  ): Promise<boolean> {
    const { store, nodeId, pair } = this.#o;
    const etag = listed
      ? (listed(application) ?? '')
      : ((await store.stat(keys.appSecrets(application)))?.etag ?? '');
    if (this.#seen.get(application) === etag) return false;
    const found = etag !== '' ? await readSecrets(store, application) : null;
    const values = found ? openSecrets(found.doc, { node: nodeId, pair }) : { values: {}, missing: [] };
    if (values.missing.length > 0) {
      this.#o.log.warn(
        { event: 'secrets.missing', application, secrets: values.missing },
        `no copy of ${values.missing.join(', ')} of ${application} is sealed to this node yet; the coordinator seals one`,
      );
    }
    const written = await writeIfChanged(this.fileFor(application), `${JSON.stringify(values.values)}\n`);
    this.#seen.set(application, found?.etag ?? '');
    return written;
  }

  /**
   * The coordinator's part: seals copies for nodes that lack them. `listed` answers a secrets
   * document's ETag from the registry listing (null: none listed); without it every
   * application's document is read.
   */
  async reseal(
    applications: readonly string[],
    nodes: readonly NodeRecord[],
    nowMs: number,
    listed?: (application: string) => string | null,
  ): Promise<void> {
    const recipients = recipientsOf(nodes, nowMs);
    const fingerprint = JSON.stringify(recipients);
    const recipientsMoved = fingerprint !== this.#recipientsSeen;
    const due = this.#o.mono() - this.#resealAt >= this.#o.resealEveryMs;
    if (!recipientsMoved && !due) return;
    if (recipientsMoved) this.#resealed.clear();
    this.#recipientsSeen = fingerprint;
    this.#resealAt = this.#o.mono();
    const own = { node: this.#o.nodeId, pair: this.#o.pair };
    for (const application of applications) {
      const etag = listed?.(application);
      // Nothing to seal, or sealed already for these recipients as the document stands.
      if (etag === null) continue;
      if (etag !== undefined && this.#resealed.get(application) === etag) continue;
      try {
        let sealedFor: string[] = [];
        await updateSecrets(this.#o.store, application, (doc) => {
          const next = doc ? resealed(doc, own, recipients) : null;
          sealedFor = next ? recipients.map((r) => r.node) : [];
          return next;
        });
        if (sealedFor.length > 0) {
          this.#o.log.info(
            { event: 'secrets.resealed', application, nodes: sealedFor },
            `sealed the secrets of ${application} for nodes that lacked them`,
          );
        } else if (etag !== undefined) {
          // Unchanged by this pass: the listed ETag stands for a document every recipient can open.
          this.#resealed.set(application, etag);
        }
      } catch (err) {
        this.#o.log.warn({ err, application }, 'could not re-seal the secrets of an application');
      }
    }
  }
}

/** Replaces the file (0600, by rename) only when its content changes, so `cell serve` restarts only then. */
/** Answers whether the file was written. */
async function writeIfChanged(file: string, content: string): Promise<boolean> {
  const before = await readFile(file, 'utf8').catch(() => null);
  if (before === content) return false;
  // Written aside and renamed; a disk that refuses leaves the old file and nothing aside, and the
  // application stays unseen, so the next pass writes it again.
  await replaceStateFile(file, content);
  return true;
}
