import * as fs from 'node:fs';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { ChaosHookServer } from './chaos-hook-server';
import { ChaosInstances } from './chaos-instances';
import { type ChaosRedis, CHAOS_ROWS, type ChaosSaleResult, runChaosSale } from './chaos-sale';
import { chaosTable, chaosVerdicts, wrap } from './chaos-report';
import { type ChaosSchedule, chaosSchedule, describeSchedule } from './chaos-schedule';
import { renderTerminal, type TerminalLine } from './demo-chart';
import { demoOutDir, freshRunDir, intArg, parseOrExitCode, UsageError } from './demo-args';
import { stopOnSignals } from './demo-stop';
import { say } from './demo-progress';
import { ensureRedisServer, type RedisProcess, startRedis } from './redis';

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
    if (!range) throw new UsageError(`Unknown option ${argv[i]} with --chaos.`);
    const [field, min, max] = range;
    o[field] = intArg(flag, inline ?? argv[++i], min, max);
  }
  return o;
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
  const o = parseOrExitCode(argv, parseChaosArgs, CHAOS_USAGE);
  if (typeof o === 'number') return o;
  const startedAt = performance.now();
  const outDir = demoOutDir();
  const runDir = freshRunDir('chaos-run');
  const dbPath = path.join(runDir, 'shop.sqlite');

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
  const removeSignals = stopOnSignals(stopAll);

  const picture: TerminalLine[] = [];
  const show = (text = '', tone: TerminalLine['tone'] = 'plain') => {
    say(text);
    picture.push({ text, tone });
  };
  try {
    const schedule: ChaosSchedule = chaosSchedule(o.seed, { stock: o.stock, ttlMs: o.ttl });
    show('$ npm run demo -- --chaos', 'prompt');
    show(
      `nest-locked chaos demo: ${o.instances} instances, ${o.buyers} buyers at a time, ` +
        `stock ${o.stock}, lock lease ${o.ttl} ms, ` +
        `database latency ${o.latency} ms`,
      'dim',
    );
    show(`schedule (seed ${o.seed}; --seed N for another), the same in both rows:`, 'dim');
    for (const line of describeSchedule(schedule)) show(`  ${line}`, 'dim');
    show('rows: lock only            UPDATE products SET stock = ? WHERE id = ?', 'dim');
    show(
      '      lock + fenced write  UPDATE products SET stock = ?, fence = ? WHERE id = ? AND fence < ?',
      'dim',
    );

    const binary = ensureRedisServer(say);
    redis = await restartableRedis(binary);
    hook = await ChaosHookServer.start();
    instances = await ChaosInstances.start({
      instances: o.instances,
      redisUrls: [redis.url],
      dbPath,
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
          dbPath,
          log: (line) => show(line, 'dim'),
          timeoutMs: 40_000,
        }),
      );
    }
    const verdicts = chaosVerdicts(rows);
    show();
    const [head, rule, ...body] = chaosTable(rows);
    show(head);
    show(rule);
    body.forEach((line, i) => show(line, verdicts[i].bad ? 'bad' : 'good'));
    show();
    for (const v of verdicts) {
      for (const line of wrap(v.text, 104)) show(line, v.bad ? 'bad' : 'good');
    }

    await stopAll();
    const wall = ((performance.now() - startedAt) / 1000).toFixed(1);
    const timedOut = rows.filter((r) => r.timedOut).map((r) => r.row.label);
    if (timedOut.length) show(`timed out: ${timedOut.join(', ')} (results as they stood)`, 'bad');
    show(`done in ${wall} s; stopped every instance, the hook server and redis-server.`, 'dim');
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
    removeSignals();
  }
}
