#!/usr/bin/env node
// STAND-IN for the `cell` runtime, at the seam the spec defines (docs/runtime.md): `cell --version` prints `cell <version>`; `cell publish --config <file>` runs in the
// unpacked artifact with CELL_APP and SVC_S3_* in its environment, prints its last stdout line as
// JSON `{"application","script","deployment"}`, and exits non-zero on failure. It bundles nothing:
// tests that need a real publish use runtime/bin/cell. `cell serve` is served by
// test/helpers/cell-standin-serve.ts (a listener answering health, steered by STANDIN_SERVE_*).
//
// What publish does is steered by a `standin` member of the worker config it is handed, so a test
// says per deploy what the runtime should do:
//   {"standin": {"fail": "why"}}          print output, exit 1
//   {"standin": {"waitFor": "/abs/file"}}  wait until that file exists (a gate the test opens)
//   {"standin": {"hang": true}}            never finish (until killed)
// With a `file://` SVC_S3_ENDPOINT it records what it was given under
// `<bucket dir>/standin/<application>/<deployment>.json`: the config bytes, untouched, the
// environment it saw and the files of the artifact. STANDIN_CELL_VERSION sets its version.

import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const args = process.argv.slice(2);
if (args[0] === '--version' || args[0] === '-V') {
  process.stdout.write(`cell ${process.env.STANDIN_CELL_VERSION ?? '0.0.0-standin'}\n`);
  process.exit(0);
}
if (args[0] === 'serve') {
  // `cell serve`: test/helpers/cell-standin-serve.ts.
  const { serveStandin } = await import('./cell-standin-serve.ts');
  serveStandin();
} else {
  publish();
}

function publish(): void {
  if (args[0] !== 'publish' || args[1] !== '--config' || !args[2]) {
    process.stderr.write(`cell (stand-in): expected publish --config <file>, got ${args.join(' ')}\n`);
    process.exit(2);
  }

  const configFile = args[2];
  const application = process.env.CELL_APP ?? '';
  if (!/^[a-z0-9]+(-[a-z0-9]+)*$/.test(application)) {
    process.stderr.write('cell (stand-in): CELL_APP is not set to an application name\n');
    process.exit(1);
  }
  const configBytes = readFileSync(configFile);
  let config: { name?: string; standin?: { fail?: string; waitFor?: string; hang?: boolean } } = {};
  try {
    // Comments are allowed in cell.jsonc; the stand-in only needs the `standin` member.
    config = JSON.parse(configBytes.toString('utf8').replace(/^\s*\/\/.*$/gm, ''));
  } catch {}
  process.stderr.write(`cell (stand-in): publishing ${application} from ${process.cwd()}\n`);

  const standin = config.standin ?? {};
  // A write to a node that is gone must not end the stand-in by itself (the test of a restart that
  // stops a publish left running needs it to run on).
  process.stdout.on('error', () => {});
  process.stderr.on('error', () => {});
  // A stand-in whose node is gone (it was reparented) ends: at once, or, for `hang` (which a
  // restarted node is expected to stop itself), after five minutes, so no test leaves it behind.
  const parent = process.ppid;
  let orphanedAt = 0;
  setInterval(() => {
    if (process.ppid === parent) return;
    orphanedAt ||= Date.now();
    if (!standin.hang || Date.now() - orphanedAt > 300_000) process.exit(1);
  }, 200).unref();
  if (standin.hang) {
    setInterval(() => {}, 60_000);
  } else if (standin.waitFor) {
    const gate = standin.waitFor;
    const timer = setInterval(() => {
      if (existsSync(gate)) {
        clearInterval(timer);
        finish();
      }
    }, 20);
  } else {
    finish();
  }

  function finish(): void {
    if (standin.fail) {
      process.stdout.write('building...\n');
      process.stderr.write(`error: ${standin.fail}\n`);
      process.exit(1);
    }
    const deployment = randomBytes(8).toString('hex');
    const script = config.name ?? application;
    const endpoint = process.env.SVC_S3_ENDPOINT ?? '';
    if (endpoint.startsWith('file://')) {
      const dir = join(fileURLToPath(endpoint), 'standin', application);
      mkdirSync(dir, { recursive: true });
      writeFileSync(
        join(dir, `${deployment}.json`),
        JSON.stringify({
          config: configBytes.toString('base64'),
          configFile,
          files: listFiles(process.cwd()),
          env: {
            CELL_APP: process.env.CELL_APP,
            SVC_S3_ENDPOINT: process.env.SVC_S3_ENDPOINT,
            SVC_S3_PREFIX: process.env.SVC_S3_PREFIX,
            leaked: Object.keys(process.env).filter(
              (name) => name.startsWith('SVC_') && !name.startsWith('SVC_S3_'),
            ),
          },
        }),
      );
    }
    process.stdout.write('built 1 module\n');
    process.stdout.write(`${JSON.stringify({ application, script, deployment })}\n`);
    process.exit(0);
  }
}

function listFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else out.push(relative(root, path));
    }
  };
  walk(root);
  return out.sort();
}
