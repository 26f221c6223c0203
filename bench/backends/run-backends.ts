/**
 * `npm run bench -- --only backends`: every lock backend side by side, in one run, each against
 * its own system's raw floor (PRODUCT 4, "Every other backend"):
 * - uncontended: one caller, `@Locked('p:{0}')`, sequential cycles, as a ratio of the raw floor
 *   (the system's own take + free on one connection), rounds interleaved so drift hits both;
 * - hot key 1 x 50: 50 callers of one process on one key, 1 ms sections: sections/s as a share of
 *   the timer-only ideal (one caller, the section alone), p99 wait against 2 x callers x section,
 *   and the share of sections that overtook an earlier waiter (0 = FIFO).
 * Each backend is a `BenchTarget` of this folder; one whose file or server is missing is a row
 * that says why, never a failed run.
 */
import 'reflect-metadata';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Locked, RedlockModule, type RedlockModuleOptions } from 'nest-locked';
import { median, outOfOrder, percentile } from '../stats';
import type { BenchServer, BenchTarget } from './bench-target';

/** Backends in the table's order; each is `./<name>.ts` exporting `target`. */
const BACKENDS = ['redis', 'postgres', 'mysql', 'etcd', 'zookeeper'] as const;

export interface BackendsOptions {
  /** Interleaved rounds of the uncontended scenario. */
  rounds: number;
  /** Cycles per round (bounded in time too: `roundMs`). */
  cycles: number;
  roundMs: number;
  /** Sections per caller of the hot key. */
  hotIterations: number;
  /** Only these backends (default: all). */
  only?: readonly string[];
  /** Where the table goes (`<out>/backends.md` and `.json`). */
  out: string;
}

export interface BackendRow {
  backend: string;
  floor: string;
  skipped?: string;
  /** Raw floor and `@Locked`, cycles/s (median of rounds), and the median of per-round ratios. */
  floorPerSec?: number;
  lockedPerSec?: number;
  ratio?: number;
  /** Hot key 1 x 50. */
  hot?: { perSec: number; ofIdeal: number; p99WaitMs: number; boundMs: number; overtaken: number };
}

const CALLERS = 50;
const SECTION_MS = 1;

@Injectable()
class Calls {
  @Locked('p:{0}', { waitTimeout: 60_000 })
  async cycle(_key: string): Promise<void> {}

  @Locked('hot', { waitTimeout: 60_000 })
  async section(enter: (at: number) => void): Promise<void> {
    enter(performance.now());
    await sleep(SECTION_MS);
  }
}

async function app(options: RedlockModuleOptions): Promise<INestApplicationContext> {
  @Module({ imports: [RedlockModule.forRoot(options)], providers: [Calls] })
  class BenchModule {}
  return NestFactory.createApplicationContext(BenchModule, { logger: ['error'] });
}

/** Cycles/s of `cycle` run back to back, at most `count` times and `ms` long. */
async function rate(cycle: () => Promise<unknown>, count: number, ms: number): Promise<number> {
  const start = performance.now();
  let done = 0;
  while (done < count && performance.now() - start < ms) {
    await cycle();
    done++;
  }
  return (done * 1000) / (performance.now() - start);
}

async function uncontended(
  server: BenchServer,
  calls: Calls,
  o: BackendsOptions,
): Promise<Pick<BackendRow, 'floorPerSec' | 'lockedPerSec' | 'ratio'>> {
  const raw = await server.rawCycle();
  try {
    const key = 'bench:uncontended';
    await rate(() => raw.cycle(key), 200, 2_000);
    await rate(() => calls.cycle('u'), 200, 2_000);
    const floors: number[] = [];
    const locked: number[] = [];
    for (let r = 0; r < o.rounds; r++) {
      floors.push(await rate(() => raw.cycle(key), o.cycles, o.roundMs));
      locked.push(await rate(() => calls.cycle('u'), o.cycles, o.roundMs));
    }
    return {
      floorPerSec: median(floors),
      lockedPerSec: median(locked),
      ratio: median(locked.map((l, i) => l / floors[i])),
    };
  } finally {
    await raw.close();
  }
}

