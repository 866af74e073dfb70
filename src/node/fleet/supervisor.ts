// The process supervisor (docs/api.md "State" `processes`; docs/cli.md "svc sail":
// `--cell-bin`, `--cell-env`, the port range, `--port-quarantine-ms`, `--bind-host`,
// `--output-bytes`, `--observability`; docs/runtime.md).
//
// One `cell serve` per application placed on this node. The reconcile loop calls `apply` with
// what should run; the supervisor starts what is missing, stops what is no longer wanted and
// restarts what exits on its own (with backoff, `crashloop` after repeated fast exits). A process
// is ready only while its `/.well-known/cell/health` answers 200. Each process leads its own
// process group: SIGTERM goes to the runtime alone (it drains and stops its workerd children
// itself), SIGKILL after the deadline and after every exit goes to the whole group, so nothing it
// started outlives it.

import { type ChildProcess, spawn } from 'node:child_process';
import { connect, createServer } from 'node:net';
import { finished } from 'node:stream/promises';
import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { FrontHealth } from '../../../runtime/src/host/health-asks.ts';
import { RetriedStateFile } from '../../config/state-file.ts';
import { type EventSink, eventTail } from '../../observability/events.ts';
import { runtimeReportReader } from '../../observability/runtime-reports.ts';
import type { ProcessStatus } from '../../registry/records.ts';
import {
  HEALTH_PATH,
  runtimeBaseEnvironment,
  SUPERVISOR_HEADER,
  serveIdentityEnvironment,
  serveOptionsEnvironment,
} from '../../runtime-contract/environment.ts';
import { OutputTail, RuntimeProbe } from '../deploys/runner.ts';
import type { ApplicationLimits } from './limits.ts';
import { persistentPortPool } from './port-file.ts';
import {
  AdoptedProcess,
  groupAlive,
  type LeftoverEntry,
  processAlive,
  processFileText,
  readLeftovers,
  signalGroup,
  stopLeftovers,
} from './process-leftovers.ts';
import { DEFAULT_RESTART_POLICY, judgeExit, PortPool, type RestartPolicy } from './process-policy.ts';

/**
 * How long a runtime process whose daemon is gone keeps serving without a supervisor's health
 * probe before it drains and exits (CELL_UNSUPERVISED_EXIT_MS, unless `--cell-env` names it): a
 * restarted daemon adopts it well within this, a daemon that stays dead leaves nothing running
 * past it.
 */
export const UNSUPERVISED_EXIT_MS = 300_000;

/** How long an exit waits for the rest of the process's output. */
const OUTPUT_AFTER_EXIT_MS = 250;

/** Resolves once both output streams ended (or were never there), or after `boundMs`. */
function outputEnded(child: RuntimeChild, boundMs: number): Promise<unknown> {
  const streams = [child.stdout, child.stderr].filter((stream) => stream !== null);
  return Promise.race([
    Promise.all(streams.map((stream) => finished(stream).catch(() => {}))),
    delay(boundMs, undefined, { ref: false }),
  ]);
}

/** A runtime process: one this daemon spawned, or one it adopted from a previous run. */
interface RuntimeChild {
  readonly pid?: number | undefined;
  readonly stdout: NodeJS.ReadableStream | null;
  readonly stderr: NodeJS.ReadableStream | null;
  kill(signal?: NodeJS.Signals): boolean;
  once(event: 'exit', listener: (code: number | null, signal: NodeJS.Signals | null) => void): unknown;
}

export interface SupervisorOptions {
  cellBin: string;
  /** `--cell-env`: handed to every process. */
  cellEnv: Record<string, string>;
  bindHost: string;
  portRange: [number, number];
  portQuarantineMs: number;
  outputBytes: number;
  nodeId: string;
  /** `SVC_S3_*`: the bucket the runtime reads, as the node hands it over. */
  bucketEnv: Record<string, string>;
  /** The node's runtime host socket (CELL_HOST_SOCKET); without it each runtime starts its own host. */
  hostSocket?: string;
  /** Where runtimes keep Durable Objects (CELL_OBJECTS_DIR), unless `cellEnv` names it. */
  objectsDir?: string;
  log: Pick<Logger, 'info' | 'warn' | 'error'>;
  /** Gives each process `CELL_OTEL=1` unless `cellEnv` states `CELL_OTEL`. */
  observability?: boolean;
  /** Where process started / ready / exited / crash-looping / never-ready events go. */
  events?: EventSink;
  /** How long after a start without a healthy answer `process.never-ready` is reported (30 s). */
  neverReadyMs?: number;
  restart?: Partial<RestartPolicy>;
  /** Health probe interval while a process is not ready. */
  healthPollMs?: number;
  /** Health probe interval once it is ready (a process can stop being ready). */
  healthCheckMs?: number;
  /**
   * Asks a ready process for its health over its runtime host connection (the node's runtime
   * host, runtime/src/host/health-asks.ts): null when it is not connected or does not answer in
   * time. Absent: every ready check is an HTTP probe.
   */
  askHealth?: (application: string, timeoutMs: number) => Promise<FrontHealth | null>;
  /** How long a ready process may go without an HTTP probe while it answers asks (READY_HTTP_PROBE_MS). */
  readyHttpProbeMs?: number;
  /** Between SIGTERM and SIGKILL of the process group. */
  stopGraceMs?: number;
  /** The first wait before a process lagging its desired deployment is told again (RETELL_FIRST_MS). */
  retellFirstMs?: number;
  /**
   * Where the process groups it runs are noted (in the node's state directory), so that the next
   * run stops what a killed daemon left behind before starting anything (process-leftovers.ts).
   */
  processFile?: string;
  /**
   * Where the port each application holds or last released is noted (in the node's state
   * directory), so that the next run gives each application the same port (port-file.ts).
   */
  portFile?: string;
  /**
   * Called when a process turns ready or stops being ready, so the node can publish routing at
   * once rather than at its next pass (the targets in bench/RESULTS.md: first deploy).
   */
  onReadinessChange?: (application: string, ready: boolean) => void;
  /** Where each application's secrets file is (src/secrets/keeper.ts); handed over as a path only. */
  secretsFile?: (application: string) => string;
  /** Puts each process group under the application limits and watches it (limits.ts). */
  limits?: Pick<ApplicationLimits, 'started' | 'exited' | 'close'>;
}

