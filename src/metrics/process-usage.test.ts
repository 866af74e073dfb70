// docs/observability.md "Prometheus metrics": a runtime process's CPU and memory are its process
// group's, read from /proc: a written /proc tree (command names with spaces and parentheses, other
// groups left out, a process gone while listed), and a real process group of two processes.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { waitFor } from '../../test/helpers/svc.ts';
import { parseStat, processGroupUsage, residentBytes } from './process-usage.ts';

/** A /proc/<pid>/stat line: group, then utime stime cutime cstime in ticks. */
function statLine(pid: number, comm: string, group: number, [u, s, cu, cs]: number[]): string {
  const fields = ['S', '1', String(group), String(group), '0', '-1', '4194560', '10', '0', '0', '0'];
  return `${pid} (${comm}) ${[...fields, u, s, cu, cs, '20', '0', '3', '0', '100', '5000', '300'].join(' ')}\n`;
}

describe('process group usage', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-proc-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('sums the CPU times and resident sizes of the groups asked for, from /proc', async () => {
    const proc = join(dir, 'proc');
    const write = (pid: number, stat: string | null, rssKb?: number) => {
      mkdirSync(join(proc, String(pid)), { recursive: true });
      if (stat !== null) writeFileSync(join(proc, String(pid), 'stat'), stat);
      if (rssKb !== undefined)
        writeFileSync(join(proc, String(pid), 'status'), `Name:\tx\nVmRSS:\t  ${rssKb} kB\nThreads:\t1\n`);
    };
    write(100, statLine(100, 'node', 100, [150, 50, 0, 0]), 40_000);
    write(101, statLine(101, 'cell front) (x', 100, [20, 10, 70, 0]), 10_000);
    write(102, statLine(102, 'workerd', 100, [1000, 0, 0, 0])); // a zombie: no VmRSS
    write(200, statLine(200, 'workerd', 200, [300, 0, 0, 0]), 7);
    write(300, statLine(300, 'other', 300, [999, 0, 0, 0]), 999);
    write(400, null); // exited while listed
    mkdirSync(join(proc, 'self'), { recursive: true });
    const usage = await processGroupUsage([100, 200, 500], proc);
    assert.deepEqual(Object.fromEntries(usage), {
      100: { cpuSeconds: 13, residentBytes: 50_000 * 1024 },
      200: { cpuSeconds: 3, residentBytes: 7 * 1024 },
    });
    assert.deepEqual(await processGroupUsage([100], join(dir, 'no-proc')), new Map());
    assert.equal(parseStat('garbage'), null);
    assert.equal(residentBytes('Name:\tx\n'), 0);
  });

  test('a real process group: both processes counted, and the CPU they used', async () => {
    // A leader that uses 300 ms of CPU, then idles beside a child it started.
    const leader = spawn(
      process.execPath,
      [
        '-e',
        `const c = require('node:child_process').spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
         const used = () => { const u = process.cpuUsage(); return u.user + u.system; };
         while (used() < 300_000);
         console.log(c.pid); setInterval(() => {}, 1000);`,
      ],
      { detached: true, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    try {
      let out = '';
      leader.stdout!.on('data', (chunk) => {
        out += chunk;
      });
      const child = Number(await waitFor(() => /^\d+\n/.exec(out)?.[0], 'the child pid'));
      const usage = (await processGroupUsage([leader.pid!])).get(leader.pid!);
      const rss = (pid: number) => residentBytes(readFileSync(`/proc/${pid}/status`, 'utf8'));
      assert.ok(usage, 'the group is found');
      assert.ok(usage.residentBytes >= rss(leader.pid!) + rss(child) / 2, JSON.stringify(usage));
      // The kernel counts in ticks of 10 ms.
      assert.ok(usage.cpuSeconds >= 0.29, `${usage.cpuSeconds} s of CPU`);
    } finally {
      process.kill(-leader.pid!, 'SIGKILL');
    }
  });
});
