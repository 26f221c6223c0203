import * as fs from 'node:fs';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import { type ModeFigures, renderChart, renderTerminal, type TerminalLine } from './demo-chart';
import { demoOutDir, freshRunDir, intArg, parseOrExitCode, UsageError } from './demo-args';
import { stopOnSignals } from './demo-stop';
import { runChaosDemo } from './demo-chaos';
import { runInversionDemo } from './demo-inversion';
import { formatTable, percentile, Progress, say } from './demo-progress';
import {
  legendLines,
  PAY_VARIANTS,
  type PaymentsResult,
  paymentsTable,
  READ_VARIANTS,
  type ReadsResult,
  readsTable,
  runPayments,
  runReads,
  sharedVerdicts,
} from './demo-shared-holds';
import { type BurstResult, burst, get, post } from './http';
import { postgresRows } from './demo-postgres';
import { ensureRedisServer, ping, type RedisProcess, startRedisServers } from './redis';
import { keepBoardUnderLoad } from './demo-board';
import { type SampleCluster, startSampleCluster } from './sample-cluster';

/**
 * `npm run demo`: a flash sale, live. Starts its own Redis and several instances of the
 * sample app (separate processes, one SQLite file), sends a burst of concurrent buyers spread
 * across the instances for each purchase mode, then readers of a product while it is restocked
 * (read locks, the exclusive lock, none) and payments through a gateway that refuses more than 3
 * calls at once (permits: 3, none); prints the tables and writes an SVG chart.
 * Everything it starts, it stops (by PID).
 */

const MODES = ['none', 'product', 'segmented'] as const;
type Mode = (typeof MODES)[number];

interface Options {
  instances: number;
  buyers: number;
  stock: number;
  latency: number;
  quorum: number;
  redisUrl?: string;
  modes: Mode[];
  readers: number;
  payers: number;
  board: boolean;
  /** `postgres`: the locked modes also run with the lock group on PostgreSQL. */
  backend: 'redis' | 'postgres';
}

const USAGE = `Usage: npm run demo -- [options]

  --instances N    sample app processes behind the buyers       (default 3)
  --buyers N       concurrent buyers per mode, 1 unit each       (default 300)
  --stock N        units of the product on sale                  (default 100)
  --latency MS     simulated database round trip, read -> write  (default 5)
  --quorum N       start N redis-servers, lock by Redlock quorum (default 1)
  --redis-url URL  use running Redis instead (comma-separated list for a quorum)
  --modes LIST     any of none,product,segmented                 (default all)
  --readers N      reads of one product per lock mode, a restock
                   after every 20; 0 skips them                  (default 200)
  --payers N       payments at once per guard; 0 skips them      (default 60)
  --chaos          the flash sale while things break, lock only vs fenced write
                   (its own options: npm run demo -- --chaos --help)
  --board          then keep the instances up under load and print the lock board's URL
  --inversion      two instances nest ledger and account locks in opposite orders: the
                   lock-order warning (SAMPLE_LOCK_INVERSION=on), nothing else
  --backend NAME   postgres: the locked modes once more with the
                   locks in PostgreSQL, rows beside Redis's      (default redis)
  -h, --help       this text`;

function parseArgs(argv: readonly string[]): Options | 'help' {
  const o: Options = {
    instances: 3,
    buyers: 300,
    stock: 100,
    latency: 5,
    quorum: 1,
    modes: [...MODES],
    readers: 200,
    payers: 60,
    board: false,
    backend: 'redis',
  };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split(/=(.*)/s, 2);
    const value = () => inline ?? argv[++i];
    switch (flag) {
      case '-h':
      case '--help':
        return 'help';
      case '--board':
        o.board = true;
        break;
      case '--instances':
        o.instances = intArg(flag, value(), 1, 16);
        break;
      case '--buyers':
        o.buyers = intArg(flag, value(), 1, 5_000);
        break;
      case '--stock':
        o.stock = intArg(flag, value(), 0, 1_000_000);
        break;
      case '--latency':
        o.latency = intArg(flag, value(), 0, 1_000);
        break;
      case '--quorum':
        o.quorum = intArg(flag, value(), 1, 7);
        break;
      case '--readers':
        o.readers = intArg(flag, value(), 0, 5_000);
        break;
      case '--payers':
        o.payers = intArg(flag, value(), 0, 5_000);
        break;
      case '--backend': {
        const raw = value();
        if (raw !== 'redis' && raw !== 'postgres') {
          throw new UsageError(`--backend takes redis or postgres, got ${raw ?? 'nothing'}.`);
        }
        o.backend = raw;
        break;
      }
      case '--redis-url': {
        const raw = value();
        if (!raw) throw new UsageError('--redis-url takes a URL, e.g. redis://127.0.0.1:6379.');
        o.redisUrl = raw;
        break;
      }
      case '--modes': {
        const list = (value() ?? '').split(',').filter(Boolean);
        const bad = list.find((m) => !(MODES as readonly string[]).includes(m));
        if (bad || list.length === 0) {
          throw new UsageError(
            `--modes takes a list of ${MODES.join(', ')}, got ${bad ?? 'nothing'}.`,
          );
        }
        o.modes = MODES.filter((m) => list.includes(m));
        break;
      }
      default:
        throw new UsageError(`Unknown option ${argv[i]}.`);
    }
  }
  return o;
}

