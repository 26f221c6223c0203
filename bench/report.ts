/**
 * Writes the results of `npm run bench`: latest.md (tables, PASS/FAIL per PRODUCT.md section 4
 * target), latest.json (every run, raw) and latest.svg (a hand-written chart, no dependencies).
 */
import type { LockOrderMemory } from './lock-order-memory';
import { lockOrderMarkdown } from './report-lock-order';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { type PeerName, TOPOLOGIES, UNCONTENDED_PEERS } from './protocol';
import {
  deriveSharedHolds,
  SHARED_TARGETS,
  type SharedHoldsDerived,
  sharedHoldsMarkdown,
  sharedHoldsTargetRows,
} from './report-shared-holds';
import type { CaseSummary, Options } from './run';
import { esc, fmt, oneLine, PEER_COLOR, PEER_LABEL, pf, range, topCommands } from './report-format';
import { scaleMarkdown, scaleSvg, scaleTargetRows } from './report-scale';

export interface ReportMeta {
  date: string;
  wallMs: number;
  argv: string[];
  options: Options;
  machine: string;
  /** `os.loadavg()` at the start and the end: other work on the machine during the run. */
  load: { start: number[]; end: number[] };
  versions: Record<string, string>;
  /** What lock-order checking keeps per class pair (the `lockorder` scenario). */
  lockOrderMemory?: LockOrderMemory;
}

/** PRODUCT.md section 4. */
export const TARGETS = {
  uncontendedVsFloor: 0.9,
  /** Hot key: sections/s over the timer-only ideal (1 worker, the section alone). */
  hotVsIdeal: 0.95,
  p99PerCallerSection: 1.2,
  commandsPerSection: 0.5,
  segmentedSpeedup: 6,
  /** "Flat": heap within this many bytes of the first sample, handles not above it. */
  heapGrowthBytes: 1 << 20,
};

const failures = (s: CaseSummary) => {
  const total = Object.values(s.failures).reduce((a, b) => a + b, 0);
  if (!total) return '0';
  const per = Object.entries(s.failures)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
  return `${fmt(total / Math.max(1, s.n), 1)} / ${s.attemptsPerRun} per run (${per})`;
};

/** Everything the report derives from the summaries, also written to the json. */
export interface Derived {
  timerIdeal: number;
  floorIdeal: number;
  sectionMs: number;
  floorUncontended: Record<number, number>;
  hot: Record<
    string,
    {
      vsTimer: number;
      vsFloor: number;
      p99Bound: number;
      passIdeal?: boolean;
      passP99?: boolean;
      passCommands?: boolean;
    }
  >;
  uncontended: Record<string, { vsFloor: number; pass?: boolean }>;
  /** 1 server + 1 replica: what waiting for one replica costs (informational, no target). */
  replicaAcks?: ReplicaAcksCost;
  segmented: Record<string, { oneKey: number; segmented: number; speedup: number; pass?: boolean }>;
  /** Read-heavy and permits (bench/report-shared-holds.ts). */
  sharedHolds: SharedHoldsDerived;
  memory?: {
    firstHeap: number;
    lastHeap: number;
    maxHeapGrowth: number;
    firstHandles: number;
    lastHandles: number;
    maxHandles: number;
    pass: boolean;
  };
}

/** The 1 server + 1 replica case, by peer; NaN where a peer did not run. */
export interface ReplicaAcksCost {
  /** Median block rates, cycles/s. */
  rate: { floor: number; floorWait1: number; ours: number; oursAcks: number };
  /** x floor of the same case (paired by round), as in the table. */
  vsFloor: { floorWait1: number; ours: number; oursAcks: number };
  /** `@Locked` with acks over `@Locked` without, and over floor-wait1 (ratios of the x floor). */
  acksVsOurs: number;
  acksVsFloorWait1: number;
  /** µs added per cycle by the WAIT (from the median rates): ours, raw. */
  addedUsOurs: number;
  addedUsFloor: number;
  /** Client CPU µs per cycle. */
  cpu: { floor: number; floorWait1: number; ours: number; oursAcks: number };
}

const REPLICA_CASE = 'uncontended:1+replica';

function replicaAcksCost(summaries: CaseSummary[]): ReplicaAcksCost | undefined {
  const get = (peer: PeerName) =>
    summaries.find((s) => s.def.id === `${REPLICA_CASE}:${peer}` && s.n > 0);
  const floor = get('floor');
  const floorWait1 = get('floor-wait1');
  const ours = get('ours-locked');
  const oursAcks = get('ours-locked-acks1');
  if (!floorWait1 && !oursAcks) return undefined;
  const rate = (s?: CaseSummary) => s?.rate.median ?? NaN;
  const vs = (s?: CaseSummary) => s?.vsFloor ?? NaN;
  const cpu = (s?: CaseSummary) => s?.cpuUsPerOp ?? NaN;
  return {
    rate: {
      floor: rate(floor),
      floorWait1: rate(floorWait1),
      ours: rate(ours),
      oursAcks: rate(oursAcks),
    },
    vsFloor: { floorWait1: vs(floorWait1), ours: vs(ours), oursAcks: vs(oursAcks) },
    acksVsOurs: vs(oursAcks) / vs(ours),
    acksVsFloorWait1: vs(oursAcks) / vs(floorWait1),
    addedUsOurs: 1e6 / rate(oursAcks) - 1e6 / rate(ours),
    addedUsFloor: 1e6 / rate(floorWait1) - 1e6 / rate(floor),
    cpu: {
      floor: cpu(floor),
      floorWait1: cpu(floorWait1),
      ours: cpu(ours),
      oursAcks: cpu(oursAcks),
    },
  };
}

