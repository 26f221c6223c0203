import * as fs from 'node:fs';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { ChaosHookServer } from './chaos-hook-server';
import { ChaosInstances } from './chaos-instances';
import { type ChaosRedis, CHAOS_ROWS, type ChaosSaleResult, runChaosSale } from './chaos-sale';
import { type ChaosSchedule, chaosSchedule, describeSchedule } from './chaos-schedule';
import { renderTerminal, type TerminalLine } from './demo-chart';
import { formatTable, say } from './demo-progress';
import { ensureRedisServer, type RedisProcess, startRedis } from './redis';
import { repoRoot } from './sample-cluster';

/**
 * `npm run demo -- --chaos`: the flash sale while things break. One Redis, three instances of
 * the sample, a crowd of buyers; a seeded schedule stops the holder of the product lock past its
 * lease (SIGSTOP, SIGCONT), restarts Redis without persistence under another holder, and
 * SIGKILLs a third holder (started again). The same sale and schedule run twice: `lock only`
 * (mode=product, its write ignores the fence) and `lock + fenced write` (mode=fenced). Prints
 * the schedule, what each fault did, a table, and writes it all as an SVG. Everything it
 * starts, it stops (by PID).
 */

interface ChaosOptions {
  seed: number;
  instances: number;
  buyers: number;
  stock: number;
  ttl: number;
  latency: number;
}

export const CHAOS_USAGE = `Usage: npm run demo -- --chaos [options]

  --seed N         picks the order of the faults and the reads they hit (default 1)
  --instances N    sample app processes                          (default 3)
  --buyers N       buyers at once, each buying again until sold out (default 12)
  --stock N        units of the product on sale                  (default 100)
  --ttl MS         lease of the product lock; a stall outlives it (default 2000)
  --latency MS     simulated database round trip, read -> write  (default 20)
  -h, --help       this text`;

class ChaosUsageError extends Error {}

function parseChaosArgs(argv: readonly string[]): ChaosOptions | 'help' {
  const o: ChaosOptions = {
    seed: 1,
    instances: 3,
    buyers: 12,
    stock: 100,
    ttl: 2_000,
    latency: 20,
  };
  const ranges: Record<string, [keyof ChaosOptions, number, number]> = {
    '--seed': ['seed', 0, 2 ** 31 - 1],
    '--instances': ['instances', 2, 8],
    '--buyers': ['buyers', 2, 200],
    '--stock': ['stock', 20, 10_000],
    '--ttl': ['ttl', 300, 30_000],
    '--latency': ['latency', 0, 1_000],
  };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split(/=(.*)/s, 2);
    if (flag === '-h' || flag === '--help') return 'help';
    const range = ranges[flag];
    if (!range) throw new ChaosUsageError(`Unknown option ${argv[i]} with --chaos.`);
    const raw = inline ?? argv[++i];
    const [field, min, max] = range;
    const n = Number(raw);
    if (raw === undefined || !/^\d+$/.test(raw) || n < min || n > max) {
      throw new ChaosUsageError(
        `${flag} takes an integer from ${min} to ${max}, got ${raw ?? 'nothing'}.`,
      );
    }
    o[field] = n;
  }
  return o;
}

const ms = (n: number): string => `${Math.round(n)} ms`;

const AFTER: Record<string, string> = {
  stall: 'after SIGCONT',
  'redis-restart': 'after the restart',
};

/** The holders a fault left running with a lost lock: how many were told, and how soon. */
function learnedCells(r: ChaosSaleResult): [string, string] {
  const survivors = r.faults.filter((f) => f.kind !== 'kill');
  const told = survivors.filter((f) => f.learnedMs !== undefined);
  const how = told.map((f) => `${ms(f.learnedMs!)} ${AFTER[f.kind]}`).join(', ');
  return [`${told.length} of ${survivors.length}`, how || '-'];
}