/** Where a mode's burst ended up. */
interface ModeResult extends ModeFigures {
  readonly mode: Mode;
  /** The lock group's backend when it is not Redis (`postgres`). */
  readonly backend?: string;
  readonly refused: number;
  readonly busy: number;
  readonly failed: number;
  readonly wallMs: number;
}

async function runMode(mode: Mode, cluster: SampleCluster, o: Options): Promise<ModeResult> {
  const { urls } = cluster;
  const created = await post<{ id: number }>(`${urls[0]}/products`, {
    name: `flash-sale-${mode}`,
    stock: o.stock,
  });
  if (created.status !== 201) {
    throw new Error(
      `Creating the product failed: ${created.status} ${JSON.stringify(created.body)}`,
    );
  }
  const id = created.body.id;
  const progress = new Progress(mode, o.buyers);
  const startedAt = performance.now();
  const results = await burst(
    o.buyers,
    (i) => ({
      method: 'POST',
      url: `${urls[i % urls.length]}/products/${id}/purchase?mode=${mode}`,
      body: { quantity: 1 },
      timeoutMs: 90_000,
    }),
    (done, r) => progress.update(done, r),
  );
  const wallMs = performance.now() - startedAt;
  progress.end();

  const code = (r: BurstResult) =>
    r.status ? (r as { body?: { code?: string } }).body?.code : undefined;
  const count = (f: (r: BurstResult) => boolean) => results.filter(f).length;
  const latencies = results.map((r) => r.ms).sort((a, b) => a - b);
  const figures = {
    requests: o.buyers,
    stock: o.stock,
    throughput: o.buyers / (wallMs / 1000),
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    refused: count((r) => r.status === 409 && code(r) === 'INSUFFICIENT_STOCK'),
    busy: count((r) => r.status === 409 && code(r) === 'LOCK_NOT_ACQUIRED'),
    wallMs,
  };
  const view = await get<{ stock: number; sold: number }>(`${urls[0]}/products/${id}`);
  const { stock: finalStock, sold } = view.body;
  return {
    mode,
    sold,
    finalStock,
    oversold: Math.max(0, sold - o.stock),
    failed: count((r) => r.status !== 201 && r.status !== 409),
    ...figures,
  };
}

/** `product`, or `product (postgres)` for a row of another backend than Redis. */
const nameOf = (r: ModeResult): string => (r.backend ? `${r.mode} (${r.backend})` : r.mode);

function table(rows: readonly ModeResult[]): string[] {
  const head = ['mode', 'requests', 'sold', 'final stock', 'oversold', 'throughput', 'p50', 'p99'];
  const cells = rows.map((r) => [
    nameOf(r),
    String(r.requests),
    String(r.sold),
    String(r.finalStock),
    String(r.oversold),
    `${Math.round(r.throughput)} req/s`,
    `${Math.round(r.p50)} ms`,
    `${Math.round(r.p99)} ms`,
  ]);
  return formatTable(head, cells);
}

const HOW: Record<Mode, string> = {
  none: 'no lock: read the stock, check it, write it (the classic oversell)',
  product: "@Locked('product:{id}'): one buyer at a time per product",
  segmented: "@Locked('stock:{id}', { segments: 10 }): the stock in 10 slices, one lock each",
};

function legend(modes: readonly Mode[]): string[] {
  return modes.map((m, i) => `${i === 0 ? 'modes:' : '      '} ${m.padEnd(10)} ${HOW[m]}`);
}

