/** Small statistics helpers shared by the orchestrator and the report. */

export function median(values: readonly number[]): number {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

/** Nearest-rank percentile (p in 0..100) of unsorted values. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const v = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * v.length);
  return v[Math.min(v.length - 1, Math.max(0, rank - 1))];
}

export function min(values: readonly number[]): number {
  const v = values.filter((x) => Number.isFinite(x));
  return v.length ? Math.min(...v) : NaN;
}

export function max(values: readonly number[]): number {
  const v = values.filter((x) => Number.isFinite(x));
  return v.length ? Math.max(...v) : NaN;
}

export interface Section {
  worker: number;
  enter: number;
  exit: number;
  segment: number;
}

/** Run lengths of consecutive sections (in entry order) taken by the same worker. */
export function streaks(sections: readonly Section[]): { max: number; mean: number } {
  if (sections.length === 0) return { max: NaN, mean: NaN };
  const ordered = [...sections].sort((a, b) => a.enter - b.enter);
  const runs: number[] = [];
  let current = 1;
  for (let i = 1; i < ordered.length; i++) {
    if (ordered[i].worker === ordered[i - 1].worker) current++;
    else {
      runs.push(current);
      current = 1;
    }
  }
  runs.push(current);
  return { max: Math.max(...runs), mean: runs.reduce((a, b) => a + b, 0) / runs.length };
}

/**
 * Handoff gaps: from one section's exit to the next section's entry on the same lock (segment),
 * split by whether the next holder runs in the same process or in another one (worker ids are
 * `proc * 1000 + index`). The gap is the lock's cost per section on top of the section itself.
 */
export function handoffGaps(sections: readonly Section[]): {
  sameP50: number;
  otherP50: number;
  otherShare: number;
} {
  const bySegment = new Map<number, Section[]>();
  for (const s of sections) {
    const list = bySegment.get(s.segment) ?? [];
    list.push(s);
    bySegment.set(s.segment, list);
  }
  const same: number[] = [];
  const other: number[] = [];
  for (const list of bySegment.values()) {
    list.sort((a, b) => a.enter - b.enter);
    for (let i = 1; i < list.length; i++) {
      const gap = list[i].enter - list[i - 1].exit;
      const sameProc = Math.floor(list[i].worker / 1000) === Math.floor(list[i - 1].worker / 1000);
      (sameProc ? same : other).push(gap);
    }
  }
  const p50 = (v: number[]) => {
    if (v.length === 0) return NaN;
    const s = [...v].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.ceil(s.length / 2) - 1)];
  };
  const n = same.length + other.length;
  return { sameP50: p50(same), otherP50: p50(other), otherShare: n ? other.length / n : NaN };
}

/**
 * Mutual exclusion check: sections of the same lock (same segment) whose intervals overlap by
 * more than `epsMs`. The clock is CLOCK_MONOTONIC, shared by every process.
 */
export function overlaps(
  sections: readonly Section[],
  epsMs = 0.01,
): { count: number; maxMs: number } {
  const bySegment = new Map<number, Section[]>();
  for (const s of sections) {
    const list = bySegment.get(s.segment) ?? [];
    list.push(s);
    bySegment.set(s.segment, list);
  }
  let count = 0;
  let maxMs = 0;
  for (const list of bySegment.values()) {
    list.sort((a, b) => a.enter - b.enter);
    let lastExit = -Infinity;
    for (const s of list) {
      const o = lastExit - s.enter;
      if (o > epsMs) {
        count++;
        maxMs = Math.max(maxMs, o);
      }
      lastExit = Math.max(lastExit, s.exit);
    }
  }
  return { count, maxMs };
}

/** The most sections in progress at the same moment (a section ending as one starts: not both). */
export function maxConcurrent(sections: readonly Section[]): number {
  const edges: [number, number][] = [];
  for (const s of sections) edges.push([s.enter, 1], [s.exit, -1]);
  edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let most = 0;
  for (const [, d] of edges) {
    now += d;
    most = Math.max(most, now);
  }
  return most;
}

