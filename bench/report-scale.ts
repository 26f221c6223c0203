/**
 * The report of the scale scenarios (issue 16): cross-process handoff, many keys at once,
 * 100,000 holds in one process, 10,000 waiters on one key. Target rows, markdown sections and a
 * chart of heap and event-loop delay over time (latest-scale.svg).
 */
import type { HoldsResult, TimeSample, WaitersResult } from './protocol';
import { esc, fmt, PEER_COLOR, PEER_LABEL, pf, tableSection } from './report-format';
import type { CaseSummary } from './run';
import { median } from './stats';

/** PRODUCT.md section 4, the scale targets. */
export const SCALE_TARGETS = {
  handoffP50Ms: 0.3,
  handoffP99Ms: 1,
  manyVsFloor: 0.95,
  heapPerHoldBytes: 1024,
  /** Renewal commands per second at most this share of holds / (ttl / 3) ("batched"). */
  renewalShare: 0.1,
  loopP99Ms: 10,
  /** Flat grant cost: the slowest tenth of the line at most this many times the fastest. */
  grantSpread: 2,
  /** Flat as the line grows: a long line's ms per grant at most this many times a tenth-long one's. */
  grantGrowth: 2,
  /** Uncontended client CPU per cycle within this many µs of the floor's. */
  cpuOverFloorUs: 10,
};

const kib = (b: number) => `${fmt(b / 1024, 2)} KiB`;
const sum = (c: Record<string, number>) => Object.values(c).reduce((a, b) => a + b, 0);

const holdsOf = (s: CaseSummary) =>
  (s.scale ?? []).filter((x): x is HoldsResult => x.kind === 'holds');
const waitersOf = (s: CaseSummary) =>
  (s.scale ?? []).filter((x): x is WaitersResult => x.kind === 'waiters');

/** What a holds run shows, derived. */
export function holdFigures(h: HoldsResult) {
  const perHold = (h.heapHeld - h.heapBefore) / Math.max(1, h.taken);
  const commandsPerS = (sum(h.commandsInHold) / h.holdPhaseMs) * 1000;
  const unbatched = h.taken / (h.ttl / 3 / 1000);
  return { perHold, commandsPerS, unbatched, share: commandsPerS / unbatched };
}

/** The slowest tenth's ms per grant over the fastest's (tenths with no figure left out). */
function grantSpread(msBySlice: readonly number[]): number {
  const slices = msBySlice.filter((x) => Number.isFinite(x) && x > 0);
  return slices.length ? Math.max(...slices) / Math.min(...slices) : NaN;
}

/** The whole drain's ms per grant (GC included). */
const drainMsPerGrant = (w: WaitersResult) => w.drainMs / Math.max(1, w.granted);

/** What a waiters run shows, derived. */
export function waiterFigures(w: WaitersResult) {
  const perWaiter = (w.heapQueued - w.heapBefore) / Math.max(1, w.count);
  const spread = grantSpread(w.grantMsBySlice);
  const accounted =
    w.granted + w.timedOut === w.count && w.timedOut === w.shortWaits && sum(w.otherErrors) === 0;
  return { perWaiter, spread, accounted };
}

/**
 * Grant cost as the line grows, over several waiters runs: the long line's whole-drain ms per
 * grant and the lines a tenth as long (each run's median line), medians over the runs, and their
 * ratio; undefined for runs without the shorter lines.
 */
export function grantGrowth(runs: readonly WaitersResult[]) {
  const withShort = runs.filter((w) => w.shortLineMsPerGrant?.length);
  if (!withShort.length) return undefined;
  const long = median(withShort.map(drainMsPerGrant));
  const short = median(withShort.map((w) => median(w.shortLineMsPerGrant!)));
  return { long, short, ratio: long / short, shortLine: withShort[0].shortLine ?? 0 };
}

/**
 * The grant cost of several waiters runs: each tenth's median over the runs (one run's tenth is
 * 10-20 ms on a short line, so a single young-generation collection can double it), and the
 * spread of those medians.
 */
export function medianGrantCost(runs: readonly WaitersResult[]) {
  const tenths = Math.min(...runs.map((w) => w.grantMsBySlice.length));
  const grantMsBySlice = Array.from({ length: tenths }, (_, i) =>
    median(runs.map((w) => w.grantMsBySlice[i]).filter((x) => Number.isFinite(x) && x > 0)),
  );
  return { grantMsBySlice, spread: grantSpread(grantMsBySlice), runs: runs.length };
}