/** One sentence per mode: what its figures mean. */
function verdicts(rows: readonly ModeResult[], o: Options): string[] {
  return rows.map((r) => {
    const product = rows.find((p) => p.mode === 'product' && p.backend === r.backend);
    const name = nameOf(r);
    const extra = [
      r.busy ? `${r.busy} gave up waiting for the lock (409 + Retry-After)` : '',
      r.failed ? `${r.failed} failed otherwise` : '',
    ].filter(Boolean);
    const tail = extra.length ? `; ${extra.join(', ')}` : '';
    if (r.oversold > 0) {
      return (
        `${name}: ${r.sold} sold from a stock of ${o.stock}, oversold by ${r.oversold} ` +
        `(concurrent buyers read the same stock)${tail}.`
      );
    }
    const speedup =
      r.mode === 'segmented' && product && product.throughput > 0
        ? `, ${(r.throughput / product.throughput).toFixed(1)}x the throughput of mode=product`
        : '';
    return `${name}: ${r.sold} sold, never oversold${speedup}${tail}.`;
  });
}

/** How the tick job ran while the demo did: rows per tick, read from the shared SQLite file. */
function cronSummary(dbPath: string, instances: number): string | undefined {
  const db = new Database(dbPath, { readonly: true, fileMustExist: true });
  try {
    const perTick = db
      .prepare('SELECT tick, COUNT(*) AS runs FROM cron_runs GROUP BY tick')
      .all() as { tick: number; runs: number }[];
    if (perTick.length === 0) return undefined;
    const byInstance = db
      .prepare(
        'SELECT instance, COUNT(*) AS runs FROM cron_runs GROUP BY instance ORDER BY instance',
      )
      .all() as { instance: string; runs: number }[];
    const twice = perTick.filter((t) => t.runs > 1).length;
    const who = byInstance.map((b) => `${b.instance} ${b.runs}`).join(', ');
    return twice === 0
      ? `cron: ${perTick.length} tick${perTick.length === 1 ? '' : 's'} while the demo ran, each ran exactly once across ${instances} instances (${who}).`
      : `cron: ${twice} of ${perTick.length} ticks ran more than once (${who}).`;
  } finally {
    db.close();
  }
}