function derive(summaries: CaseSummary[]): Derived {
  const by = (id: string) => summaries.find((s) => s.def.id === id && s.n > 0);
  const timerIdeal = by('serial:timer')?.rate.median ?? NaN;
  const floorIdeal = by('serial:floor')?.rate.median ?? NaN;
  const sectionMs = 1000 / timerIdeal;
  const d: Derived = {
    timerIdeal,
    floorIdeal,
    sectionMs,
    floorUncontended: {},
    hot: {},
    uncontended: {},
    segmented: {},
    sharedHolds: deriveSharedHolds(summaries, floorIdeal),
  };
  for (const servers of [1, 3]) {
    d.floorUncontended[servers] = by(`uncontended:${servers}:floor`)?.rate.median ?? NaN;
  }
  for (const s of summaries) {
    if (s.n === 0) continue;
    const { def } = s;
    if (def.scenario === 'uncontended') {
      // Paired: each block over the floor's block of the same round, then medians.
      const floor = def.replica
        ? (by(`${REPLICA_CASE}:floor`)?.rate.median ?? NaN)
        : d.floorUncontended[def.servers];
      const vsFloor = s.vsFloor ?? s.rate.median / floor;
      d.uncontended[def.id] = {
        vsFloor,
        // The replica rows have no target: they show what replicaAcks costs.
        pass:
          Number.isFinite(vsFloor) && !def.replica
            ? vsFloor >= TARGETS.uncontendedVsFloor
            : undefined,
      };
    }
    if (def.scenario === 'hot' || def.scenario === 'segmented') {
      const callers = def.procs * def.spec.concurrency;
      const vsFloor = s.rate.median / floorIdeal;
      const p99Bound = TARGETS.p99PerCallerSection * callers * sectionMs;
      d.hot[def.id] = {
        vsTimer: s.rate.median / timerIdeal,
        vsFloor,
        p99Bound,
        passIdeal: Number.isFinite(timerIdeal)
          ? s.rate.median / timerIdeal >= TARGETS.hotVsIdeal
          : undefined,
        passP99: Number.isFinite(p99Bound) ? s.waitP99.median <= p99Bound : undefined,
        passCommands: s.clientPerOp <= TARGETS.commandsPerSection,
      };
    }
  }
  for (const [procs, callers] of TOPOLOGIES) {
    const one = by(`segmented:${procs}x${callers}:ours-locked`);
    const seg = by(`segmented:${procs}x${callers}:ours-locked-seg10`);
    if (one && seg) {
      const speedup = seg.rate.median / one.rate.median;
      d.segmented[`${procs}x${callers}`] = {
        oneKey: one.rate.median,
        segmented: seg.rate.median,
        speedup,
        pass: speedup >= TARGETS.segmentedSpeedup,
      };
    }
  }
  d.replicaAcks = replicaAcksCost(summaries);
  const mem = by('memory:ours-locked');
  if (mem?.mem) {
    // The run with the largest growth counts (usually there is one run).
    const runs = mem.mem.filter((m) => m.length > 1);
    if (runs.length) {
      const worst = runs
        .map((m) => ({
          m,
          growth: m[m.length - 1].heapUsed - m[0].heapUsed,
        }))
        .sort((a, b) => b.growth - a.growth)[0].m;
      const first = worst[0];
      const last = worst[worst.length - 1];
      const maxHeap = Math.max(...worst.map((x) => x.heapUsed));
      const maxHandles = Math.max(...worst.map((x) => x.handles));
      d.memory = {
        firstHeap: first.heapUsed,
        lastHeap: last.heapUsed,
        maxHeapGrowth: maxHeap - first.heapUsed,
        firstHandles: first.handles,
        lastHandles: last.handles,
        maxHandles,
        pass:
          last.heapUsed - first.heapUsed <= TARGETS.heapGrowthBytes &&
          last.handles <= first.handles,
      };
    }
  }
  return d;
}

// ------------------------------------------------------------------ markdown

