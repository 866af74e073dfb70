// Prints docs/configuration.md from the settings table, so the document cannot drift:
// `scripts/with-node node scripts/settings-doc.ts > docs/configuration.md`
// (src/config/settings-doc.test.ts fails when the committed file is stale).

import { fileURLToPath } from 'node:url';
import { defaultSettings, readPath, settingSpecs } from '../src/config/settings.ts';

export function settingsDocument(): string {
  const defaults = defaultSettings();
  const lines = [
    '# Configuration of `svc sail`',
    '',
    'Generated from `src/config/settings.ts` by `scripts/settings-doc.ts`; do not edit by hand.',
    '',
    'Each setting is read from its flag, else its environment variable, else its path in',
    '`svc.config.jsonc` (JSONC; named by `--config` or `SVC_CONFIG`, else `./svc.config.jsonc` when present),',
    'else the default. Booleans take `--flag` / `--no-flag`; an unwritten boolean leaves the decision to the',
    'environment and the file. List settings repeat their flag, or take a comma-separated environment value.',
    'Pair settings (`key=value`) repeat their flag; in the environment `SVC_NODE_LABELS` is comma- or',
    'newline-separated and `SVC_CELL_ENV` newline-separated (values may hold commas). A malformed value is',
    'refused with `invalid-input` naming the setting and where it came from; an unknown key in the file too.',
    "The file may also hold `remote`, the CLI's remote pin.",
    '',
    '| Setting (file path) | Flag | Environment | Default | Meaning |',
    '| --- | --- | --- | --- | --- |',
  ];
  for (const spec of settingSpecs) {
    const value = readPath(defaults, spec.path);
    const shown =
      spec.path === 'node.stateDir'
        ? '`$XDG_STATE_HOME/svc` (`~/.local/state/svc`)'
        : spec.path === 'runtime.cellBin'
          ? '`runtime/bin/cell` of this checkout'
          : value === undefined
            ? 'unset'
            : `\`${JSON.stringify(value)}\``;
    lines.push(
      `| \`${spec.path}\` | \`--${spec.flag}\` | \`${spec.env}\` | ${shown} | ${spec.help.replaceAll('|', '\\|')} |`,
    );
  }
  return `${lines.join('\n')}\n`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) process.stdout.write(settingsDocument());
