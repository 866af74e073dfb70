// The guard in front of every tool that reads or deletes the runtime's keys directly (docs/cli.md
// "svc app": runs only against runtime releases it was verified against; prune rule 9): every
// answering node must report a verified runtime release, and at least one must answer.

import { Problem } from '../problem.ts';
import { keys } from '../registry/keys.ts';
import { isNodeLive } from '../registry/liveness.ts';
import type { Store } from '../store/store.ts';
import { parseJsonObject, runtimeRelease, VERIFIED_RUNTIME_RELEASES } from './layout.ts';

const verifiedList = VERIFIED_RUNTIME_RELEASES.join(', ');

/** Refuses with `capability-missing` unless every answering node runs a verified runtime release. */
export async function requireVerifiedRuntimes(store: Store, nowMs: number, command: string): Promise<void> {
  const listing = await store.list(keys.nodeRecordsPrefix, { recursive: false });
  const answering: { id: string; release: string | null; reported: unknown }[] = [];
  for (const info of listing.objects) {
    if (!info.key.endsWith('.json')) continue;
    const object = await store.get(info.key);
    if (!object) continue; // gone since the listing: a node that left
    const parsed = parseJsonObject(object.body);
    const record = parsed.ok ? parsed.value : null;
    if (!record || typeof record.beatMs !== 'number') {
      throw new Problem(
        'store-nonconforming',
        'Unreadable node record',
        `${info.key}: ${parsed.ok ? 'beatMs is missing' : parsed.why}; cannot tell which runtime release that node runs`,
      );
    }
    if (!isNodeLive({ beatMs: record.beatMs }, nowMs)) continue;
    const versions = record.versions as Record<string, unknown> | undefined;
    const reported = versions && typeof versions === 'object' ? versions.cell : undefined;
    answering.push({ id: String(record.id ?? info.key), release: runtimeRelease(reported), reported });
  }
  if (answering.length === 0) {
    throw new Problem(
      'capability-missing',
      'No node reports its runtime release',
      `${command} runs only while the answering nodes report a runtime release it was verified against (${verifiedList}), and no node answers; start a node (svc sail) and run it again`,
    );
  }
  for (const node of answering) {
    if (node.release === null) {
      throw new Problem(
        'capability-missing',
        'Runtime release not reported',
        `node ${node.id} reports no runtime release; ${command} runs only against ${verifiedList}`,
      );
    }
    if (!VERIFIED_RUNTIME_RELEASES.includes(node.release)) {
      throw new Problem(
        'capability-missing',
        'Runtime release not verified',
        `node ${node.id} runs cell ${node.release}; ${command} was verified only against ${verifiedList}: use the svc release that ships with that runtime`,
      );
    }
  }
}