export interface DesiredProcess {
  application: string;
  /**
   * The deployment the registry says is selected, when known. A change is told to the running
   * process (`notify`), so a deploy made through another node is picked up without the runtime
   * polling the bucket.
   */
  deployment?: string;
}

const HEALTH_TIMEOUT_MS = 2_000;

/**
 * A process whose health still names another deployment than the one desired this long after it
 * was told is told again (SIGHUP), the wait doubling up to RETELL_MAX_MS: a signal that was lost,
 * or a look that failed (the bucket did not answer), costs one reconcile pass, not the runtime's
 * safety poll; one that cannot switch (its new deployment fails to start here) is told no more
 * often than the runtime would look anyway.
 */
export const RETELL_FIRST_MS = 5_000;
export const RETELL_MAX_MS = 300_000;

/** One application's runtime process across its restarts. */
interface Managed {
  application: string;
  port: number | null;
  runtimeVersion: string;
  state: ProcessStatus['state'];
  ready: boolean;
  restarts: number;
  fastExits: number;
  child: RuntimeChild | null;
  exited: Promise<void>;
  startedAtMs: number;
  tail: OutputTail;
  /** The pending restart or health probe. */
  timer: NodeJS.Timeout | null;
  stopping: Promise<void> | null;
  /** A start in progress; stopping waits for it, so it sees the port and child it settled on. */
  launching: Promise<void> | null;
  /** The deployment last desired for it (DesiredProcess.deployment). */
  deployment: string | undefined;
  /** Its health answered at all: it has its SIGHUP handler, so a signal cannot end it. */
  answered: boolean;
  /**
   * Until when, after a SIGHUP, the process is probed every SWITCH_PROBE_MS while its health still
   * names the deployment it served when signalled: its switch is seen at once, not at the next
   * 2 s probe (svc deploy and the routing wait on it).
   */
  switchWatchUntilMs: number;
  servingWhenSignalled: string | undefined;
  /** A notify waits for the process to answer before it is signalled. */
  notifyPending: boolean;
  /** When a process still serving another deployment is told again, and how often it was. */
  retellAtMs: number;
  retold: number;
  /** The current child was reported as never turning ready. */
  notReadyReported: boolean;
  /** What the last health answer said it serves. */
  serving?: string;
  /** When its health endpoint was last probed (asks in between do not count). */
  probedAtMs: number;
  /** Why it is not ready, for the node record (ProcessStatus `detail`). */
  detail?: string;
}

/** A detail is one short paragraph, not a log. */
const DETAIL_CHARS = 600;

/** A process not ready this long after it started is reported, with its output. */
export const NEVER_READY_MS = 30_000;
/**
 * How often a ready process is probed: a safety net. Each probe costs the daemon and the front
 * about 1.3 ms of CPU: at 2 s that was 2.3 s per idle application per hour, at 30 s 0.16 s, most
 * of the 0.2 s an idle application may cost (bench/RESULTS.md "Idle CPU"). An exit is seen at
 * once without a probe, a switch is watched closely after its signal, and a front tells the
 * runtime host when its health changes (`healthMoved`), which probes it at once; what waits on
 * this is a process that hangs without exiting (SIGSTOP, a deadlock), a front too old to tell,
 * and the unsupervised exit (UNSUPERVISED_EXIT_MS), which must stay well above it.
 */
export const READY_PROBE_MS = 120_000;
/**
 * A ready process is asked over its runtime host connection (`askHealth`) rather than probed:
 * no connection to open, about a third less CPU on each side (0.6 ms of the daemon's and 0.25 ms
 * of the front's, against 0.9-1.0 and 0.36-0.38 ms; bench/RESULTS.md "Idle CPU"). Its health endpoint is
 * still probed at least this often, so a listener that stopped taking connections while the
 * process answers its host is seen, and whenever an ask is not answered with the same ready
 * deployment within HEALTH_ASK_TIMEOUT_MS.
 */