/** The chaos table, one row per write. */
export function chaosTable(rows: readonly ChaosSaleResult[]): string[] {
  const head = ['row', 'sold', 'final stock', 'oversold', 'stale writes', 'told lost', 'how soon'];
  const cells = rows.map((r) => {
    const stale =
      r.row.mode === 'fenced'
        ? `${r.staleRejected} rejected${r.staleApplied ? `, ${r.staleApplied} applied` : ''}`
        : `${r.staleApplied} applied`;
    return [
      r.row.label,
      String(r.sold),
      String(r.finalStock),
      String(r.oversold),
      stale,
      ...learnedCells(r),
    ];
  });
  return formatTable(head, cells);
}

/** One sentence per row: what its figures mean; `ok` false for a fenced row that went wrong. */
export function chaosVerdicts(
  rows: readonly ChaosSaleResult[],
): { text: string; ok: boolean; bad: boolean }[] {
  return rows.map((r) => {
    const lost = r.lost.length;
    const told = `${lost} lost lock${lost === 1 ? '' : 's'} reported (signal aborted, \`lost\` event)`;
    if (r.row.mode !== 'fenced') {
      const damage =
        r.phantom > 0
          ? `${r.sold} sold from a stock of ${r.stock} (${r.finalStock} left): ${r.phantom} unit${r.phantom === 1 ? '' : 's'} sold twice, ` +
            `because ${r.staleApplied} late write${r.staleApplied === 1 ? '' : 's'} put back a stock read before newer holders sold`
          : `${r.sold} sold, ${r.finalStock} left: ${r.staleApplied} late write${r.staleApplied === 1 ? '' : 's'} landed after a newer holder's without visible damage this time`;
      return {
        text: `lock only: ${damage}; ${told}, but this write ignores it.`,
        ok: true,
        bad: true,
      };
    }
    const exact = r.sold === r.stock && r.finalStock === 0 && r.staleApplied === 0;
    const text = exact
      ? `lock + fenced write: exactly ${r.sold} sold, stock 0: the database refused ${r.staleRejected} stale ` +
        `write${r.staleRejected === 1 ? '' : 's'} (409 STALE_FENCE, nothing sold, the buyer bought again); ${told}.`
      : `lock + fenced write: ${r.sold} sold, ${r.finalStock} left, ${r.staleApplied} stale writes applied: ` +
        'the fenced write did not hold.';
    return { text, ok: exact, bad: !exact };
  });
}

/** A Redis of our own whose `restart()` stops it and starts an empty one on the same port. */
async function restartableRedis(
  binary: string,
): Promise<ChaosRedis & { stop(): Promise<void>; pid(): number }> {
  let current: RedisProcess = await startRedis(binary);
  return {
    url: current.url,
    pid: () => current.pid,
    restart: async () => {
      await current.stop();
      current = await startRedis(binary, [], current.port);
    },
    stop: () => current.stop(),
  };
}