/** Target rows (markdown table lines) for the scale scenarios, ours only. */
export function scaleTargetRows(summaries: CaseSummary[]): string[] {
  const L: string[] = [];
  const get = (id: string) => summaries.find((s) => s.def.id === id && s.n > 0);
  const t = SCALE_TARGETS;
  for (const servers of [1, 3]) {
    const ours = get(`uncontended:${servers}:ours-locked`);
    const floor = get(`uncontended:${servers}:floor`);
    if (ours && floor) {
      const over = ours.cpuUsPerOp - floor.cpuUsPerOp;
      L.push(
        `| uncontended, ${servers} server(s): client CPU per cycle within ~${t.cpuOverFloorUs} µs of the floor | ` +
          `${fmt(ours.cpuUsPerOp, 1)} vs ${fmt(floor.cpuUsPerOp, 1)} µs (+${fmt(over, 1)}) | ${pf(over <= t.cpuOverFloorUs)} |`,
      );
    }
  }
  const h = get('handoff:2x1:ours-locked')?.handoff;
  if (h) {
    // The raw pub/sub pass of the same run: what a grant by message costs at least here.
    const f = get('handoff:2x1:floor-pubsub')?.handoff;
    const floor = (v: number | undefined) => (f ? ` (raw pub/sub pass ${fmt(v, 3)} ms)` : '');
    L.push(
      `| cross-process handoff (2 x 1, one node): p50 <= ${t.handoffP50Ms} ms | ${fmt(h.gapP50, 3)} ms${floor(f?.gapP50)} | ${pf(h.gapP50 <= t.handoffP50Ms)} |`,
      `| cross-process handoff (2 x 1, one node): p99 <= ${t.handoffP99Ms} ms | ${fmt(h.gapP99, 3)} ms${floor(f?.gapP99)} | ${pf(h.gapP99 <= t.handoffP99Ms)} |`,
    );
  }
  for (const callers of [64, 1024]) {
    const s = get(`many:${callers}:ours-locked`);
    const f = get(`many:${callers}:floor`);
    if (s && f) {
      L.push(
        `| many keys, ${callers} callers each on its own key: >= ${t.manyVsFloor} x raw floor (same concurrency, one connection) | ` +
          `${fmt(s.vsFloor, 2)} x (${fmt(s.rate.median)} vs ${fmt(f.rate.median)} cycles/s) | ${pf((s.vsFloor ?? 0) >= t.manyVsFloor)} |`,
      );
    }
  }
  const holds = get('holds:ours-locked');
  for (const run of holds ? holdsOf(holds).slice(0, 1) : []) {
    const f = holdFigures(run);
    const tag = `${fmt(run.taken)} holds (ttl ${run.ttl / 1000} s, held ${fmt(run.holdPhaseMs / 1000, 0)} s)`;
    L.push(
      `| ${tag}: heap per hold <= 1 KiB | ${kib(f.perHold)} | ${pf(f.perHold <= t.heapPerHoldBytes)} |`,
      `| ${tag}: renewals batched, commands/s <= ${t.renewalShare} x holds / (ttl / 3) = ${fmt(t.renewalShare * f.unbatched)} | ` +
        `${fmt(f.commandsPerS, 1)} /s (${fmt(f.share, 3)} x ${fmt(f.unbatched)}) | ${pf(f.share <= t.renewalShare)} |`,
      `| ${tag}: event-loop delay p99 <= ${t.loopP99Ms} ms while renewals run | ${fmt(run.loopP99, 1)} ms (max ${fmt(run.loopMax, 0)}) | ${pf(run.loopP99 <= t.loopP99Ms)} |`,
      `| ${tag}: none lost, all released, nothing left in Redis | lost ${run.lost}, release failures ${run.releaseFailures}, ${run.leftInRedis} lock keys left | ${pf(run.lost === 0 && run.releaseFailures === 0 && run.leftInRedis === 0 && run.taken === run.count)} |`,
    );
  }
  const waiters = get('waiters:ours-locked');
  const runs = waiters ? waitersOf(waiters) : [];
  if (runs.length) {
    const run = runs[0];
    const cost = medianGrantCost(runs);
    const all = runs.map(waiterFigures);
    const tag = `${fmt(run.count)} waiters on one key`;
    const each = (f: (w: WaitersResult) => number) => runs.map(f).join(' / ');
    L.push(
      `| ${tag}: flat grant cost (slowest tenth of the line <= ${t.grantSpread} x the fastest; per-tenth medians of ${cost.runs} run(s)) | ${fmt(cost.spread, 2)} x (ms per grant ${cost.grantMsBySlice.map((x) => fmt(x, 3)).join(' / ')}) | ${pf(cost.spread <= t.grantSpread)} |`,
      ...growthRow(tag, runs),
      `| ${tag}: FIFO kept | ${each((w) => w.outOfOrder)} granted out of arrival order | ${pf(runs.every((w) => w.outOfOrder === 0))} |`,
      `| ${tag}: every waiter gets the lock or its timeout, nothing left in Redis | ${fmt(run.granted)} granted + ${fmt(run.timedOut)} timed out (of ${fmt(run.shortWaits)} short waits) of ${fmt(run.count)}; other errors ${each((w) => sum(w.otherErrors))}; ${each((w) => w.leftInRedis)} keys left | ${pf(all.every((f) => f.accounted) && runs.every((w) => w.leftInRedis === 0))} |`,
      `| ${tag}: heap per waiter (no target; includes the bench's own promise per call) | ${kib(all[0].perWaiter)} | - |`,
    );
  }
  return L;
}

