// Application limits (docs/supervisor.md "Limits"): finding the controllers, degrading where there
// are none, what is written into an application's cgroups, and a memory breach becoming an event.
// The cgroup folders are plain folders here (the kernel's files are stand-ins written by the
// test); test/app-limits.test.ts runs the same code against the kernel's cgroups.

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { EventInput } from '../../observability/events.ts';
import {
  APPLICATIONS_LOOK_MS,
  ApplicationLimits,
  detectControllers,
  limitSampleMs,
  lookDue,
} from './limits.ts';

const quietLog = { info() {}, warn() {} };

test('no cgroup mounts: nothing enforced, each controller named with why', () => {
  const found = detectControllers('n1', { mounts: 'proc /proc proc rw 0 0\n', selfCgroup: '0::/\n' });
  assert.equal(found.memory, null);
  assert.equal(found.cpu, null);
  assert.deepEqual(found.missing, [
    'memory: no cgroup controller mounted',
    'cpu: no cgroup controller mounted',
  ]);
});

test('a cgroup2 mount that does not offer the controllers: nothing enforced, and why', () => {
  const mount = mkdtempSync(join(tmpdir(), 'svc-cg2-'));
  writeFileSync(join(mount, 'cgroup.controllers'), 'pids io\n');
  const found = detectControllers('n1', {
    mounts: `cgroup2 ${mount} cgroup2 rw 0 0\n`,
    selfCgroup: '0::/\n',
  });
  assert.equal(found.memory, null);
  assert.match(
    found.missing[0] ?? '',
    /^memory: the cgroup2 hierarchy at .* does not offer the memory controller$/,
  );
  assert.match(found.missing[1] ?? '', /^cpu: .* does not offer the cpu controller$/);
});

test("cgroup v1: the node's folder goes inside the daemon's own cgroup", () => {
  const memory = mkdtempSync(join(tmpdir(), 'svc-cg1-'));
  const cpu = mkdtempSync(join(tmpdir(), 'svc-cg1-'));
  mkdirSync(join(memory, 'outer', 'own'), { recursive: true });
  const found = detectControllers('node/1', {
    mounts: `cgroup ${memory} cgroup rw,relatime,memory 0 0\ncgroup ${cpu} cgroup rw,relatime,cpu 0 0\n`,
    selfCgroup: '4:memory:/outer/own\n1:cpu:/\n0::/\n',
  });
  assert.deepEqual(found.missing, []);
  assert.deepEqual(found.memory, { version: 1, base: join(memory, 'outer', 'own', 'svc-node_1') });
  assert.deepEqual(found.cpu, { version: 1, base: join(cpu, 'svc-node_1') });
});

test('a started group gets its limits and its processes; a counted OOM kill is one limit.memory event', () => {
  const memory = mkdtempSync(join(tmpdir(), 'svc-cg1-'));
  const cpu = mkdtempSync(join(tmpdir(), 'svc-cg1-'));
  const events: EventInput[] = [];
  const limits = new ApplicationLimits({
    settings: { memoryMb: 256, cpuMs: 0, cpus: 2 },
    controllers: { memory: { version: 1, base: memory }, cpu: { version: 1, base: cpu }, missing: [] },
    log: quietLog,
    events: { emit: (e) => events.push(e) },
    sampleMs: 60_000,
  });
  try {
    limits.started('shop', process.pid);
    assert.equal(
      readFileSync(join(memory, 'shop', 'memory.limit_in_bytes'), 'utf8'),
      String(256 * 1024 * 1024),
    );
    assert.equal(readFileSync(join(cpu, 'shop', 'cpu.cfs_quota_us'), 'utf8'), '200000');
    assert.equal(readFileSync(join(cpu, 'shop', 'cpu.cfs_period_us'), 'utf8'), '100000');
    assert.equal(readFileSync(join(cpu, 'cpu.shares'), 'utf8'), String(1024 * availableParallelism()));
    assert.equal(events.length, 0);
    writeFileSync(
      join(memory, 'shop', 'memory.oom_control'),
      'oom_kill_disable 0\nunder_oom 0\noom_kill 2\n',
    );
    limits.exited('shop', process.pid);
    assert.deepEqual(events, [{ kind: 'limit.memory', application: 'shop', limitMb: 256, killed: 2 }]);
  } finally {
    limits.close();
  }
});