async function hotKey(calls: Calls, iterations: number): Promise<BackendRow['hot']> {
  // The timer-only ideal: one caller, the section alone.
  const idealStart = performance.now();
  for (let i = 0; i < 200; i++) await sleep(SECTION_MS);
  const idealPerSec = (200 * 1000) / (performance.now() - idealStart);

  const records: { arrival: number; enter: number }[] = [];
  const start = performance.now();
  await Promise.all(
    Array.from({ length: CALLERS }, async () => {
      for (let i = 0; i < iterations; i++) {
        const arrival = performance.now();
        await calls.section((enter) => records.push({ arrival, enter }));
      }
    }),
  );
  const perSec = (records.length * 1000) / (performance.now() - start);
  const boundMs = 2 * CALLERS * SECTION_MS;
  return {
    perSec,
    ofIdeal: perSec / idealPerSec,
    p99WaitMs: percentile(
      records.map((r) => r.enter - r.arrival),
      99,
    ),
    boundMs,
    overtaken: outOfOrder(records),
  };
}

async function measure(target: BenchTarget, o: BackendsOptions): Promise<BackendRow> {
  const row: BackendRow = { backend: target.name, floor: target.floor };
  let server: BenchServer | undefined;
  let context: INestApplicationContext | undefined;
  try {
    server = await target.start();
    const group: RedlockModuleOptions = server.moduleOptions?.() ?? {
      backend: server.definition(),
    };
    context = await app({ ...group, keyPrefix: `bench:${Date.now()}:` });
    const calls = context.get(Calls);
    Object.assign(row, await uncontended(server, calls, o));
    row.hot = await hotKey(calls, o.hotIterations);
  } catch (err) {
    row.skipped = err instanceof Error ? err.message.split('\n')[0] : String(err);
  } finally {
    await context?.close().catch(() => undefined);
    await server?.stop().catch(() => undefined);
  }
  return row;
}

function loadTarget(name: string): BenchTarget | string {
  const file = path.join(__dirname, `${name}.js`);
  if (!fs.existsSync(file)) return `no bench target (bench/backends/${name}.ts)`;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (require(file) as { target: BenchTarget }).target;
}

const f = (n: number | undefined, d = 0) =>
  n === undefined || Number.isNaN(n) ? '-' : n.toFixed(d);

export function backendsTable(rows: readonly BackendRow[]): string {
  const lines = [
    '| backend | raw floor | floor /s | @Locked /s | x floor (>= 0.9) | hot 1x50 /s | x ideal | p99 wait ms (<= bound) | overtaken |',
    '|---|---|---|---|---|---|---|---|---|',
  ];
  for (const r of rows) {
    if (r.skipped) {
      lines.push(`| ${r.backend} | ${r.floor} | skipped: ${r.skipped} | | | | | | |`);
      continue;
    }
    const h = r.hot;
    lines.push(
      `| ${r.backend} | ${r.floor} | ${f(r.floorPerSec)} | ${f(r.lockedPerSec)} | ${f(r.ratio, 2)} ${
        (r.ratio ?? 0) >= 0.9 ? 'PASS' : 'FAIL'
      } | ${f(h?.perSec)} | ${f(h?.ofIdeal, 2)} | ${f(h?.p99WaitMs, 1)} / ${f(h?.boundMs)} ${
        h && h.p99WaitMs <= h.boundMs ? 'PASS' : 'FAIL'
      } | ${f((h?.overtaken ?? NaN) * 100, 1)} % |`,
    );
  }
  return lines.join('\n');
}

/** Measures every backend in turn (one server at a time), prints and writes the table. */
export async function runBackends(o: BackendsOptions): Promise<BackendRow[]> {
  const rows: BackendRow[] = [];
  for (const name of BACKENDS) {
    if (o.only && !o.only.includes(name)) continue;
    const target = loadTarget(name);
    const row =
      typeof target === 'string'
        ? { backend: name, floor: '-', skipped: target }
        : await measure(target, o);
    rows.push(row);
    console.log(
      `backends: ${name} ${row.skipped ? `skipped (${row.skipped})` : `x floor ${f(row.ratio, 2)}`}`,
    );
  }
  const table = backendsTable(rows);
  fs.mkdirSync(o.out, { recursive: true });
  fs.writeFileSync(path.join(o.out, 'backends.json'), `${JSON.stringify(rows, null, 2)}\n`);
  fs.writeFileSync(
    path.join(o.out, 'backends.md'),
    `# Backends side by side (${new Date().toISOString()})\n\n${table}\n`,
  );
  console.log(`\n${table}\n`);
  return rows;
}