/** One run's whole-drain ms per grant and its shorter lines' (each), or '' without them. */
function drainCost(w: WaitersResult): string {
  if (!w.shortLineMsPerGrant?.length) return '';
  return `${fmt(drainMsPerGrant(w), 4)} / ${w.shortLineMsPerGrant.map((x) => fmt(x, 4)).join(', ')}`;
}

/** The target row of grant cost as the line grows (none for runs without shorter lines). */
function growthRow(tag: string, runs: readonly WaitersResult[]): string[] {
  const g = grantGrowth(runs);
  if (!g) return [];
  const bound = SCALE_TARGETS.grantGrowth;
  return [
    `| ${tag}: flat grant cost as the line grows (whole drain, ms per grant <= ${bound} x a line of ${fmt(g.shortLine)}'s; medians of ${runs.length} run(s)) | ` +
      `${fmt(g.ratio, 2)} x (${fmt(g.long, 4)} vs ${fmt(g.short, 4)} ms per grant) | ${pf(g.ratio <= bound)} |`,
  ];
}

/** The markdown sections of the scale scenarios. */
export function scaleMarkdown(summaries: CaseSummary[]): string[] {
  const L: string[] = [];
  const of = (scenario: string) => summaries.filter((s) => s.def.scenario === scenario);
  const handoff = of('handoff');
  if (handoff.length) {
    L.push(
      ...tableSection(
        'Cross-process handoff (one node, 2 processes x 1 caller, 1 ms section)',
        'Every handoff crosses processes. Gap = section end (before its release) -> the next section ' +
          'starts in the other process, on the shared monotonic clock. Before the timed run the two ' +
          'processes pass the key between them (`--handoff-warmup` sections each), so the ' +
          'cross-process path is compiled. The rows with a peer name are timed as they are; the ' +
          '"with probe" row runs ours again with a probe subscriber in each process (a connection ' +
          'of its own, `PSUBSCRIBE nest-locked:g:*`) to split the gap: the releasing call resolved ' +
          'in the releasing process (its round trip); the grant message heard by the probe in the ' +
          "next holder's process (Redis: the release script, PUBLISH, delivery); heard -> the next " +
          "section starts (the waiter's event loop and our code). The probe's own deliveries make " +
          "that row's gap a little longer. The raw pub/sub pass is no lock: each process hands the " +
          'turn to the other with one PUBLISH after its section, the least a grant by message ' +
          'costs on this machine. Peers that poll have no grant message (`-`).',
        [
          'peer',
          'sections/s',
          'gap p50 ms',
          'gap p99 ms',
          'release resolved p50',
          'grant heard p50 / p99',
          'heard -> section p50 / p99',
          'handoffs',
          'n',
        ],
      ),
    );
    for (const s of handoff) {
      const h = s.handoff;
      L.push(
        `| ${PEER_LABEL[s.def.peer]}${s.def.spec.probe ? ', with probe' : ''} | ${fmt(s.rate.median)} | ${fmt(h?.gapP50, 3)} | ${fmt(h?.gapP99, 3)} | ${fmt(h?.releaseP50, 3)} | ${fmt(h?.heardP50, 3)} / ${fmt(h?.heardP99, 3)} | ${fmt(h?.enterP50, 3)} / ${fmt(h?.enterP99, 3)} | ${fmt(h?.n)} | ${s.n} |`,
      );
    }
  }
  const many = of('many');
  if (many.length) {
    L.push(
      ...tableSection(
        'Many keys at once (each caller on its own key, one process)',
        'N concurrent callers, each looping lock + unlock on a key of its own (one connection per ' +
          'server for every peer). Every peer in one process, blocks of 8 cycles per caller, order ' +
          'shuffled each round, after the uncontended warm-up and at least 4,000 untimed cycles of ' +
          'the same blocks (the concurrent path compiled); x floor: each block over the floor ' +
          'block of the same round.',
        ['callers', 'peer', 'cycles/s', 'x floor', 'client CPU µs/cycle', 'client cmds/cycle', 'n'],
      ),
    );
    for (const s of many) {
      L.push(
        `| ${s.def.spec.concurrency} | ${PEER_LABEL[s.def.peer]} | ${fmt(s.rate.median)} (${fmt(s.rate.min)}–${fmt(s.rate.max)}) | ${fmt(s.vsFloor, 2)} | ${fmt(s.cpuUsPerOp, 1)} | ${fmt(s.clientPerOp, 2)} | ${s.n} |`,
      );
    }
  }
  const holds = of('holds');
  if (holds.length) {
    L.push(
      ...tableSection(
        'Many holds in one process',
        'N distinct keys taken 256 at a time and kept, renewed by each peer as it does (ours: ' +
          '`LockService.acquire`, watchdog on, ttl 30 s, renewed every 10 s; redlock 5: `using`, ' +
          'extends ~0.5 s before the end; redis-semaphore: `Mutex` with lockTimeout 30 s, refresh ' +
          'every 24 s), then all released. Heap per hold: collected heap with every hold minus before ' +
          'the first. Commands/s: client-sent over the hold phase only (after the last acquire). ' +
          'Event-loop delay: `monitorEventLoopDelay` over the hold phase. Unbatched = one renewal ' +
          'per hold per ttl/3.',
        [
          'peer',
          'holds',
          'acquire s',
          'heap per hold',
          'heap before / held / after release (collected)',
          'commands/s in hold (unbatched)',
          'loop delay p50 / p99 / max ms',
          'lost',
          'release s',
          'left in Redis',
          'n',
        ],
      ),
    );
    for (const s of holds) {
      if (s.n === 0) {
        L.push(
          `| ${PEER_LABEL[s.def.peer]} | ${s.skipped ?? s.errors[0]?.split('\n')[0] ?? '-'} |`,
        );
        continue;
      }
      for (const h of holdsOf(s)) {
        const f = holdFigures(h);
        L.push(
          `| ${PEER_LABEL[s.def.peer]} | ${fmt(h.taken)} / ${fmt(h.count)} | ${fmt(h.acquireMs / 1000, 1)} | ${kib(f.perHold)} | ${[h.heapBefore, h.heapHeld, h.heapAfter].map((b) => fmt(b / 2 ** 20, 1)).join(' / ')} MiB | ${fmt(f.commandsPerS, 1)} (${fmt(f.unbatched)}) | ${fmt(h.loopP50, 1)} / ${fmt(h.loopP99, 1)} / ${fmt(h.loopMax, 0)} | ${h.lost} | ${fmt(h.releaseMs / 1000, 1)} | ${h.leftInRedis} | ${s.n} |`,
        );
      }
    }
  }
  const waiters = of('waiters');
  if (waiters.length) {
    L.push(
      ...tableSection(
        'Many waiters on one key (ours)',
        'One holder; then N callers of `LockService.acquire` on the same key in one process (every ' +
          '10th with `waitTimeout: 200` ms: it must time out in the line); then the holder releases ' +
          'and each caller takes and releases the key in turn. Heap per waiter: from a line of its ' +
          'own, weighed with forced collections once all are in line (a forced full collection ' +
          'right before the timed drain made its first tenths 2-3x slower). Grant ' +
          'cost: mean ms between consecutive grants per tenth of the line, from the longest line to ' +
          'the shortest; one row per run and the per-tenth medians (the target uses those). As the ' +
          "line grows: the whole drain's ms per grant beside that of five lines a tenth as long, " +
          'drained the same way in the same process before it (GC included in both). Before ' +
          'the timed line, two lines of a fifth of its length (at most 2,000) on keys of their own compile the paths ' +
          'of queueing, passing and timing out. Peers that poll (redlock, ' +
          'redis-semaphore) have no line to measure: not run.',
        [
          'waiters',
          'heap per waiter',
          'ms per grant by tenth of the line (line length)',
          'GC pause ms by tenth',
          'ms per grant, whole drain / lines a tenth as long',
          'CPU µs per grant',
          'out of order',
          'granted / timed out / other',
          'drain s',
          'loop delay p99 (max of 250 ms windows)',
          'left in Redis',
        ],
      ),
    );
    for (const s of waiters) {
      const runs = waitersOf(s);
      for (const w of runs) {
        const f = waiterFigures(w);
        L.push(
          `| ${fmt(w.count)} | ${kib(f.perWaiter)} | ${w.grantMsBySlice.map((x, i) => `${fmt(x, 3)} (${fmt(w.lineAtSlice[i])})`).join(', ')} | ${(w.gcMsBySlice ?? []).map((x) => fmt(x, 0)).join(', ')} | ${drainCost(w)} | ${fmt(w.cpuUsPerGrant, 0)} | ${w.outOfOrder} | ${fmt(w.granted)} / ${fmt(w.timedOut)} / ${sum(w.otherErrors)} | ${fmt(w.drainMs / 1000, 2)} | ${fmt(w.loopP99, 1)} ms | ${w.leftInRedis} |`,
        );
      }
      if (runs.length > 1) {
        const cost = medianGrantCost(runs);
        const g = grantGrowth(runs);
        const growth = g ? `${fmt(g.long, 4)} / ${fmt(g.short, 4)} (${fmt(g.ratio, 2)} x)` : '';
        L.push(
          `| median of ${runs.length} | | ${cost.grantMsBySlice.map((x) => fmt(x, 3)).join(', ')} | | ${growth} | ${fmt(median(runs.map((w) => w.cpuUsPerGrant)), 0)} | | | ${fmt(median(runs.map((w) => w.drainMs)) / 1000, 2)} | | |`,
        );
      }
    }
  }
  if (holds.length || waiters.length) {
    L.push('', 'Heap and event-loop delay over time: `latest-scale.svg`.');
  }
  return L;
}