/** `npm run demo -- --chaos ...`: resolves with the exit code. */
export async function runChaosDemo(argv: readonly string[]): Promise<number> {
  let parsed: ChaosOptions | 'help';
  try {
    parsed = parseChaosArgs(argv);
  } catch (err) {
    if (!(err instanceof ChaosUsageError)) throw err;
    process.stderr.write(`${err.message}\n\n${CHAOS_USAGE}\n`);
    return 2;
  }
  if (parsed === 'help') {
    say(CHAOS_USAGE);
    return 0;
  }
  const o = parsed;
  const startedAt = performance.now();
  const outDir = path.join(repoRoot(), '.tmp', 'demo');
  const runDir = path.join(outDir, 'chaos-run');
  fs.rmSync(runDir, { recursive: true, force: true });
  fs.mkdirSync(runDir, { recursive: true });

  let redis: Awaited<ReturnType<typeof restartableRedis>> | undefined;
  let hook: ChaosHookServer | undefined;
  let instances: ChaosInstances | undefined;
  let stopping: Promise<void> | undefined;
  const stopAll = () =>
    (stopping ??= (async () => {
      await instances?.stop();
      await hook?.stop();
      await redis?.stop();
    })());
  const onSignal = (signal: NodeJS.Signals) => {
    process.stdout.write('\n');
    say(`${signal}: stopping everything the demo started...`);
    void stopAll().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  const picture: TerminalLine[] = [];
  const show = (text = '', tone: TerminalLine['tone'] = 'plain') => {
    say(text);
    picture.push({ text, tone });
  };
  try {
    const schedule: ChaosSchedule = chaosSchedule(o.seed, { stock: o.stock, ttlMs: o.ttl });
    show('$ npm run demo -- --chaos', 'prompt');
    show(
      `nest-locked chaos demo: ${o.instances} instances, ${o.buyers} buyers at a time, stock ${o.stock}, ` +
        `product lock (lease ${o.ttl} ms), database latency ${o.latency} ms`,
      'dim',
    );
    show(`schedule (seed ${o.seed}; --seed N picks another), the same for both rows:`, 'dim');
    for (const line of describeSchedule(schedule, 'the product')) show(`  ${line}`, 'dim');
    show(
      `rows:  lock only            mode=product: @Locked('product:{id}'), then UPDATE products SET stock = ?`,
      'dim',
    );
    show(
      `       lock + fenced write  mode=fenced: the same, then ... SET stock = ?, fence = ? WHERE id = ? AND fence < ?`,
      'dim',
    );

    const binary = ensureRedisServer(say);
    redis = await restartableRedis(binary);
    hook = await ChaosHookServer.start();
    instances = await ChaosInstances.start({
      instances: o.instances,
      redisUrls: [redis.url],
      dbPath: path.join(runDir, 'shop.sqlite'),
      latencyMs: o.latency,
      lockWaitMs: 60_000,
      lockTtlMs: o.ttl,
      chaosUrl: hook.url,
      logDir: path.join(runDir, 'logs'),
    });
    say(
      `redis: ${redis.url} (pid ${redis.pid()}); app: ` +
        instances.instances.map((i) => `${i.name} (pid ${i.pid})`).join(', '),
    );

    const rows: ChaosSaleResult[] = [];
    for (const row of CHAOS_ROWS) {
      show();
      show(`${row.label}:`);
      rows.push(
        await runChaosSale({
          row,
          schedule,
          stock: o.stock,
          buyers: o.buyers,
          instances,
          redis,
          hook,
          dbPath: path.join(runDir, 'shop.sqlite'),
          log: (line) => show(line, 'dim'),
          timeoutMs: 40_000,
        }),
      );
    }
    const verdicts = chaosVerdicts(rows);
    show();
    for (const line of chaosTable(rows)) show(line);
    show();
    for (const v of verdicts) show(v.text, v.bad ? 'bad' : 'good');

    await stopAll();
    const wall = ((performance.now() - startedAt) / 1000).toFixed(1);
    const timedOut = rows.filter((r) => r.timedOut).map((r) => r.row.label);
    if (timedOut.length) show(`timed out: ${timedOut.join(', ')} (results as they stood)`, 'bad');
    show(`done in ${wall} s; stopped every instance, the hook server and redis-server.`, 'dim');
    fs.mkdirSync(outDir, { recursive: true });
    fs.writeFileSync(
      path.join(outDir, 'chaos.svg'),
      renderTerminal(picture, 'npm run demo -- --chaos'),
    );
    fs.writeFileSync(
      path.join(outDir, 'chaos-results.json'),
      JSON.stringify({ options: o, schedule, rows }, null, 2) + '\n',
    );
    say(`picture: .tmp/demo/chaos.svg`);
    if (verdicts.some((v) => !v.ok)) {
      process.stderr.write(
        'The fenced row sold a unit twice: that is a bug in nest-locked or the sample.\n',
      );
      return 1;
    }
    return 0;
  } finally {
    await stopAll();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