export const READY_HTTP_PROBE_MS = 600_000;
export const HEALTH_ASK_TIMEOUT_MS = 1_000;
/** How often, and for how long at most, a process told to switch is probed until it has. */
const SWITCH_PROBE_MS = 50;
/**
 * How many probes a second go to processes not ready yet, all of them together: each is probed
 * every 200 ms (`healthPollMs`) while few start, less often when many do. At 1,000 starting
 * processes, 200 ms each was 5,000 probes a second, which took the daemon's loop from the
 * runtime host's calls those processes were waiting on to become ready.
 */
export const NOT_READY_PROBES_PER_SECOND = 100;
const SWITCH_WATCH_MS = 5_000;

export class Supervisor {
  readonly #options: SupervisorOptions;
  readonly #policy: RestartPolicy;
  readonly #retellFirstMs: number;
  readonly #ports: PortPool;
  readonly #probe = new RuntimeProbe();
  /** The runtime's version being asked now, which every start meanwhile waits for (#runtimeVersion). */
  #versionAsked: Promise<string | null> | null = null;
  readonly #managed = new Map<string, Managed>();
  #desired = new Set<string>();
  #closed = false;
  #sweptLeftovers = false;
  /** The process file (`processFile`), written aside and renamed, retried while the disk refuses. */
  #processNote: RetriedStateFile | null;
  /** The port file (`portFile`), retried likewise. */
  #portNote: RetriedStateFile | null;
  /** Calls of `apply` run one at a time, in order. */
  #applying: Promise<void> = Promise.resolve();

  constructor(options: SupervisorOptions) {
    this.#options = options;
    this.#retellFirstMs = options.retellFirstMs ?? RETELL_FIRST_MS;
    this.#policy = { ...DEFAULT_RESTART_POLICY, ...options.restart };
    this.#processNote = options.processFile
      ? new RetriedStateFile(options.processFile, options.log, 'runtime processes')
      : null;
    const noted = options.portFile
      ? persistentPortPool(options.portFile, options.portRange, options.portQuarantineMs, options.log)
      : null;
    this.#portNote = noted?.note ?? null;
    this.#ports = noted ?? new PortPool(options.portRange, options.portQuarantineMs);
  }