// ------------------------------------------------------------------ chart

interface Series {
  name: string;
  color: string;
  points: [number, number][];
}

function lineChart(
  title: string,
  unit: string,
  series: Series[],
  x0: number,
  y0: number,
  w: number,
  h: number,
  limit?: number,
): string {
  const out: string[] = [];
  const padL = 60;
  const plotW = w - padL - 20;
  const plotH = h - 70;
  const xs = series.flatMap((s) => s.points.map((p) => p[0]));
  const ys = series.flatMap((s) => s.points.map((p) => p[1]));
  if (limit !== undefined) ys.push(limit);
  const xmax = Math.max(1, ...xs);
  const ymax = Math.max(1e-9, ...ys) * 1.1;
  const X = (x: number) => x0 + padL + (x / xmax) * plotW;
  const Y = (y: number) => y0 + 30 + plotH * (1 - y / ymax);
  out.push(
    `<text x="${x0 + padL}" y="${y0 + 18}" font-size="14" font-weight="bold">${esc(title)}</text>`,
  );
  for (let i = 0; i <= 4; i++) {
    const v = (ymax / 1.1) * (i / 4);
    out.push(
      `<line x1="${X(0)}" x2="${X(xmax)}" y1="${Y(v)}" y2="${Y(v)}" stroke="#e5e5e5"/>`,
      `<text x="${X(0) - 6}" y="${Y(v) + 4}" font-size="11" text-anchor="end">${fmt(v, v < 10 ? 1 : 0)}</text>`,
    );
  }
  for (let i = 0; i <= 5; i++) {
    const v = (xmax * i) / 5;
    out.push(
      `<text x="${X(v)}" y="${y0 + 30 + plotH + 16}" font-size="11" text-anchor="middle">${fmt(v, 0)} s</text>`,
    );
  }
  out.push(
    `<text x="${x0 + 14}" y="${y0 + 30 + plotH / 2}" font-size="11" transform="rotate(-90 ${x0 + 14} ${y0 + 30 + plotH / 2})" text-anchor="middle">${esc(unit)}</text>`,
  );
  if (limit !== undefined) {
    out.push(
      `<line x1="${X(0)}" x2="${X(xmax)}" y1="${Y(limit)}" y2="${Y(limit)}" stroke="#d00" stroke-dasharray="5 3"/>`,
      `<text x="${X(xmax)}" y="${Y(limit) - 3}" font-size="10" fill="#d00" text-anchor="end">target ${fmt(limit, 0)}</text>`,
    );
  }
  series.forEach((s, i) => {
    if (!s.points.length) return;
    const d = s.points.map((p, k) => `${k ? 'L' : 'M'}${X(p[0]).toFixed(1)} ${Y(p[1]).toFixed(1)}`);
    out.push(`<path d="${d.join(' ')}" fill="none" stroke="${s.color}" stroke-width="2"/>`);
    out.push(
      `<rect x="${x0 + padL + 10 + i * 220}" y="${y0 + h - 22}" width="12" height="12" fill="${s.color}"/>`,
      `<text x="${x0 + padL + 26 + i * 220}" y="${y0 + h - 12}" font-size="11">${esc(s.name)}</text>`,
    );
  });
  return out.join('\n');
}