/**
 * Read/write exclusion check: write sections (`kinds[i] === 1`) that overlap any other section
 * by more than `epsMs`; reads may overlap each other.
 */
export function writeOverlaps(
  sections: readonly Section[],
  kinds: readonly number[],
  epsMs = 0.01,
): number {
  const order = sections.map((s, i) => ({ ...s, write: kinds[i] === 1 }));
  order.sort((a, b) => a.enter - b.enter);
  let count = 0;
  for (let i = 0; i < order.length; i++) {
    if (!order[i].write) continue;
    const w = order[i];
    const overlapped = order.some(
      (o, j) => j !== i && o.enter < w.exit - epsMs && o.exit > w.enter + epsMs,
    );
    if (overlapped) count++;
  }
  return count;
}

/**
 * Share of sections that entered before a caller that arrived earlier and was still waiting
 * (it was overtaken): 0 for a strict FIFO. Callers that arrive and enter at once never count.
 */
export function outOfOrder(calls: readonly { arrival: number; enter: number }[]): number {
  const v = calls.filter((c) => Number.isFinite(c.arrival));
  if (v.length === 0) return NaN;
  const byArrival = [...v].sort((a, b) => a.arrival - b.arrival);
  let latestEnter = -Infinity;
  let overtaking = 0;
  for (const c of byArrival) {
    // Someone who arrived earlier entered after this one, and had arrived before this one entered.
    if (latestEnter > c.enter) overtaking++;
    latestEnter = Math.max(latestEnter, c.enter);
  }
  return overtaking / v.length;
}

/** Where a cross-process handoff's time goes, ms (p50 / p99 over every such handoff). */
export interface HandoffSplit {
  n: number;
  /** Section end in one process -> the next section's start in another. */
  gapP50: number;
  gapP99: number;
  /** Section end -> the releasing call resolved in the releasing process (its round trip). */
  releaseP50: number;
  /** Section end -> the grant message heard by a probe subscriber in the next holder's process. */
  heardP50: number;
  heardP99: number;
  /** Grant message heard -> the next section starts (the waiter's own event loop and code). */
  enterP50: number;
  enterP99: number;
}

/**
 * Cross-process handoffs of a run with one caller per process: for each section followed by
 * one in another process, the gap split at the moment that process heard the grant message.
 */
export function handoffSplit(
  procs: readonly { proc: number; sections: number[]; released: number[]; heard: number[] }[],
): HandoffSplit {
  const all: { proc: number; enter: number; exit: number; released: number }[] = [];
  for (const p of procs) {
    for (let i = 0; i * 3 < p.sections.length; i++) {
      all.push({
        proc: p.proc,
        enter: p.sections[i * 3 + 1],
        exit: p.sections[i * 3 + 2],
        released: p.released[i] ?? NaN,
      });
    }
  }
  all.sort((a, b) => a.enter - b.enter);
  const heardBy = new Map(procs.map((p) => [p.proc, [...p.heard].sort((a, b) => a - b)]));
  const gap: number[] = [];
  const release: number[] = [];
  const heard: number[] = [];
  const enter: number[] = [];
  for (let i = 1; i < all.length; i++) {
    const prev = all[i - 1];
    const next = all[i];
    if (prev.proc === next.proc) continue;
    gap.push(next.enter - prev.exit);
    if (Number.isFinite(prev.released)) release.push(prev.released - prev.exit);
    const times = heardBy.get(next.proc) ?? [];
    // The first grant heard there after the section ended.
    let lo = 0;
    let hi = times.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (times[mid] < prev.exit) lo = mid + 1;
      else hi = mid;
    }
    const t = times[lo];
    if (t !== undefined && t <= next.enter) {
      heard.push(t - prev.exit);
      enter.push(next.enter - t);
    }
  }
  return {
    n: gap.length,
    gapP50: percentile(gap, 50),
    gapP99: percentile(gap, 99),
    releaseP50: percentile(release, 50),
    heardP50: percentile(heard, 50),
    heardP99: percentile(heard, 99),
    enterP50: percentile(enter, 50),
    enterP99: percentile(enter, 99),
  };
}