test('no quota unless one is set: cfs_quota_us -1 on cgroup v1, max on v2', () => {
  const v1 = mkdtempSync(join(tmpdir(), 'svc-cg1-'));
  const v2 = mkdtempSync(join(tmpdir(), 'svc-cg2-'));
  for (const [version, base] of [
    [1, v1],
    [2, v2],
  ] as const) {
    const limits = new ApplicationLimits({
      settings: { memoryMb: 512, cpuMs: 0, cpus: 0 },
      controllers: { memory: null, cpu: { version, base }, missing: [] },
      log: quietLog,
      sampleMs: 60_000,
    });
    limits.started('shop', process.pid);
    limits.close();
  }
  assert.equal(readFileSync(join(v1, 'shop', 'cpu.cfs_quota_us'), 'utf8'), '-1');
  assert.equal(readFileSync(join(v2, 'shop', 'cpu.max'), 'utf8'), 'max 100000');
  assert.equal(
    readFileSync(join(v2, 'cpu.weight'), 'utf8'),
    String(Math.min(10_000, 100 * availableParallelism())),
  );
});

test('without controllers the node says once at start what is not enforced, and why', () => {
  const warnings: { obj: object; msg: string }[] = [];
  const limits = new ApplicationLimits({
    settings: { memoryMb: 512, cpuMs: 30_000, cpus: 0 },
    controllers: detectControllers('n1', { mounts: '', selfCgroup: '' }),
    log: { info() {}, warn: (obj: object, msg: string) => void warnings.push({ obj, msg }) },
    sampleMs: 60_000,
  });
  try {
    // A process group still starts and is watched: nothing refuses it.
    limits.started('shop', process.pid);
    limits.exited('shop', process.pid);
    assert.equal(warnings.length, 1);
    assert.equal(
      warnings[0]?.msg,
      'application limits not enforced on this machine: memory, cpu (docs/supervisor.md "Limits")',
    );
    assert.deepEqual(warnings[0]?.obj, {
      missing: ['memory: no cgroup controller mounted', 'cpu: no cgroup controller mounted'],
    });
  } finally {
    limits.close();
  }
});

test('the sampler reads a tenth of the CPU-time limit apart, between 1 s and 5 s', () => {
  assert.deepEqual(
    [30_000, 2_000, 12_000, 300_000, 0].map(limitSampleMs),
    [3_000, 1_000, 1_200, 5_000, 5_000],
  );
});

test('cgroup v1 cpuacct mounted apart from cpu gets a folder of its own; mounted with it, it is cpu', () => {
  const memory = mkdtempSync(join(tmpdir(), 'svc-cg1-'));
  const cpu = mkdtempSync(join(tmpdir(), 'svc-cg1-'));
  const acct = mkdtempSync(join(tmpdir(), 'svc-cg1-'));
  const apart = detectControllers('n1', {
    mounts: `cgroup ${memory} cgroup rw,memory 0 0\ncgroup ${cpu} cgroup rw,cpu 0 0\ncgroup ${acct} cgroup rw,cpuacct 0 0\n`,
    selfCgroup: '4:memory:/\n2:cpuacct:/\n1:cpu:/\n',
  });
  assert.deepEqual(apart.cpuacct, { version: 1, base: join(acct, 'svc-n1') });
  assert.deepEqual(apart.missing, []);
  const together = detectControllers('n1', {
    mounts: `cgroup ${memory} cgroup rw,memory 0 0\ncgroup ${cpu} cgroup rw,cpu,cpuacct 0 0\n`,
    selfCgroup: '4:memory:/\n1:cpu,cpuacct:/\n',
  });
  assert.equal(together.cpuacct, together.cpu);
  assert.deepEqual(together.cpu, { version: 1, base: join(cpu, 'svc-n1') });
});