async function main(argv: readonly string[]): Promise<number> {
  if (argv.includes('--chaos')) return runChaosDemo(argv.filter((a) => a !== '--chaos'));
  if (argv.includes('--inversion')) return runInversionDemo();
  const opts = parseOrExitCode(argv, parseArgs, USAGE);
  if (typeof opts === 'number') return opts;
  const startedAt = performance.now();
  const outDir = demoOutDir();
  const runDir = freshRunDir('last-run');
  const dbPath = path.join(runDir, 'shop.sqlite');

  let servers: RedisProcess[] = [];
  let cluster: SampleCluster | undefined;
  let stopping: Promise<void> | undefined;
  // Once, however many callers: the signal handler and the normal path share one stop.
  const stopAll = () =>
    (stopping ??= (async () => {
      await cluster?.stop();
      await Promise.all(servers.map((s) => s.stop()));
    })());
  const removeSignals = stopOnSignals(stopAll, () => (interrupted = true));

  try {
    const header =
      `nest-locked demo: ${opts.instances} instances, ${opts.buyers} buyers per mode, ` +
      `stock ${opts.stock}, database latency ${opts.latency} ms` +
      (opts.readers ? `, ${opts.readers} readers` : '') +
      (opts.payers ? `, ${opts.payers} payers` : '');
    say(header);
    const legends = [...legend(opts.modes), ...(opts.readers || opts.payers ? legendLines() : [])];
    for (const l of legends) say(l);
    let redisUrls: string[];
    if (opts.redisUrl) {
      redisUrls = opts.redisUrl
        .split(',')
        .map((u) => u.trim())
        .filter(Boolean);
      for (const url of redisUrls) {
        await ping(url).catch((err: Error) => {
          throw new Error(`--redis-url ${url} is not usable: ${err.message}.`);
        });
      }
      say(`redis: using ${redisUrls.join(', ')}`);
    } else {
      const binary = ensureRedisServer(say);
      servers = await startRedisServers(binary, opts.quorum);
      redisUrls = servers.map((s) => s.url);
      say(
        `redis: started ${servers.length} redis-server${servers.length > 1 ? 's (Redlock quorum)' : ''} ` +
          `on ${servers.map((s) => `${s.port} (pid ${s.pid})`).join(', ')}`,
      );
    }
    cluster = await startSampleCluster({
      instances: opts.instances,
      redisUrls,
      dbPath,
      latencyMs: opts.latency,
      cron: '* * * * * *',
      lockWaitMs: 60_000,
      logDir: path.join(runDir, 'logs'),
    });
    say(`app: ${cluster.instances.map((i) => `${i.name} :${i.port} (pid ${i.pid})`).join(', ')}`);
    say();

    const rows: ModeResult[] = [];
    for (const mode of opts.modes) rows.push(await runMode(mode, cluster, opts));
    const onPostgres =
      opts.backend === 'postgres'
        ? await postgresRows(
            { ...opts, runDir, redisUrls },
            opts.modes,
            (mode, pgCluster) => runMode(mode as Mode, pgCluster, opts),
            say,
          )
        : [];
    // Every purchase row, Redis's then PostgreSQL's: the table, the verdicts and the exit code.
    const purchaseRows = [...rows, ...onPostgres];
    const reads: ReadsResult[] = [];
    if (opts.readers > 0) {
      for (const v of READ_VARIANTS) reads.push(await runReads(v, cluster, opts.readers));
    }
    const payments: PaymentsResult[] = [];
    if (opts.payers > 0) {
      for (const v of PAY_VARIANTS) payments.push(await runPayments(v, cluster, opts.payers));
    }
    const cron = cronSummary(dbPath, opts.instances);

    const tableLines = [
      ...table(purchaseRows),
      ...(reads.length ? ['', ...readsTable(reads)] : []),
      ...(payments.length ? ['', ...paymentsTable(payments)] : []),
    ];
    const notes = verdicts(purchaseRows, opts);
    const shared = sharedVerdicts(reads, payments);
    say();
    for (const l of tableLines) say(l);
    say();
    for (const n of notes) say(n);
    for (const n of shared) say(n.text);
    if (cron) say(cron);

    const subtitle =
      `${opts.buyers} concurrent buyers per mode across ${opts.instances} instances, ` +
      `stock ${opts.stock}, database latency ${opts.latency} ms, ` +
      `${redisUrls.length > 1 ? `Redlock over ${redisUrls.length} Redis servers` : 'one Redis'}`;
    const chartPath = path.join(outDir, 'demo-chart.svg');
    fs.writeFileSync(chartPath, renderChart(rows, subtitle));
    fs.writeFileSync(
      path.join(outDir, 'demo-results.json'),
      JSON.stringify({ options: opts, rows, reads, payments, cron }, null, 2) + '\n',
    );
    say();
    say(`chart: ${path.relative(process.cwd(), chartPath) || chartPath}`);
    if (opts.board) await keepBoardUnderLoad(cluster, say);

    await stopAll();
    const wall = ((performance.now() - startedAt) / 1000).toFixed(1);
    const done = `done in ${wall} s; stopped ${opts.instances} app instances and ${servers.length} redis-server${servers.length === 1 ? '' : 's'}.`;
    say(done);

    const picture: TerminalLine[] = [
      { text: '$ npm install && npm run demo', tone: 'prompt' },
      { text: header, tone: 'dim' },
      ...legends.map((text) => ({ text, tone: 'dim' as const })),
      { text: '' },
      ...tableLines.map((text) => ({ text })),
      { text: '' },
      ...notes.map((text, i) => ({
        text,
        tone: purchaseRows[i].oversold > 0 ? ('bad' as const) : ('good' as const),
      })),
      ...shared.map((n) => ({ text: n.text, tone: n.good ? ('good' as const) : ('bad' as const) })),
      ...(cron ? [{ text: cron, tone: 'good' as const }] : []),
      { text: '' },
      { text: `chart: .tmp/demo/demo-chart.svg`, tone: 'dim' },
      { text: done, tone: 'dim' },
    ];
    fs.writeFileSync(path.join(outDir, 'demo-output.svg'), renderTerminal(picture));

    const locked = purchaseRows.filter((r) => r.mode !== 'none');
    if (locked.some((r) => r.oversold > 0 || r.finalStock < 0)) {
      process.stderr.write('A locked mode oversold: that is a bug in nest-locked.\n');
      return 1;
    }
    if (shared.some((n) => !n.ok)) {
      process.stderr.write(
        'A read under a lock saw half a restock, or permits: 3 let the gateway refuse a call: ' +
          'that is a bug in nest-locked.\n',
      );
      return 1;
    }
    return 0;
  } finally {
    await stopAll();
    removeSignals();
  }
}

/** Set by SIGINT/SIGTERM: the run then ends with 130 once everything is stopped. */
let interrupted = false;

main(process.argv.slice(2)).then(
  (code) => process.exit(interrupted ? 130 : code),
  (err: unknown) => {
    if (interrupted) process.exit(130);
    process.stderr.write(`\ndemo failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