/** Heap and event-loop delay over time of the holds and waiters runs; undefined if none ran. */
export function scaleSvg(summaries: CaseSummary[]): string | undefined {
  const holds = summaries.filter((s) => s.def.scenario === 'holds' && s.n > 0);
  const waiters = summaries.filter((s) => s.def.scenario === 'waiters' && s.n > 0);
  if (!holds.length && !waiters.length) return undefined;
  const series = (
    list: CaseSummary[],
    samples: (s: CaseSummary) => TimeSample[] | undefined,
    y: (x: TimeSample) => number,
  ): Series[] =>
    list.map((s) => ({
      name: PEER_LABEL[s.def.peer].replace(/\*\*/g, ''),
      color: PEER_COLOR[s.def.peer],
      points: (samples(s) ?? []).map((x) => [x.t / 1000, y(x)] as [number, number]),
    }));
  const holdSamples = (s: CaseSummary) => holdsOf(s)[0]?.samples;
  const waiterSamples = (s: CaseSummary) => waitersOf(s)[0]?.samples;
  const W = 1000;
  const PH = 280;
  const charts: string[] = [];
  const add = (title: string, unit: string, list: Series[], limit?: number) =>
    charts.push(lineChart(title, unit, list, 0, charts.length * PH, W, PH, limit));
  if (holds.length) {
    const n = holdsOf(holds[0])[0]?.count ?? 0;
    add(
      `${fmt(n)} holds: heap used (MiB) over time (acquire, hold, release)`,
      'MiB',
      series(holds, holdSamples, (x) => x.heapUsed / 2 ** 20),
    );
    add(
      `${fmt(n)} holds: event-loop delay p99 per second (ms)`,
      'ms',
      series(holds, holdSamples, (x) => x.loopP99),
      SCALE_TARGETS.loopP99Ms,
    );
    add(
      `${fmt(n)} holds: commands sent per second`,
      'commands/s',
      series(holds, holdSamples, (x) => x.commands),
    );
  }
  if (waiters.length) {
    const n = waitersOf(waiters[0])[0]?.count ?? 0;
    add(
      `${fmt(n)} waiters: heap used (MiB) over time (queue, time-outs, drain)`,
      'MiB',
      series(waiters, waiterSamples, (x) => x.heapUsed / 2 ** 20),
    );
    add(
      `${fmt(n)} waiters: event-loop delay p99 per 250 ms (ms)`,
      'ms',
      series(waiters, waiterSamples, (x) => x.loopP99),
      SCALE_TARGETS.loopP99Ms,
    );
  }
  const H = charts.length * PH + 10;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="Helvetica, Arial, sans-serif">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    ...charts,
    '</svg>',
    '',
  ].join('\n');
}
