// `svc objects` (docs/cli.md "svc objects"): an application's Durable Objects through a node: the
// classes its serving deployment declares with how many objects each keeps and the node holding
// them now, and the deletion of the stored objects of a class a `deleted_classes` migration removed
// (docs/api.md "Durable Objects").

import type { Command } from 'commander';
import type { ObjectsAnswer } from '../node/routes/objects.ts';
import { callApplication, type DataFlags, dataCommand, dataTarget } from './binding-data.ts';
import { say, table } from './output.ts';

type ListFlags = DataFlags & { json?: boolean };

export function registerObjects(program: Command): void {
  const objects = program
    .command('objects')
    .description(
      "Durable Objects: an application's classes, their objects and where they live, through a node",
    );
  dataCommand(
    objects,
    'list',
    "List the serving deployment's classes, their stored objects and the node holding them",
  )
    .option('--json', 'Print JSON')
    .action((flags: ListFlags) => objectsListAction(flags));
  dataCommand(
    objects,
    'delete-class',
    'Delete the stored objects of a class a deleted_classes migration removed',
  )
    .argument('<class>', 'The class name, as the deleted_classes migration names it')
    .option('--json', 'Print JSON')
    .action((className: string, flags: ListFlags) => deleteClassAction(className, flags));
}

async function objectsListAction(flags: ListFlags): Promise<void> {
  const found = (await callApplication(await dataTarget(flags), 'GET', '/objects')).body as ObjectsAnswer;
  if (flags.json) return say(JSON.stringify(found, null, 2));
  if (found.classes.length === 0)
    return say(
      found.deployment === null
        ? `${found.application} has no serving deployment, so no Durable Object class.`
        : `The serving deployment ${found.deployment} of ${found.application} declares no Durable Object class.`,
    );
  for (const line of table(
    ['CLASS', 'STATE', 'STORAGE', 'BINDINGS', 'OBJECTS'],
    found.classes.map((c) => [
      c.class_name,
      c.state === 'live' ? (c.sql ? 'live (sql)' : 'live') : 'deleted',
      c.storage_key,
      c.bindings.join(', ') || '-',
      String(c.objects),
    ]),
  ))
    say(line);
  say(found.holder ? `Held by node ${found.holder.node}.` : 'No node holds the objects now.');
}

async function deleteClassAction(className: string, flags: ListFlags): Promise<void> {
  const target = await dataTarget(flags);
  const answer = (
    await callApplication(target, 'DELETE', `/objects/classes/${encodeURIComponent(className)}`)
  ).body as { deleted_objects: number };
  if (flags.json) return say(JSON.stringify(answer, null, 2));
  say(
    `Deleted the stored objects of ${className} of ${target.application}: ${answer.deleted_objects} object${answer.deleted_objects === 1 ? '' : 's'}.`,
  );
}