  /** Makes the running set what `desired` names: starts the missing, stops the rest. */
  apply(desired: readonly DesiredProcess[]): Promise<void> {
    const names = new Set(desired.map((d) => d.application));
    this.#applying = this.#applying.then(async () => {
      this.#followDeployments(desired);
      await this.#apply(names);
      this.#processNote?.retry();
      this.#portNote?.retry();
      // A process started now reads the selector itself, and an adopted one was told to look
      // again: what it was started for is what it knows.
      for (const d of desired) {
        const m = this.#managed.get(d.application);
        if (m && m.deployment === undefined) m.deployment = d.deployment;
      }
      this.#retellLagging(Date.now());
    });
    return this.#applying;
  }

  /**
   * Tells the application's runtime process that its selector moved (SIGHUP): it looks at the
   * selector at once instead of at its next safety poll. A process that has not answered its
   * health yet may not have its handler in place, so it is signalled once it does.
   */
  notify(application: string): void {
    const m = this.#managed.get(application);
    if (!m || m.stopping) return;
    m.retold = 0;
    m.retellAtMs = Date.now() + this.#retellFirstMs;
    if (m.child && m.answered) this.#signalSwitch(m, m.child);
    else m.notifyPending = true;
  }

  /**
   * The application's runtime process said (over the runtime host's socket) that its health
   * answer changed: it is probed now, and what the probe answers is acted on as any probe's.
   * This is what lets a ready process be probed only every READY_PROBE_MS.
   */
  healthMoved(application: string): void {
    const m = this.#managed.get(application);
    const child = m?.child;
    if (!m || !child || m.stopping || !this.#current(m)) return;
    // An adopted process has no exit event: a notice may be its connection ending as it exits.
    if (child instanceof AdoptedProcess) child.check();
    if (m.child !== child) return;
    this.#schedule(m, 0, () => this.#probeHealth(m, child));
  }

  /** SIGHUP, then probes soon and often until the health names another deployment. */
  #signalSwitch(m: Managed, child: RuntimeChild): void {
    signal(child, 'SIGHUP');
    m.switchWatchUntilMs = Date.now() + SWITCH_WATCH_MS;
    m.servingWhenSignalled = m.serving;
    this.#schedule(m, SWITCH_PROBE_MS, () => this.#probeHealth(m, child));
  }

  /**
   * Tells again each process whose health names another deployment than the one desired (see
   * RETELL_FIRST_MS). Runs on every apply, so only while the registry answers: the first pass
   * after an outage tells at once whatever was due during it.
   */
  #retellLagging(nowMs: number): void {
    for (const m of this.#managed.values()) {
      // A process that never served anything started after the selector existed and reads it
      // itself (and looks again soon when that failed).
      if (m.stopping || !m.child || !m.answered || m.deployment === undefined || m.serving === undefined)
        continue;
      if (m.serving === m.deployment) {
        m.retold = 0;
        continue;
      }
      if (nowMs < m.retellAtMs) continue;
      signal(m.child, 'SIGHUP');
      m.retold += 1;
      m.retellAtMs = nowMs + Math.min(this.#retellFirstMs * 2 ** (m.retold - 1), RETELL_MAX_MS);
    }
  }

  #followDeployments(desired: readonly DesiredProcess[]): void {
    for (const d of desired) {
      const m = this.#managed.get(d.application);
      if (!m || d.deployment === undefined || d.deployment === m.deployment) continue;
      m.deployment = d.deployment;
      this.notify(d.application);
    }
  }

  /** What runs (or is being started or stopped), by application name. */
  statuses(): ProcessStatus[] {
    return [...this.#managed.values()]
      .sort((a, b) => (a.application < b.application ? -1 : a.application > b.application ? 1 : 0))
      .map((m) => ({
        application: m.application,
        port: m.port ?? 0,
        runtimeVersion: m.runtimeVersion,
        ready: m.ready,
        state: m.state,
        restarts: m.restarts,
        ...(m.child?.pid !== undefined ? { pid: m.child.pid } : {}),
        ...(m.serving !== undefined ? { deployment: m.serving } : {}),
        ...(!m.ready && m.detail !== undefined ? { detail: m.detail } : {}),
      }));
  }

  /** The last `outputBytes` of the application's output across its restarts; null if not managed. */
  outputTail(application: string): string | null {
    return this.#managed.get(application)?.tail.text() ?? null;
  }

  /** Stops every process and starts none again. */
  async stop(): Promise<void> {
    this.#closed = true;
    this.#desired = new Set();
    await this.#applying;
    await Promise.all([...this.#managed.values()].map((m) => this.#retire(m)));
    this.#options.limits?.close();
  }

  async #apply(names: Set<string>): Promise<void> {
    if (this.#closed) return;
    if (!this.#sweptLeftovers) await this.#sweepLeftovers(names);
    this.#desired = names;
    for (const m of this.#managed.values()) {
      if (!names.has(m.application) && !m.stopping) void this.#retire(m);
    }
    const starting: Promise<void>[] = [];
    for (const application of [...names].sort()) {
      if (!this.#managed.has(application)) starting.push(this.#launch(this.#adopt(application)));
    }
    await Promise.all(starting);
  }

  /**
   * Adopts the processes a previous run left serving an application wanted now, and stops the
   * rest, before anything is started.
   */
  async #sweepLeftovers(names: Set<string>): Promise<void> {
    this.#sweptLeftovers = true;
    const file = this.#options.processFile;
    if (!file) return;
    const rest: LeftoverEntry[] = [];
    for (const e of readLeftovers(file)) {
      if (!groupAlive(e.pid)) continue;
      if (names.has(e.application) && !this.#managed.has(e.application) && (await this.#adoptLeftover(e)))
        continue;
      rest.push(e);
    }
    const stopped = await stopLeftovers(rest, this.#options.stopGraceMs ?? 30_000);
    for (const e of stopped) {
      this.#options.log.warn(
        { application: e.application, pid: e.pid },
        'stopped a runtime process a previous run of the daemon left behind',
      );
    }
    this.#noteProcesses();
  }

  /**
   * Takes over a runtime process a previous run left: only while it still runs, listens on the
   * noted port in the range, and its health names the application (a reused pid or port does not).
   */
  async #adoptLeftover(e: LeftoverEntry): Promise<boolean> {
    if (e.port === undefined || !processAlive(e.pid)) return false;
    if ((await healthApplication(this.#options.bindHost, e.port, this.#options.nodeId)) !== e.application)
      return false;
    if (!this.#ports.claim(e.port, e.application)) return false;
    const m = this.#adopt(e.application);
    m.port = e.port;
    m.runtimeVersion = (await this.#runtimeVersion()) ?? '';
    const adopted = new AdoptedProcess(e.pid);
    this.#options.limits?.started(e.application, e.pid);
    this.#attach(m, adopted);
    m.answered = true;
    // The selector may have moved while no daemon was there to say so: it looks now, not at its
    // safety poll minutes away.
    signal(adopted, 'SIGHUP');
    m.tail.push(
      Buffer.from(
        `[svc] adopted cell serve ${e.pid} on port ${e.port}, left running by a previous run of the daemon; its output is not captured\n`,
      ),
    );
    this.#options.log.info(
      { application: e.application, port: e.port, pid: e.pid },
      'adopted a runtime process a previous run of the daemon left running',
    );
    this.#options.events?.emit({
      kind: 'process.adopted',
      application: e.application,
      port: e.port,
      pid: e.pid,
    });
    return true;
  }

  /**
   * Leaves every process running and stops supervising (`svc sail` restarting keeping its
   * applications): the process file keeps naming them, so the next run adopts them.
   */
  async detach(): Promise<void> {
    this.#closed = true;
    await this.#applying;
    this.#options.limits?.close();
    this.#noteProcesses();
    for (const m of this.#managed.values()) {
      if (m.timer) clearTimeout(m.timer);
      m.timer = null;
      const child = m.child;
      if (child instanceof AdoptedProcess) child.release();
      else if (child) {
        // Its output has nobody to go to now; the runtime ignores the broken pipe.
        (child as ChildProcess).stdout?.destroy();
        (child as ChildProcess).stderr?.destroy();
        (child as ChildProcess).unref();
      }
    }
  }

  /**
   * Keeps the process file in step with the groups running now. A write the disk refused is
   * remembered and tried again on every pass until it lands (docs/supervisor.md "A full disk"):
   * a daemon that crashed after the disk freed would otherwise miss what it started meanwhile.
   */
  #noteProcesses(): void {
    if (!this.#processNote) return;
    const running = [...this.#managed.values()].flatMap((m) =>
      m.child?.pid !== undefined && m.port !== null
        ? [{ application: m.application, pid: m.child.pid, port: m.port }]
        : [],
    );
    this.#processNote.write(processFileText(running));
  }

  #adopt(application: string): Managed {
    const m: Managed = {
      application,
      port: null,
      runtimeVersion: '',
      state: 'starting',
      ready: false,
      restarts: 0,
      fastExits: 0,
      child: null,
      exited: Promise.resolve(),
      startedAtMs: 0,
      tail: new OutputTail(this.#options.outputBytes),
      timer: null,
      stopping: null,
      launching: null,
      deployment: undefined,
      answered: false,
      notifyPending: false,
      switchWatchUntilMs: 0,
      servingWhenSignalled: undefined,
      retellAtMs: 0,
      retold: 0,
      notReadyReported: false,
      probedAtMs: 0,
    };
    this.#managed.set(application, m);
    return m;
  }

  /** False once the process was given up on while an await was pending. */
  #current(m: Managed): boolean {
    return !this.#closed && !m.stopping && this.#managed.get(m.application) === m;
  }

  #launch(m: Managed): Promise<void> {
    const launching = this.#start(m);
    m.launching = launching;
    return launching.finally(() => {
      if (m.launching === launching) m.launching = null;
    });
  }

  async #start(m: Managed): Promise<void> {
    const { cellBin } = this.#options;
    const version = await this.#runtimeVersion();
    if (!this.#current(m)) return;
    if (version === null)
      return this.#failedStart(m, `${cellBin} is no runnable runtime (cell --version failed)`);
    m.runtimeVersion = version;
    const port = await this.#portFor(m);
    if (!this.#current(m)) return;
    if (port === null) {
      const [start, end] = this.#options.portRange;
      return this.#failedStart(
        m,
        `no free port in ${start}-${end}: every other port is in use, held or quarantined (port-quarantine-ms)`,
      );
    }
    let child: ChildProcess;
    try {
      child = spawn(cellBin, ['serve'], {
        env: runtimeEnv({
          ...this.#options,
          application: m.application,
          port,
          secretsFile: this.#options.secretsFile?.(m.application),
          hostSocket: this.#options.hostSocket,
          objectsDir: this.#options.objectsDir,
        }),
        stdio: ['ignore', 'pipe', 'pipe'],
        // Its own process group, so a kill reaches the workerd processes it starts.
        detached: true,
      });
    } catch (err) {
      return this.#failedStart(m, `${cellBin}: ${(err as Error).message}`);
    }
    // At once: the runtime starts its workerd only after it loaded, which takes far longer.
    if (child.pid !== undefined) this.#options.limits?.started(m.application, child.pid);
    const failed = this.#attach(m, child);
    child.once('error', (err) => {
      // A failed spawn has no pid and emits no exit.
      if (child.pid === undefined) failed(`could not start: ${err.message}`);
    });
    this.#options.log.info({ application: m.application, port, pid: child.pid }, 'runtime process started');
    this.#options.events?.emit({
      kind: 'process.started',
      application: m.application,
      port,
      ...(child.pid !== undefined ? { pid: child.pid } : {}),
      restarts: m.restarts,
    });
  }

  /** Makes `child` the application's process: output, exit, health probes. Answers how to fail it. */
  #attach(m: Managed, child: RuntimeChild): (why: string) => void {
    m.child = child;
    m.startedAtMs = Date.now();
    m.ready = false;
    m.answered = false;
    m.notReadyReported = false;
    // A process starting reads the selector itself: it is told again only if it lags a pass on.
    m.retold = 0;
    m.retellAtMs = Date.now() + this.#retellFirstMs;
    if (m.state !== 'crashloop') m.state = 'starting';
    child.stdout?.on('data', (chunk: Buffer) => m.tail.push(chunk));
    // The front's stdout is its own (spans, cron run reports): a worker's output is on stderr.
    child.stdout?.on('data', runtimeReportReader(m.application, this.#options.events, this.#options.log));
    child.stderr?.on('data', (chunk: Buffer) => m.tail.push(chunk));
    let finish: (why: string) => void = () => {};
    m.exited = new Promise<void>((resolve) => {
      let done = false;
      finish = (why: string) => {
        if (done) return;
        done = true;
        this.#exited(m, child, why);
        resolve();
      };
      child.once('exit', (code, signal) => {
        const why = signal ? `was killed by ${signal}` : code === null ? 'exited' : `exited with ${code}`;
        // The last lines a crashing process wrote may still be in its pipes when it exits, and
        // they are what its exit event's tail is for; a child that inherited the pipes must not
        // hold the exit back for long.
        void outputEnded(child, OUTPUT_AFTER_EXIT_MS).then(() => finish(why));
      });
    });
    this.#noteProcesses();
    this.#schedule(m, this.#notReadyProbeMs(), () => this.#probeHealth(m, child));
    return finish;
  }

  /**
   * The runtime's version (`cell --version`, kept while the binary is unchanged), asked once for
   * all the starts under way: at a node's start every application starts at once, and each asking
   * on its own ran one `cell --version` per application, 1,000 processes and their output in the
   * daemon's heap together (bench/RESULTS.md "1,000 idle applications on one node").
   */
  #runtimeVersion(): Promise<string | null> {
    this.#versionAsked ??= this.#probe.version(this.#options.cellBin).finally(() => {
      this.#versionAsked = null;
    });
    return this.#versionAsked;
  }

  /** The application's port: its own while still bindable, else the lowest one it may take. */
  async #portFor(m: Managed): Promise<number | null> {
    const host = this.#options.bindHost;
    if (m.port !== null) {
      if (await portIsFree(host, m.port)) return m.port;
      this.#ports.forget(m.port);
      m.port = null;
    }
    const unusable = new Set<number>();
    for (;;) {
      const port = this.#ports.take(m.application, Date.now(), unusable);
      if (port === null) return null;
      // Noted at once: a stop during the check below releases it.
      m.port = port;
      if (await portIsFree(host, port)) return port;
      // Bound by something that is not ours: leave it, without quarantine.
      this.#ports.forget(port);
      m.port = null;
      unusable.add(port);
    }
  }

  /**
   * The ready safety net: asks the process over its host connection; an answer that it is ready
   * and serves what its last probe said is taken as a probe's 200, anything else (no answer
   * within HEALTH_ASK_TIMEOUT_MS, another status or deployment) probes at once, as does the
   * READY_HTTP_PROBE_MS since the last probe.
   */
  async #checkReady(m: Managed, child: RuntimeChild): Promise<void> {
    if (m.child !== child || !this.#current(m)) return;
    const ask = this.#options.askHealth;
    const httpEvery = this.#options.readyHttpProbeMs ?? READY_HTTP_PROBE_MS;
    if (ask && m.ready && Date.now() - m.probedAtMs < httpEvery) {
      const told = await ask(m.application, HEALTH_ASK_TIMEOUT_MS);
      if (m.child !== child || !this.#current(m)) return;
      // A probe scheduled meanwhile (a notice, a switch) is the check now.
      if (m.timer) return;
      if (m.ready && told?.status === 'ready' && told.deployment === (m.serving ?? null)) {
        this.#schedule(m, this.#options.healthCheckMs ?? READY_PROBE_MS, () => this.#checkReady(m, child));
        return;
      }
    }
    await this.#probeHealth(m, child);
  }

  async #probeHealth(m: Managed, child: RuntimeChild): Promise<void> {
    if (m.child !== child || !this.#current(m)) return;
    const health = await readHealth(this.#options.bindHost, m.port!, this.#options.nodeId);
    if (m.child !== child || !this.#current(m)) return;
    m.probedAtMs = Date.now();
    const ok = health.status === 200;
    m.serving = health.deployment ?? m.serving;
    if (health.detail !== undefined) m.detail = health.detail;
    if (health.status !== null && !m.answered) {
      m.answered = true;
      if (m.notifyPending) {
        m.notifyPending = false;
        this.#signalSwitch(m, child);
      }
    }
    if (ok && !m.ready) {
      m.ready = true;
      m.state = 'ready';
      this.#options.log.info({ application: m.application, port: m.port }, 'runtime process ready');
      this.#options.events?.emit({ kind: 'process.ready', application: m.application, port: m.port });
      this.#options.onReadinessChange?.(m.application, true);
    } else if (!ok && m.ready) {
      m.ready = false;
      m.state = 'starting';
      this.#options.log.warn({ application: m.application, port: m.port }, 'runtime process not ready');
      this.#options.events?.emit({ kind: 'process.unready', application: m.application, port: m.port });
      this.#options.onReadinessChange?.(m.application, false);
    }
    const neverReadyMs = this.#options.neverReadyMs ?? NEVER_READY_MS;
    if (!m.ready && !m.notReadyReported && Date.now() - m.startedAtMs >= neverReadyMs) {
      m.notReadyReported = true;
      this.#options.events?.emit({
        kind: 'process.never-ready',
        application: m.application,
        port: m.port,
        afterMs: Date.now() - m.startedAtMs,
        tail: eventTail(m.tail.text()),
      });
    }
    const switching = Date.now() < m.switchWatchUntilMs && m.serving === m.servingWhenSignalled;
    if (m.ready && !switching) {
      this.#schedule(m, this.#options.healthCheckMs ?? READY_PROBE_MS, () => this.#checkReady(m, child));
      return;
    }
    this.#schedule(m, switching ? SWITCH_PROBE_MS : this.#notReadyProbeMs(), () =>
      this.#probeHealth(m, child),
    );
  }

  /** The probe interval of a process not ready yet: `healthPollMs`, or longer while many start. */
  #notReadyProbeMs(): number {
    let starting = 0;
    for (const m of this.#managed.values()) if (m.child !== null && !m.ready) starting++;
    const shared = Math.round((starting * 1000) / NOT_READY_PROBES_PER_SECOND);
    return Math.max(this.#options.healthPollMs ?? 200, shared);
  }

  #exited(m: Managed, child: RuntimeChild, why: string): void {
    // Whatever it left behind goes with it.
    signalGroup(child.pid, 'SIGKILL');
    if (child.pid !== undefined) this.#options.limits?.exited(m.application, child.pid);
    if (m.child !== child) return;
    m.child = null;
    m.ready = false;
    this.#noteProcesses();
    m.tail.push(Buffer.from(`[svc] cell serve ${why}\n`));
    m.detail = clip(`cell serve ${why}${lastRuntimeLine(m.tail.text())}`);
    if (!this.#current(m)) return;
    this.#restartLater(m, Date.now() - m.startedAtMs, `cell serve ${why}`);
  }

  #failedStart(m: Managed, why: string): void {
    m.tail.push(Buffer.from(`[svc] ${why}\n`));
    m.detail = clip(why);
    this.#restartLater(m, 0, why);
  }

  #restartLater(m: Managed, ranMs: number, why: string): void {
    const judged = judgeExit(this.#policy, m.fastExits, ranMs);
    m.fastExits = judged.fastExits;
    m.state = judged.crashloop ? 'crashloop' : 'starting';
    this.#options.log.warn(
      {
        application: m.application,
        why,
        restarts: m.restarts,
        fastExits: judged.fastExits,
        delayMs: judged.delayMs,
      },
      judged.crashloop ? 'runtime process crash-looping' : 'runtime process exited; restarting',
    );
    this.#options.events?.emit({
      kind: judged.crashloop ? 'process.crash-looping' : 'process.exited',
      application: m.application,
      why,
      restarts: m.restarts,
      delayMs: judged.delayMs,
      tail: eventTail(m.tail.text()),
    });
    this.#schedule(m, judged.delayMs, () => {
      if (!this.#current(m)) return;
      m.restarts += 1;
      void this.#launch(m);
    });
  }

  #schedule(m: Managed, delayMs: number, run: () => unknown): void {
    if (m.timer) clearTimeout(m.timer);
    m.timer = setTimeout(() => {
      m.timer = null;
      void run();
    }, delayMs);
    m.timer.unref();
  }

  /** Stops one process: SIGTERM, SIGKILL to its group after the grace; then frees its port. */
  #retire(m: Managed): Promise<void> {
    m.stopping ??= (async () => {
      m.state = 'stopping';
      m.ready = false;
      if (m.timer) clearTimeout(m.timer);
      m.timer = null;
      if (m.launching) await m.launching;
      const child = m.child;
      if (child) {
        signal(child, 'SIGTERM');
        const hard = setTimeout(() => signalGroup(child.pid, 'SIGKILL'), this.#options.stopGraceMs ?? 30_000);
        await m.exited;
        clearTimeout(hard);
        this.#options.log.info({ application: m.application }, 'runtime process stopped');
        this.#options.events?.emit({ kind: 'process.stopped', application: m.application });
      }
      if (m.port !== null) this.#ports.release(m.port, Date.now());
      this.#managed.delete(m.application);
      // Wanted again while it was stopping: start it afresh.
      if (!this.#closed && this.#desired.has(m.application)) void this.#launch(this.#adopt(m.application));
    })();
    return m.stopping;
  }
}

