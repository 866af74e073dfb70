// A publish that moved the selector (docs/deploys.md "A publish the bucket cut short"): the
// selector is what serves, so it is the truth the other records are brought to. Shared by the
// accepting node (which retries each step while the bucket does not answer) and the reaper (which
// finds, for a deploy whose node died, that its publish did move the selector).

import { updateApplication } from '../../registry/applications.ts';
import { writeDeploymentNote } from '../../registry/deployments.ts';
import { keys } from '../../registry/keys.ts';
import { parsePointer } from '../../runtime-tools/layout.ts';
import type { Store } from '../../store/store.ts';
import type { DeployRecord, DeployRecordWriter } from './records.ts';
import type { Published } from './runner.ts';

/** The deployment the selector names now; null when there is none or it cannot be read. */
export async function selectedDeployment(
  store: Store,
  application: string,
): Promise<{ script: string; deployment: string } | null> {
  const selector = await store.get(keys.runtimeSelector(application));
  const pointer = selector ? parsePointer(selector.body) : null;
  return pointer?.ok ? { script: pointer.value.script, deployment: pointer.value.deployment } : null;
}

/**
 * The deployment a deploy in flight published, when the selector names it: the deployment's
 * record in the bucket notes the deploy whose publish wrote it (`cell publish` is told its id,
 * `CELL_DEPLOY`). Two reads, made only for a record judged dead.
 */
export async function publishedBy(store: Store, record: DeployRecord): Promise<Published | null> {
  if (record.state !== 'uploading') return null;
  const selected = await selectedDeployment(store, record.application);
  if (!selected) return null;
  const found = await store.get(keys.runtimeRecord(record.application, selected.script, selected.deployment));
  if (!found) return null;
  try {
    const written = JSON.parse(Buffer.from(found.body).toString('utf8')) as { deploy?: unknown };
    if (written.deploy !== record.id) return null;
  } catch {
    return null;
  }
  return { application: record.application, ...selected, warnings: [] };
}

/**
 * The writes that bring the registry in line with a publish that moved the selector, in order:
 * the application record names what the selector names now (this deployment, or a later one if
 * the selector moved on since), the deployment note says who made it, and the deploy record is
 * `deployed` (replacing a `deploy-timeout` judgement). Each step throws on a bucket failure, so
 * the caller can retry it; the application's absence throws `not-found` from the first.
 */
export function publishedSteps(
  store: Store,
  writer: DeployRecordWriter,
  published: Published,
  onRecordMoved: () => void = () => {},
): (() => Promise<unknown>)[] {
  const id = writer.record.id;
  return [
    async () => {
      const deployment =
        (await selectedDeployment(store, published.application))?.deployment ?? published.deployment;
      await updateApplication(store, published.application, (current) =>
        current.deployment === deployment ? null : { ...current, deployment },
      );
      onRecordMoved();
    },
    () => {
      // Its provenance outlives the deploy record (reaped after 7 days): history reads it.
      const { by, source } = writer.record;
      return writeDeploymentNote(store, {
        v: 1,
        application: published.application,
        script: published.script,
        deployment: published.deployment,
        deploy: id,
        by,
        deployedAt: new Date().toISOString(),
        ...(source ? { source } : {}),
      });
    },
    () =>
      writer.settle({
        state: 'deployed',
        deployment: published.deployment,
        script: published.script,
        ...(published.warnings.length > 0 ? { warnings: published.warnings } : {}),
      }),
  ];
}