function markdown(summaries: CaseSummary[], d: Derived, meta: ReportMeta): string {
  const L: string[] = [];
  const o = meta.options;
  const of = (scenario: string) => summaries.filter((s) => s.def.scenario === scenario);
  const main = (id: string) => summaries.find((s) => s.def.id === id);

  L.push('# nest-locked benchmark: latest run', '');
  L.push(
    `${meta.date}, \`npm run bench${meta.argv.length ? ` -- ${meta.argv.join(' ')}` : ''}\`, ` +
      `wall time ${fmt(meta.wallMs / 1000, 0)} s. Machine: ${meta.machine}; load average ` +
      `(1/5/15 min) ${meta.load.start.map((x) => x.toFixed(2)).join('/')} at the start, ` +
      `${meta.load.end.map((x) => x.toFixed(2)).join('/')} at the end.`,
  );
  L.push(
    '',
    `Versions: ${Object.entries(meta.versions)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}.`,
  );
  L.push(
    '',
    `Every figure is the median of ${o.runs} run(s) (min–max in parentheses), each run a fresh ` +
      'set of processes; rounds interleave the peers. Servers: redis-server spawned for this run ' +
      `(\`--save "" --appendonly no\`, loopback). Uncontended: every peer in one process, ` +
      `${o.seqRounds} rounds of one ${fmt(o.seqBlock)}-cycle block per peer (order shuffled each ` +
      `round, so no peer always follows the same one) after ${fmt(o.seqWarmup)} warm-up ` +
      `cycles each. Hot key: ${o.hotIterations} iterations per ` +
      'caller of acquire -> `await setTimeout(1)` -> release, all callers on one key; wait = call ' +
      'to entering the section. A failed acquire is counted and not retried. Before the timed ' +
      'part, every hot-key and segmented process warms up: uncontended cycles, then all its ' +
      `callers ${o.hotWarmup} times each on a key of its own with the same section, and with ` +
      `several processes ${o.hotWarmup} times more on a key they all share (the waiting paths, ` +
      'and those between processes, get compiled; a fresh process would otherwise spend the ' +
      'short run in its JIT).',
  );

  // -------- targets
  L.push('', '## Targets (PRODUCT.md section 4), main row `@Locked`', '');
  L.push('| target | measured | PASS/FAIL |', '|---|---|---|');
  for (const servers of [1, 3]) {
    const u = d.uncontended[`uncontended:${servers}:ours-locked`];
    if (u) {
      const s = main(`uncontended:${servers}:ours-locked`)!;
      L.push(
        `| uncontended \`@Locked\` >= ${TARGETS.uncontendedVsFloor} x raw floor, ${servers} server(s) | ` +
          `${fmt(u.vsFloor, 2)} x (${fmt(s.rate.median)} vs ${fmt(d.floorUncontended[servers])} cycles/s) | ${pf(u.pass)} |`,
      );
    }
  }
  for (const think of [0, 5]) {
    for (const [procs, callers] of TOPOLOGIES) {
      const id = `hot:${procs}x${callers}:think${think}:ours-locked`;
      const h = d.hot[id];
      const s = main(id);
      if (!h || !s || s.n === 0) continue;
      const tag = `hot key ${procs}x${callers}${think ? `, think ${think} ms (extra, not in PRODUCT)` : ''}`;
      L.push(
        `| ${tag}: >= ${TARGETS.hotVsIdeal} x timer-only ideal (1 worker, the section alone) | ` +
          `${fmt(h.vsTimer, 2)} x (${fmt(s.rate.median)} vs ${fmt(d.timerIdeal)}/s; ${fmt(h.vsFloor, 2)} x 1/(section + one raw handoff) ${fmt(d.floorIdeal)}/s) | ${pf(h.passIdeal)} |`,
      );
      L.push(
        `| ${tag}: p99 wait <= ${TARGETS.p99PerCallerSection} x callers x section = ${fmt(h.p99Bound, 0)} ms | ${fmt(s.waitP99.median, 1)} ms | ${pf(h.passP99)} |`,
      );
      L.push(
        `| ${tag}: longest same-holder streak; grants out of arrival order (report only) | ${fmt(s.streakMax)} (mean ${fmt(s.streakMean, 2)}); ${fmt(s.outOfOrder * 100, 1)}% of sections overtook an earlier caller | - |`,
      );
      L.push(
        `| ${tag}: <= ${TARGETS.commandsPerSection} Redis commands per section (client-sent) | ${fmt(s.clientPerOp, 2)} (${topCommands(s.clientByCommand, 6)}) | ${pf(h.passCommands)} |`,
      );
    }
  }
  for (const [topo, seg] of Object.entries(d.segmented)) {
    L.push(
      `| segmented (10 slices) >= ${TARGETS.segmentedSpeedup} x one key, ${topo} | ${fmt(seg.speedup, 2)} x (${fmt(seg.segmented)} vs ${fmt(seg.oneKey)}/s) | ${pf(seg.pass)} |`,
    );
  }
  const segSkip = of('segmented').find((s) => s.skipped);
  if (segSkip) {
    L.push(
      `| segmented (10 slices) >= ${TARGETS.segmentedSpeedup} x one key | skipped: ${oneLine(segSkip.skipped)} | - |`,
    );
  }
  L.push(...sharedHoldsTargetRows(summaries, d.sharedHolds));
  if (d.memory) {
    const m = d.memory;
    L.push(
      `| no growth over ${fmt(o.memCycles)} cycles: heap and handles flat | heap ${mb(m.firstHeap)} -> ${mb(m.lastHeap)} (max growth ${mb(m.maxHeapGrowth)}), handles ${m.firstHandles} -> ${m.lastHandles} (max ${m.maxHandles}) | ${pf(m.pass)} |`,
    );
  }
  L.push(...scaleTargetRows(summaries));

  // -------- uncontended
  const unc = of('uncontended');
  if (unc.length) {
    L.push('', '## Uncontended lock + unlock cycles', '');
    L.push(
      'Sequential cycles on one key, one connection per server. The floor on 3 servers sends ' +
        'SET NX (and the release) to all three and goes on once a majority answered, as redlock ' +
        'does: the fastest correct quorum lock. cycles/s: median block rate ' +
        '(min–max over the runs); x floor: each block over the floor block of the same round ' +
        '(same process, same moment), median over rounds, then over runs. This pairing is what ' +
        'makes the ratio usable on a shared 2-vCPU VM where a round trip swings 2-3x with vCPU ' +
        'placement. Client cmds: commands sent by ' +
        'the process (ioredis `sendCommand`); server cmds: `INFO commandstats` deltas over every ' +
        'server, which also count the commands run inside Lua scripts; server µs: `INFO ' +
        'commandstats` usec of the commands the process sent (a script with the commands it ' +
        'ran), summed over the servers, median block. Client CPU: user + ' +
        'system CPU time of the benchmark process per cycle (`process.cpuUsage()` around each ' +
        'block), the client-side cost independent of where the scheduler put the processes.',
      '',
    );
    if (unc.some((s) => s.def.replica)) {
      L.push(
        '1 + 1 replica: a 4th redis-server is a replica of server 0 during the runs of this case ' +
          'only (REPLICAOF before each run, started once the master lists it online; REPLICAOF ' +
          'NO ONE after, so every other case sees server 0 without a replica). Its floor is the ' +
          'same raw floor on that master; floor + WAIT sends `WAIT 1 1000` right after each SET ' +
          'on the same connection (pipelined); `@Locked replicaAcks: 1` is the same method with ' +
          'the module option (WAIT after the lock script, default 1000 ms timeout). x floor is ' +
          "over that case's floor; server cmds count the master only. No target for these rows.",
        '',
      );
    }
    L.push(
      '| servers | peer | cycles/s | µs/cycle | x floor | >= 0.9 x floor | client CPU µs/cycle | server µs/cycle | client cmds/cycle | server cmds/cycle (incl. in-script) | n |',
      '|---|---|---|---|---|---|---|---|---|---|---|',
    );
    for (const s of unc) {
      const servers = s.def.replica ? '1 + 1 replica' : s.def.servers;
      if (s.n === 0) {
        L.push(`| ${servers} | ${PEER_LABEL[s.def.peer]} | ${errorCell(s)} | | | | | | | | 0 |`);
        continue;
      }
      const u = d.uncontended[s.def.id];
      L.push(
        `| ${servers} | ${PEER_LABEL[s.def.peer]} | ${range(s.rate)} | ${fmt(1e6 / s.rate.median)} | ${fmt(u.vsFloor, 2)} | ${s.def.peer === 'floor' ? '-' : pf(u.pass)} | ${fmt(s.cpuUsPerOp, 1)} | ${fmt(s.serverUsPerOp, 1)} | ${fmt(s.clientPerOp, 2)} (${topCommands(s.clientByCommand, 6)}) | ${fmt(s.serverPerOp, 1)} | ${s.n} |`,
      );
    }
    L.push('', ...serverBreakdown(unc));
    const r = d.replicaAcks;
    if (r) {
      L.push(
        '',
        '**What `replicaAcks: 1` costs** (1 server + 1 replica, uncontended; informational, no ' +
          `target): \`@Locked\` with \`replicaAcks: 1\` ${fmt(r.rate.oursAcks)} cycles/s vs ` +
          `${fmt(r.rate.ours)} without, ${fmt(r.acksVsOurs, 2)} x (${signed(r.addedUsOurs)} µs ` +
          `per cycle); the raw floor + \`WAIT 1\` ${fmt(r.rate.floorWait1)} vs ` +
          `${fmt(r.rate.floor)} for the floor, ${fmt(r.vsFloor.floorWait1, 2)} x ` +
          `(${signed(r.addedUsFloor)} µs); \`@Locked\` with acks ${fmt(r.acksVsFloorWait1, 2)} x ` +
          'the floor + WAIT. Client CPU per cycle: ' +
          `${fmt(r.cpu.oursAcks, 1)} µs with acks vs ${fmt(r.cpu.ours, 1)} without ` +
          `(floor + WAIT ${fmt(r.cpu.floorWait1, 1)}, floor ${fmt(r.cpu.floor, 1)}). Ratios are ` +
          'taken from the paired x floor column.',
      );
    }
  }

  // -------- serial ideal + hot
  const serial = of('serial');
  const hot = of('hot');
  if (serial.length) {
    L.push('', '## Serial ideal (1 worker, same loop, 1 ms section)', '');
    L.push('| label | sections/s | ms per section | n |', '|---|---|---|---|');
    for (const s of serial) {
      L.push(
        `| ${s.def.peer === 'timer' ? 'timer-only ideal (no lock)' : 'section + one handoff: raw floor, 1 worker'} | ${range(s.rate, 1)} | ${fmt(1000 / s.rate.median, 3)} | ${s.n} |`,
      );
    }
  }
  if (hot.length) {
    L.push('', '## Hot key (one key, 1 ms critical section)', '');
    L.push(
      `x timer = sections/s / ${fmt(d.timerIdeal)} (the timer-only ideal: 1 worker, the section ` +
        `alone; the target); x ideal = / ${fmt(d.floorIdeal)} (1 / (section + one handoff), the raw ` +
        `floor with 1 worker). p99 bound = ${TARGETS.p99PerCallerSection} x callers x ` +
        `${fmt(d.sectionMs, 3)} ms (the measured section). Commands: client-sent per ` +
        'completed section (the target counts these); server = `INFO commandstats`, including ' +
        'in-script calls. Streak = consecutive sections by the same caller (max / mean). Out of ' +
        'arrival order: sections that entered before a caller that had arrived earlier and was ' +
        'still waiting (0% = FIFO; across processes, local handoffs let a process serve its own ' +
        'callers first, up to `localHandoffs` in a row).',
      '',
    );
    L.push(
      `| config | peer | sections/s | x timer | >= ${TARGETS.hotVsIdeal} | x ideal | wait p50 ms | wait p99 ms | p99 <= bound | wait max ms | client cmds/section | <= ${TARGETS.commandsPerSection} | server cmds/section | streak max / mean | out of arrival order | failed acquires | overlaps | n |`,
      '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    );
    for (const s of hot) {
      if (s.n === 0) {
        L.push(
          `| ${s.def.config} | ${PEER_LABEL[s.def.peer]} | ${errorCell(s)} |${' |'.repeat(14)} 0 |`,
        );
        continue;
      }
      const h = d.hot[s.def.id];
      L.push(
        `| ${s.def.config} | ${PEER_LABEL[s.def.peer]} | ${range(s.rate)} | ${fmt(h.vsTimer, 2)} | ${pf(h.passIdeal)} | ${fmt(h.vsFloor, 2)} | ${fmt(s.waitP50, 2)} | ${range(s.waitP99, 1)} | ${pf(h.passP99)} (${fmt(h.p99Bound)}) | ${fmt(s.waitMax, 0)} | ${fmt(s.clientPerOp, 2)} | ${pf(h.passCommands)} | ${fmt(s.serverPerOp, 1)} | ${fmt(s.streakMax, 0)} / ${fmt(s.streakMean, 2)} | ${fmt(s.outOfOrder * 100, 1)}% | ${failures(s)} | ${s.overlaps}${s.timedOut ? ' (time budget hit)' : ''} | ${s.n} |`,
      );
    }
    L.push('', '### Where the time between sections goes (medians)', '');
    L.push(
      'Handoff gap: from one section ending (before its release) to the next section starting, ' +
        'on the monotonic clock shared by all processes, split by whether the next holder runs ' +
        'in the same process or in another one. Busy = share of the wall time spent inside ' +
        `sections. A gap of g ms caps throughput at 1000 / (${fmt(d.sectionMs, 3)} + g) per s. ` +
        'CPU: user + system time of all benchmark processes (`process.cpuUsage()`) and of the ' +
        'redis-server (`INFO cpu`) per completed section, and both together as a share of the ' +
        'machine (wall time x vCPUs).',
      '',
    );
    L.push(
      '| config | peer | gap p50 ms, same process | gap p50 ms, other process | handoffs to another process | busy | client CPU µs/section | redis CPU µs/section | CPU used |',
      '|---|---|---|---|---|---|---|---|---|',
    );
    for (const s of hot) {
      if (s.n === 0) continue;
      L.push(
        `| ${s.def.config} | ${PEER_LABEL[s.def.peer]} | ${fmt(s.gapSameP50, 3)} | ${fmt(s.gapOtherP50, 3)} | ${fmt(100 * s.otherShare, 0)}% | ${fmt(100 * s.busyFraction, 0)}% | ${fmt(s.clientCpuPerOp, 0)} | ${fmt(s.serverCpuPerOp, 0)} | ${fmt(100 * s.machineCpuShare, 0)}% |`,
      );
    }
    L.push('', '### Commands per section by command (medians)', '');
    L.push('| config | peer | client-sent | server `INFO commandstats` (incl. in-script) |');
    L.push('|---|---|---|---|');
    for (const s of hot) {
      if (s.n === 0) continue;
      L.push(
        `| ${s.def.config} | ${PEER_LABEL[s.def.peer]} | ${topCommands(s.clientByCommand, 8)} | ${topCommands(s.serverByCommand, 10)} |`,
      );
    }
  }

  // -------- segmented
  const seg = of('segmented');
  if (seg.length) {
    L.push('', '## Segmented (10 slices) vs one key, same load', '');
    L.push(
      `${o.segIterations} iterations per caller, 1 ms section, no think time; the same \`@Locked\` ` +
        'method with and without `segments: 10`. The default 160 iterations make a run long enough ' +
        '(~1.5 s segmented, ~10 s one key) to measure the steady state.',
      '',
    );
    L.push(
      '| config | peer | sections/s | speedup vs one key | >= 6x | wait p50 ms | wait p99 ms | client cmds/section | client / redis CPU µs per section | CPU used | slices used | overlaps (per slice) | n |',
      '|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    );
    for (const s of seg) {
      if (s.n === 0) {
        L.push(
          `| ${s.def.config} | ${PEER_LABEL[s.def.peer]} | ${errorCell(s)} |${' |'.repeat(9)} 0 |`,
        );
        continue;
      }
      const sp = d.segmented[s.def.config];
      const isSeg = s.def.peer === 'ours-locked-seg10';
      L.push(
        `| ${s.def.config} | ${PEER_LABEL[s.def.peer]} | ${range(s.rate)} | ${isSeg && sp ? fmt(sp.speedup, 2) : '-'} | ${isSeg && sp ? pf(sp.pass) : '-'} | ${fmt(s.waitP50, 2)} | ${range(s.waitP99, 1)} | ${fmt(s.clientPerOp, 2)} (${topCommands(s.clientByCommand, 4)}) | ${fmt(s.clientCpuPerOp, 0)} / ${fmt(s.serverCpuPerOp, 0)} | ${fmt(100 * s.machineCpuShare, 0)}% | ${isSeg ? fmt(s.segmentsUsed) : '-'} | ${s.overlaps} | ${s.n} |`,
      );
    }
  }

  L.push(...sharedHoldsMarkdown(summaries, d.sharedHolds, o));

  // -------- memory
  const mem = main('memory:ours-locked');
  if (mem) {
    L.push('', '## Heap and handles (ours, `@Locked`)', '');
    if (!mem.mem) {
      L.push(`Not measured: ${errorCell(mem)}`);
    } else {
      const runs = mem.mem;
      L.push(
        `${fmt(o.memCycles)} uncontended cycles by ${o.memConcurrency} loops on distinct keys ` +
          '(run with `--expose-gc`; each sample after `global.gc()` twice, all loops paused), ' +
          `after 2,000 warm-up cycles; ${runs.length} run(s), each a fresh process, ` +
          `${fmt(mem.rate.median)} cycles/s. Flat = heap within ${mb(TARGETS.heapGrowthBytes)} ` +
          'of the first sample and handles not above it, in every run (the target row shows the ' +
          'run that grew most).',
        '',
      );
      L.push(
        `| cycles | ${runs.map((_, i) => `heapUsed run ${i + 1}`).join(' | ')} | handles per run | active resources (run 1) |`,
        `|---|${runs.map(() => '---|').join('')}---|---|`,
      );
      for (let i = 0; i < runs[0].length; i++) {
        const x = runs[0][i];
        L.push(
          `| ${fmt(x.cycles)} | ${runs.map((r) => (r[i] ? mb(r[i].heapUsed) : '-')).join(' | ')} | ${runs
            .map((r) => r[i]?.handles ?? '-')
            .join(' / ')} | ${Object.entries(x.resources)
            .map(([k, v]) => `${k} ${v}`)
            .join(', ')} |`,
        );
      }
    }
  }

  // -------- errors
  const errs = summaries.filter((s) => s.errors.length || s.skipped);
  if (errs.length) {
    L.push('', '## Errors and skips', '');
    for (const s of errs) {
      if (s.skipped) L.push(`- ${s.def.id}: skipped: ${oneLine(s.skipped)}`);
      for (const e of s.errors) L.push(`- ${s.def.id}: ${oneLine(e)}`);
    }
  }
  L.push(...scaleMarkdown(summaries));
  L.push(...lockOrderMarkdown(summaries, meta.lockOrderMemory));
  L.push('');
  return L.join('\n');
}

const signed = (n: number) => (Number.isFinite(n) && n >= 0 ? `+${fmt(n)}` : fmt(n));
const mb = (b: number) => `${(b / 2 ** 20).toFixed(2)} MiB`;
const errorCell = (s: CaseSummary) =>
  s.skipped ? `skipped: ${oneLine(s.skipped)}` : `error: ${oneLine(s.errors[0])}`;

// ------------------------------------------------------------------ svg

const plain = (p: PeerName) => PEER_LABEL[p].replace(/\*\*/g, '');

interface Panel {
  title: string;
  groups: string[];
  peers: PeerName[];
  value: (group: string, peer: PeerName) => number | undefined;
  /** Horizontal reference line(s): value per group, or one value for all. */
  line?: { label: string; value: (group: string) => number | undefined };
  log?: boolean;
  unit: string;
  digits: number;
}

function panel(p: Panel, x0: number, y0: number, w: number, h: number): string {
  const out: string[] = [];
  const padL = 60;
  const padB = 40;
  const plotW = w - padL - 10;
  const plotH = h - padB - 30;
  const values = p.groups.flatMap((g) => p.peers.map((peer) => p.value(g, peer) ?? NaN));
  const lines = p.line ? p.groups.map((g) => p.line!.value(g) ?? NaN) : [];
  const all = [...values, ...lines].filter((v) => Number.isFinite(v) && v > 0);
  const vmax = all.length ? Math.max(...all) * 1.1 : 1;
  const vmin = p.log ? Math.max(0.01, Math.min(...all) / 2) : 0;
  const y = (v: number) => {
    if (p.log) {
      const t =
        (Math.log10(Math.max(v, vmin)) - Math.log10(vmin)) / (Math.log10(vmax) - Math.log10(vmin));
      return y0 + 30 + plotH * (1 - t);
    }
    return y0 + 30 + plotH * (1 - v / vmax);
  };
  out.push(
    `<text x="${x0 + padL}" y="${y0 + 18}" font-size="14" font-weight="bold">${esc(p.title)}</text>`,
  );
  // axis + ticks
  const ticks = p.log
    ? Array.from({ length: 8 }, (_, i) => 10 ** (Math.floor(Math.log10(vmin)) + i)).filter(
        (t) => t >= vmin && t <= vmax,
      )
    : Array.from({ length: 5 }, (_, i) => (vmax / 1.1) * (i / 4));
  for (const t of ticks) {
    const ty = y(t);
    out.push(
      `<line x1="${x0 + padL}" x2="${x0 + padL + plotW}" y1="${ty}" y2="${ty}" stroke="#e5e5e5"/>`,
      `<text x="${x0 + padL - 6}" y="${ty + 4}" font-size="11" text-anchor="end">${fmt(t, t < 1 ? 2 : 0)}</text>`,
    );
  }
  out.push(
    `<line x1="${x0 + padL}" x2="${x0 + padL}" y1="${y0 + 30}" y2="${y0 + 30 + plotH}" stroke="#333"/>`,
    `<text x="${x0 + 14}" y="${y0 + 30 + plotH / 2}" font-size="11" transform="rotate(-90 ${x0 + 14} ${y0 + 30 + plotH / 2})" text-anchor="middle">${esc(p.unit)}</text>`,
  );
  const gw = plotW / p.groups.length;
  const bw = Math.min(28, (gw - 16) / p.peers.length);
  p.groups.forEach((g, gi) => {
    const gx = x0 + padL + gi * gw + (gw - bw * p.peers.length) / 2;
    p.peers.forEach((peer, pi) => {
      const v = p.value(g, peer);
      if (v === undefined || !Number.isFinite(v)) return;
      const top = y(v);
      const base = y0 + 30 + plotH;
      out.push(
        `<rect x="${gx + pi * bw}" y="${Math.min(top, base)}" width="${bw - 2}" height="${Math.abs(base - top)}" fill="${PEER_COLOR[peer]}"><title>${esc(`${plain(peer)}, ${g}: ${fmt(v, p.digits)} ${p.unit}`)}</title></rect>`,
      );
      if (bw >= 16) {
        out.push(
          `<text x="${gx + pi * bw + (bw - 2) / 2}" y="${top - 3}" font-size="9" text-anchor="middle">${fmt(v, p.digits)}</text>`,
        );
      }
    });
    const lv = p.line?.value(g);
    if (lv !== undefined && Number.isFinite(lv)) {
      const ly = y(lv);
      out.push(
        `<line x1="${x0 + padL + gi * gw + 4}" x2="${x0 + padL + (gi + 1) * gw - 4}" y1="${ly}" y2="${ly}" stroke="#d00" stroke-dasharray="5 3"/>`,
        `<text x="${x0 + padL + (gi + 1) * gw - 6}" y="${ly - 3}" font-size="10" fill="#d00" text-anchor="end">${esc(p.line!.label)} ${fmt(lv, p.digits)}</text>`,
      );
    }
    out.push(
      `<text x="${x0 + padL + gi * gw + gw / 2}" y="${y0 + 30 + plotH + 16}" font-size="12" text-anchor="middle">${esc(g)}</text>`,
    );
  });
  return out.join('\n');
}

function svg(summaries: CaseSummary[], d: Derived): string {
  const W = 1000;
  const PH = 300;
  const get = (id: string) => summaries.find((s) => s.def.id === id && s.n > 0);
  const hotGroups = ['1x50', '4x12', '1x50 think 5 ms', '4x12 think 5 ms'];
  const hotId = (g: string, peer: PeerName) => {
    const [topo, , think] = g.split(' ');
    return `hot:${topo}:think${think ?? 0}:${peer}`;
  };
  const hotPeers: PeerName[] = [
    'redlock',
    'redlock-tuned',
    'mutex',
    'nest-redlock',
    'ours-locked',
    'ours-using',
  ];
  const panels: Panel[] = [];
  if (summaries.some((s) => s.def.scenario === 'hot' && s.n > 0)) {
    panels.push({
      title:
        'Hot key: throughput as a fraction of the timer-only ideal (1 worker, the section alone)',
      groups: hotGroups,
      peers: hotPeers,
      value: (g, peer) => d.hot[hotId(g, peer)]?.vsTimer,
      line: { label: 'target', value: () => TARGETS.hotVsIdeal },
      unit: 'x timer-only',
      digits: 2,
    });
    panels.push({
      title: `Hot key: p99 wait (ms, log scale); red = ${TARGETS.p99PerCallerSection} x callers x section`,
      groups: hotGroups,
      peers: hotPeers,
      value: (g, peer) => get(hotId(g, peer))?.waitP99.median,
      line: { label: 'bound', value: (g) => d.hot[hotId(g, 'ours-locked')]?.p99Bound },
      log: true,
      unit: 'ms',
      digits: 0,
    });
    panels.push({
      title: 'Hot key: Redis commands sent per critical section',
      groups: hotGroups,
      peers: hotPeers,
      value: (g, peer) => get(hotId(g, peer))?.clientPerOp,
      line: { label: 'target', value: () => TARGETS.commandsPerSection },
      unit: 'commands',
      digits: 1,
    });
  }
  if (summaries.some((s) => s.def.scenario === 'uncontended' && s.n > 0)) {
    panels.push({
      title: 'Uncontended lock + unlock cycles/s',
      groups: ['1 server', '3 servers'],
      peers: [...UNCONTENDED_PEERS],
      value: (g, peer) => get(`uncontended:${g.startsWith('1') ? 1 : 3}:${peer}`)?.rate.median,
      line: {
        label: '0.9 x floor',
        value: (g) => 0.9 * d.floorUncontended[g.startsWith('1') ? 1 : 3],
      },
      unit: 'cycles/s',
      digits: 0,
    });
  }
  const legendPeers: PeerName[] = [
    'floor',
    'redlock',
    'redlock-tuned',
    'mutex',
    'nest-redlock',
    'ours-locked',
    'ours-using',
  ];
  const legendH = 30;
  const H = legendH + panels.length * PH + 10;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="Helvetica, Arial, sans-serif">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
  ];
  legendPeers.forEach((peer, i) => {
    const x = 10 + i * 140;
    parts.push(
      `<rect x="${x}" y="10" width="12" height="12" fill="${PEER_COLOR[peer]}"/>`,
      `<text x="${x + 16}" y="20" font-size="10">${esc(plain(peer).replace(/ \(.*\)$/, ''))}</text>`,
    );
  });
  panels.forEach((p, i) => parts.push(panel(p, 0, legendH + i * PH, W, PH)));
  if (panels.length === 0) {
    parts.push(`<text x="20" y="60" font-size="14">No hot-key or uncontended results.</text>`);
  }
  parts.push('</svg>', '');
  return parts.join('\n');
}

// ------------------------------------------------------------------ files

export function writeReport(
  dir: string,
  summaries: CaseSummary[],
  meta: ReportMeta,
): { md: string; json: string; svg: string } {
  fs.mkdirSync(dir, { recursive: true });
  const d = derive(summaries);
  const files = {
    md: path.join(dir, 'latest.md'),
    json: path.join(dir, 'latest.json'),
    svg: path.join(dir, 'latest.svg'),
  };
  // Written to a temp file then renamed, so a reader never sees half a file.
  const write = (file: string, text: string) => {
    fs.writeFileSync(`${file}.tmp`, text);
    fs.renameSync(`${file}.tmp`, file);
  };
  write(files.md, markdown(summaries, d, meta));
  write(
    files.json,
    `${JSON.stringify({ meta, targets: { ...TARGETS, ...SHARED_TARGETS }, derived: d, cases: summaries }, jsonSafe, 1)}\n`,
  );
  write(files.svg, svg(summaries, d));
  const scale = scaleSvg(summaries);
  if (scale) write(path.join(dir, 'latest-scale.svg'), scale);
  return files;
}

/** NaN and Infinity become null (JSON has neither). */
function jsonSafe(_key: string, value: unknown): unknown {
  return typeof value === 'number' && !Number.isFinite(value) ? null : value;
}

/**
 * Where each peer's server µs per uncontended cycle go, command by command: calls per cycle,
 * µs per cycle and per call. A command the process never sent ran inside a script (shown in
 * brackets): its µs are part of the script's own line already.
 */
function serverBreakdown(unc: CaseSummary[]): string[] {
  const L = [
    '**Server time by command** (uncontended; `INFO commandstats` calls and usec per cycle, ' +
      'median over the runs; [in a script]: run by a script, its µs already in the script line):',
    '',
    '| servers | peer | command: calls/cycle, µs/cycle (µs/call) |',
    '|---|---|---|',
  ];
  for (const s of unc) {
    if (s.n === 0 || s.def.replica) continue;
    const cells = Object.entries(s.serverUsByCommand)
      .filter(([name]) => (s.serverByCommand[name] ?? 0) >= 0.005)
      .sort((a, b) => b[1] - a[1])
      .map(([name, us]) => {
        const calls = s.serverByCommand[name];
        const label = s.clientByCommand[name] ? name : `[${name}]`;
        return `${label} ${fmt(calls, 2)}, ${fmt(us, 2)} (${fmt(us / calls, 2)})`;
      });
    L.push(`| ${s.def.servers} | ${PEER_LABEL[s.def.peer]} | ${cells.join('; ') || '-'} |`);
  }
  return L;
}