/**
 * The environment of one `cell serve`: the node's own without svc's settings (`SVC_*`) or stray
 * runtime variables (`CELL_*`), then `--cell-env`, then `CELL_OTEL=1` when observability is on and
 * `--cell-env` says nothing of it, then the contract's own variables and the bucket, which no
 * setting may override.
 */
export function runtimeEnv(input: {
  cellEnv: Record<string, string>;
  bucketEnv: Record<string, string>;
  observability?: boolean;
  application: string;
  nodeId: string;
  port: number;
  bindHost: string;
  secretsFile?: string;
  hostSocket?: string;
  objectsDir?: string;
  base?: NodeJS.ProcessEnv;
}): Record<string, string> {
  const env = runtimeBaseEnvironment(input.base ?? process.env, input.cellEnv);
  Object.assign(
    env,
    serveOptionsEnvironment(
      {
        otel: input.observability === true,
        secretsFile: input.secretsFile,
        unsupervisedExitMs: UNSUPERVISED_EXIT_MS,
        hostSocket: input.hostSocket,
        objectsDir: input.objectsDir,
      },
      input.cellEnv,
    ),
    serveIdentityEnvironment({
      application: input.application,
      node: input.nodeId,
      port: input.port,
      host: input.bindHost,
    }),
  );
  return Object.assign(env, input.bucketEnv);
}

