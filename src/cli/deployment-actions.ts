// `svc deployment list` and `svc deployment rollback` (docs/deploys.md "History and rollback"):
// history reads the bucket (bucket flags, no node needed); rollback goes through a node when one
// is named (operator token, application scope), else writes the selector in the bucket itself.

import { getApplication } from '../registry/applications.ts';
import { resolveApplicationName } from '../registry/names.ts';
import { type HistoryEntry, type RollbackOutcome, readHistory, rollback } from '../runtime-tools/history.ts';
import { type AppFlags, onWay } from './app-actions.ts';
import { callNode } from './client.ts';
import { withBucket } from './flags.ts';
import { formatBytes, note, say, table } from './output.ts';

export async function deploymentListAction(flags: AppFlags): Promise<void> {
  const application = resolveApplicationName(flags.name, flags.env);
  await withBucket(flags, async (store) => {
    const history = await readHistory(store, application);
    // Nothing in the bucket: a missing application is not-found, an existing one has no deployments.
    if (history.deployments.length === 0) await getApplication(store, application);
    if (flags.json) {
      say(JSON.stringify(history, null, 2));
      return;
    }
    if (history.deployments.length === 0) {
      say(`No deployments of ${application}.`);
      return;
    }
    const now = Date.now();
    const rows = history.deployments.map((d) => [
      d.serving ? '*' : d.complete ? '' : '…',
      d.deployment,
      d.createdMs === null ? '?' : describeAge(now - d.createdMs),
      d.deploy ?? '-',
      d.by ?? '-',
      formatBytes(d.bytes),
      describeSource(d),
    ]);
    for (const line of table(['', 'DEPLOYMENT', 'AGE', 'DEPLOY', 'BY', 'SIZE', 'SOURCE'], rows)) say(line);
    say('* serves now; … a deploy in flight or one that never finished');
  });
}

export async function deploymentRollbackAction(flags: AppFlags & { to?: string }): Promise<void> {
  const application = resolveApplicationName(flags.name, flags.env);
  const outcome = await onWay(
    flags,
    async (target) =>
      (await callNode(target, 'POST', `/v1/applications/${encodeURIComponent(application)}/rollback`, {
        body: flags.to === undefined ? {} : { to: flags.to },
      })) as RollbackOutcome,
    async (session) => {
      const done = await rollback(session.store, { application, to: flags.to, nowMs: Date.now() });
      // No node saw this one: the line on stderr is its only trace besides the selector.
      note(`svc: rollback of ${application} by ${session.by}`);
      return done;
    },
  );
  if (!outcome.changed) {
    say(`${application} already serves ${outcome.to.deployment}; nothing changed`);
    return;
  }
  say(
    `rolled back ${application} to ${outcome.to.deployment}${outcome.from ? ` (was ${outcome.from.deployment})` : ''}; every node serves it within a pass`,
  );
}

export function describeAge(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86_400)}d`;
}

function describeSource(d: HistoryEntry): string {
  if (!d.source) return '';
  return `${d.source.repo}@${d.source.ref} ${d.source.commit.slice(0, 12)}`;
}
