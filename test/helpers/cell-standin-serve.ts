// STAND-IN for `cell serve` (docs/runtime.md), loaded by
// test/helpers/cell-standin.ts: takes CELL_APP, CELL_NODE, CELL_PORT and CELL_BIND_HOST from the
// environment, listens there, answers `/.well-known/cell/health` with 200 once ready and stops on
// SIGTERM. It runs no worker: `/status/NNN` answers status NNN with body `status NNN`, every other
// path answers `standin <application>`, and `/env`
// answers what it was started with (CELL_*, SVC_S3_*, the names of other SVC_* variables that
// leaked, how many health probes it saw, and how many SIGHUPs: "the selector moved").
//
// Steered through the environment (the supervisor's `--cell-env`); each *_APPS value is a comma
// list of applications, or `*` for all:
//   STANDIN_SERVE_CRASH_APPS       print "standin: crashing" to stderr and exit 3 at once
//   STANDIN_SERVE_LATE_OUTPUT_APPS exit 3 at once, leaving a child that prints "standin: late line"
//                                  on the inherited stderr 100 ms later (output after the exit)
//   STANDIN_SERVE_READY_DIR        health answers 503 until <dir>/<application> exists
//   STANDIN_SERVE_IGNORE_TERM_APPS ignore SIGTERM (only SIGKILL ends it)
//   STANDIN_SERVE_CHILD_APPS       start a child process (like workerd) and print "child <pid>"
//   STANDIN_SERVE_NOISE_BYTES      print that many bytes of noise, then "noise end"
//   STANDIN_SERVE_STAY_ORPHANED    outlive its supervisor (for five minutes), as a runtime would
//   STANDIN_SERVE_DEPLOYMENT_DIR   health names as its `deployment` what <dir>/<application> holds

import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';

export function serveStandin(env: NodeJS.ProcessEnv = process.env): void {
  const application = env.CELL_APP ?? '';
  const node = env.CELL_NODE ?? '';
  const port = Number(env.CELL_PORT);
  const host = env.CELL_BIND_HOST ?? '';
  if (!application || !node || !Number.isInteger(port) || port < 1 || !host) {
    process.stderr.write('cell (stand-in): CELL_APP, CELL_NODE, CELL_PORT and CELL_BIND_HOST are required\n');
    process.exit(1);
  }
  const listed = (name: string) => {
    const value = env[name];
    return value === '*' || (value ?? '').split(',').includes(application);
  };
  process.stdout.on('error', () => {});
  process.stderr.on('error', () => {});
  if (listed('STANDIN_SERVE_CRASH_APPS')) {
    process.stderr.write('standin: crashing\n');
    process.exit(3);
  }
  if (listed('STANDIN_SERVE_LATE_OUTPUT_APPS')) {
    // A shell, not a second Node: it starts in a millisecond, so the line comes 100 ms after the
    // exit, well inside the supervisor's wait, even on a busy machine.
    spawn('/bin/sh', ['-c', 'sleep 0.1; echo "standin: late line" >&2'], {
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    process.exit(3);
  }
  exitWhenOrphaned(env.STANDIN_SERVE_STAY_ORPHANED ? 300_000 : 0);

  let healthProbes = 0;
  let hups = 0;
  process.on('SIGHUP', () => {
    hups += 1;
  });
  const readyDir = env.STANDIN_SERVE_READY_DIR;
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/.well-known/cell/health') {
      healthProbes += 1;
      const ready = !readyDir || existsSync(join(readyDir, application));
      res.writeHead(ready ? 200 : 503, { 'content-type': 'application/json' });
      const deploymentDir = env.STANDIN_SERVE_DEPLOYMENT_DIR;
      const file = deploymentDir ? join(deploymentDir, application) : null;
      const deployment = file && existsSync(file) ? readFileSync(file, 'utf8').trim() : undefined;
      res.end(JSON.stringify({ status: ready ? 'ready' : 'starting', application, node, deployment }));
    } else if (path === '/env') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ env: contractEnv(env), healthProbes, hups, pid: process.pid }));
    } else if (/^\/status\/[1-5]\d\d$/.test(path)) {
      // A known status with a known body (`status NNN`), for counting tests.
      res.writeHead(Number(path.slice(8)), { 'content-type': 'text/plain' });
      res.end(`status ${path.slice(8)}`);
    } else {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(`standin ${application}`);
    }
  });
  server.listen(port, host, () => {
    process.stdout.write(`cell (stand-in) serving ${application} on ${host}:${port}\n`);
    if (listed('STANDIN_SERVE_CHILD_APPS')) startChild();
    const noise = Number(env.STANDIN_SERVE_NOISE_BYTES ?? 0);
    if (noise > 0) {
      const line = `${'x'.repeat(99)}\n`;
      process.stdout.write(line.repeat(Math.ceil(noise / line.length)));
      process.stdout.write('noise end\n');
    }
  });
  server.on('error', (err) => {
    process.stderr.write(`cell (stand-in): cannot listen on ${host}:${port}: ${err.message}\n`);
    process.exit(1);
  });
  if (listed('STANDIN_SERVE_IGNORE_TERM_APPS')) process.on('SIGTERM', () => {});
  else {
    process.once('SIGTERM', () => {
      process.stdout.write('standin: stopping\n');
      server.close(() => process.exit(0));
      server.closeAllConnections();
    });
  }
}

function contractEnv(env: NodeJS.ProcessEnv): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(env)) {
    if (name.startsWith('CELL_') || name.startsWith('SVC_S3_') || name.startsWith('STANDIN_'))
      out[name] = value;
  }
  out.leaked = Object.keys(env).filter((name) => name.startsWith('SVC_') && !name.startsWith('SVC_S3_'));
  return out;
}

/** A process of its own, in the stand-in's process group, as workerd is in the runtime's. */
function startChild(): void {
  const parent = process.pid;
  const child = spawn(
    process.execPath,
    [
      '-e',
      // Ends by itself once orphaned for five minutes, so a failed test leaves nothing behind.
      `let at=0;setInterval(()=>{if(process.ppid===${parent})return;at||=Date.now();if(Date.now()-at>300000)process.exit(1)},500)`,
    ],
    { stdio: 'ignore' },
  );
  process.stdout.write(`child ${child.pid}\n`);
}

/** A stand-in whose supervisor is gone ends (after `afterMs`), so no test leaves one behind. */
function exitWhenOrphaned(afterMs: number): void {
  const parent = process.ppid;
  let orphanedAt = 0;
  setInterval(() => {
    if (process.ppid === parent) return;
    orphanedAt ||= Date.now();
    if (Date.now() - orphanedAt >= afterMs) process.exit(1);
  }, 200).unref();
}