/** Where the node reaches a process bound to `bindHost`: a wildcard bind is probed on loopback. */
export function healthUrl(bindHost: string, port: number): string {
  const host = bindHost === '0.0.0.0' || bindHost === '' ? '127.0.0.1' : bindHost === '::' ? '::1' : bindHost;
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}${HEALTH_PATH}`;
}

/** A health answer longer than this is not read as the runtime's JSON. */
const HEALTH_BODY_BYTES = 64 * 1024;

/**
 * GET of the health over a plain connection, HTTP/1.0 (the answer ends when the connection does,
 * never chunked), within HEALTH_TIMEOUT_MS. A probe is the supervisor's most frequent idle work:
 * this costs the daemon about 40% less CPU than `fetch`, which builds a request, a response, header
 * objects and streams for each.
 */
function healthGet(
  bindHost: string,
  port: number,
  nodeId: string,
): Promise<{ status: number; text: string }> {
  const host = bindHost === '0.0.0.0' || bindHost === '' ? '127.0.0.1' : bindHost === '::' ? '::1' : bindHost;
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    const chunks: Buffer[] = [];
    let bytes = 0;
    const timer = setTimeout(
      () => socket.destroy(new Error(`no answer within ${HEALTH_TIMEOUT_MS} ms`)),
      HEALTH_TIMEOUT_MS,
    );
    socket.once('connect', () =>
      socket.end(
        `GET ${HEALTH_PATH} HTTP/1.0\r\nhost: ${host.includes(':') ? `[${host}]` : host}:${port}\r\n${SUPERVISOR_HEADER}: ${nodeId}\r\n\r\n`,
      ),
    );
    socket.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      // Far past any health answer: stop reading (the status line is in the first chunk).
      if (bytes > HEALTH_BODY_BYTES * 2) socket.destroy();
      else chunks.push(chunk);
    });
    socket.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.once('close', (hadError) => {
      clearTimeout(timer);
      if (hadError) return;
      const answer = Buffer.concat(chunks).toString('utf8');
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(answer)?.[1];
      const headersEnd = answer.indexOf('\r\n\r\n');
      if (status === undefined) reject(new Error('no HTTP answer'));
      else resolve({ status: Number(status), text: headersEnd < 0 ? '' : answer.slice(headersEnd + 4) });
    });
  });
}

/**
 * One health probe: ready on 200. The runtime's answer (JSON with `status`, `deployment` and,
 * when a deployment failed to start, `detail`) says what it serves and why it is not ready.
 * `status` is null when nothing answers.
 */
async function readHealth(
  bindHost: string,
  port: number,
  nodeId: string,
): Promise<{ status: number | null; deployment?: string; detail?: string }> {
  let response: { status: number; text: string };
  try {
    response = await healthGet(bindHost, port, nodeId);
  } catch (err) {
    return { status: null, detail: `health does not answer: ${(err as Error).message}` };
  }
  const ok = response.status === 200;
  let body: { status?: unknown; deployment?: unknown; detail?: unknown } = {};
  try {
    if (response.text.length <= HEALTH_BODY_BYTES) body = JSON.parse(response.text);
  } catch {
    // Not the runtime's JSON: the status alone tells.
  }
  const deployment = typeof body?.deployment === 'string' ? body.deployment : undefined;
  if (ok) return { status: response.status, ...(deployment ? { deployment } : {}) };
  const said = typeof body?.status === 'string' ? body.status : `HTTP ${response.status}`;
  const detail = typeof body?.detail === 'string' ? `${said}: ${body.detail}` : said;
  return { status: response.status, ...(deployment ? { deployment } : {}), detail: clip(detail) };
}

/** The application a process on the port names in its health answer (any status); null if none. */
async function healthApplication(bindHost: string, port: number, nodeId: string): Promise<string | null> {
  try {
    const response = await fetch(healthUrl(bindHost, port), {
      signal: AbortSignal.timeout(HEALTH_TIMEOUT_MS),
      cache: 'no-store',
      headers: { [SUPERVISOR_HEADER]: nodeId },
    });
    const body = (await response.json()) as { application?: unknown };
    return typeof body.application === 'string' ? body.application : null;
  } catch {
    return null;
  }
}

/** The runtime's last own line (`cell: ...`) in its output, as `: <line>`; empty when none. */
function lastRuntimeLine(output: string): string {
  const lines = output.split('\n').filter((line) => line.startsWith('cell: '));
  const last = lines.at(-1);
  return last ? `: ${last}` : '';
}

function clip(text: string): string {
  return text.length > DETAIL_CHARS ? `${text.slice(0, DETAIL_CHARS)}…` : text;
}

/** True when nothing listens on host:port right now. */
function portIsFree(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

function signal(child: RuntimeChild, name: NodeJS.Signals): void {
  try {
    child.kill(name);
  } catch {
    // Already gone.
  }
}