test('a sample looks at the applications when their CPU time is unknown, grew by the gate, or after the longest wait', () => {
  assert.equal(lookDue({ usedMs: null, lastUsedMs: 5, gateMs: 300, sinceLookMs: 0 }), true);
  assert.equal(lookDue({ usedMs: 5, lastUsedMs: null, gateMs: 300, sinceLookMs: 0 }), true);
  assert.equal(lookDue({ usedMs: 299, lastUsedMs: 0, gateMs: 300, sinceLookMs: 3_000 }), false);
  assert.equal(lookDue({ usedMs: 300, lastUsedMs: 0, gateMs: 300, sinceLookMs: 3_000 }), true);
  assert.equal(
    lookDue({ usedMs: 0, lastUsedMs: 0, gateMs: 300, sinceLookMs: APPLICATIONS_LOOK_MS - 1 }),
    false,
  );
  assert.equal(lookDue({ usedMs: 0, lastUsedMs: 0, gateMs: 300, sinceLookMs: APPLICATIONS_LOOK_MS }), true);
});

test("an idle node's applications are not looked at each sample: the node's CPU total gates them", () => {
  const memory = mkdtempSync(join(tmpdir(), 'svc-cg1-'));
  const cpu = mkdtempSync(join(tmpdir(), 'svc-cg1-'));
  const acct = mkdtempSync(join(tmpdir(), 'svc-cg1-'));
  const events: EventInput[] = [];
  let now = 0;
  const limits = new ApplicationLimits({
    settings: { memoryMb: 256, cpuMs: 30_000, cpus: 0 },
    controllers: {
      memory: { version: 1, base: memory },
      cpu: { version: 1, base: cpu },
      cpuacct: { version: 1, base: acct },
      missing: [],
    },
    log: quietLog,
    events: { emit: (e) => events.push(e) },
    sampleMs: 3_000,
    now: () => now,
  });
  // The node's total (ns) and the application's own count: the kernel's files, written here.
  const used = (nodeMs: number, appMs: number) => {
    writeFileSync(join(acct, 'cpuacct.usage'), `${nodeMs * 1e6}\n`);
    writeFileSync(join(acct, 'shop', 'cpuacct.usage'), `${appMs * 1e6}\n`);
  };
  const oomKills = (n: number) =>
    writeFileSync(
      join(memory, 'shop', 'memory.oom_control'),
      `oom_kill_disable 0\nunder_oom 0\noom_kill ${n}\n`,
    );
  try {
    limits.started('shop', process.pid);
    // A folder in the accounting hierarchy too, where the group is placed.
    assert.ok(statSync(join(acct, 'shop')).isDirectory());
    // Past the whole scans of /proc that follow a start (each of those looks at every group).
    const T = 100_000;
    now = T;
    used(1_000, 10);
    limits.sampleNow(); // the first sample looks: nothing known yet
    oomKills(1);
    used(1_100, 20);
    now = T + 3_000;
    limits.sampleNow();
    assert.deepEqual(events, [], 'under the gate (a tenth of a sample, 300 ms): not looked at');
    used(1_350, 30);
    now = T + 6_000;
    limits.sampleNow();
    assert.deepEqual(events, [{ kind: 'limit.memory', application: 'shop', limitMb: 256, killed: 1 }]);
    oomKills(2);
    used(1_360, 40);
    now = T + 6_000 + APPLICATIONS_LOOK_MS - 1;
    limits.sampleNow();
    assert.equal(events.length, 1, 'idle and the last look recent: not looked at');
    now = T + 6_000 + APPLICATIONS_LOOK_MS;
    limits.sampleNow();
    assert.equal(events.length, 2, 'the longest wait without a look is over');
  } finally {
    limits.close();
  }
});
