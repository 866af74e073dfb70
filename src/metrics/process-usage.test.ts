// docs/observability.md "Prometheus metrics": a runtime process's CPU and memory are its process
// group's, read from /proc: a written /proc tree (command names with spaces and parentheses, other
// groups left out, a process gone while listed), the kernel's units, and a real process group of
// two processes, whose resident sizes the kernel also reports as VmRSS.

import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { waitFor } from '../../test/helpers/svc.ts';
import { parseStat, processGroupUsage, statUnits } from './process-usage.ts';

/** A /proc/<pid>/stat line: group, utime stime cutime cstime in ticks, rss in pages. */
function statLine(pid: number, comm: string, group: number, [u, s, cu, cs]: number[], rss: number): string {
  const fields = ['S', '1', String(group), String(group), '0', '-1', '4194560', '10', '0', '0', '0'];
  return `${pid} (${comm}) ${[...fields, u, s, cu, cs, '20', '0', '3', '0', '100', '5000', rss, '0'].join(' ')}\n`;
}

describe('process group usage', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-proc-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('sums the CPU times and resident sizes of the groups asked for, from /proc', () => {
    const proc = join(dir, 'proc');
    const write = (pid: number, stat: string | null) => {
      mkdirSync(join(proc, String(pid)), { recursive: true });
      if (stat !== null) writeFileSync(join(proc, String(pid), 'stat'), stat);
    };
    write(100, statLine(100, 'node', 100, [150, 50, 0, 0], 10_000));
    write(101, statLine(101, 'cell front) (x', 100, [20, 10, 40, 30], 2_500));
    write(102, statLine(102, 'workerd', 100, [1000, 0, 0, 0], 0)); // a zombie holds no pages
    write(200, statLine(200, 'workerd', 200, [300, 0, 0, 0], 7));
    write(300, statLine(300, 'other', 300, [999, 0, 0, 0], 999));
    write(400, null); // exited while listed
    mkdirSync(join(proc, 'self'), { recursive: true });
    const units = { ticksPerSecond: 100, pageBytes: 4096 };
    const usage = processGroupUsage([100, 200, 500], proc, units);
    assert.deepEqual(Object.fromEntries(usage), {
      100: { cpuSeconds: 13, residentBytes: 12_500 * 4096 },
      200: { cpuSeconds: 3, residentBytes: 7 * 4096 },
    });
    assert.deepEqual(processGroupUsage([100], join(dir, 'no-proc'), units), new Map());
    assert.equal(parseStat('garbage'), null);
    assert.equal(parseStat('1 (x) S 1'), null);
  });

  test("this machine's units are the kernel's: the page size and clock ticks getconf names", () => {
    const getconf = (name: string) => Number(execFileSync('getconf', [name], { encoding: 'utf8' }));
    assert.deepEqual(statUnits(), { ticksPerSecond: getconf('CLK_TCK'), pageBytes: getconf('PAGESIZE') });
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
      const usage = processGroupUsage([leader.pid!]).get(leader.pid!);
      const rss = (pid: number) =>
        Number(/^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;
      assert.ok(usage, 'the group is found');
      assert.ok(usage.residentBytes >= rss(leader.pid!) + rss(child) / 2, JSON.stringify(usage));
      // The kernel counts in ticks of 10 ms.
      assert.ok(usage.cpuSeconds >= 0.29, `${usage.cpuSeconds} s of CPU`);
    } finally {
      process.kill(-leader.pid!, 'SIGKILL');
    }
  });
});
