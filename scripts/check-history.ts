/**
 * `npm run check:history -- --backend etcd --seconds 300 --seed 7`: long seeded histories
 * (docs/histories.md). Starts the backend's servers, runs worker processes under the seeded
 * fault schedule, prints the checker's table, every unexplained overlap and fence violation,
 * and exits 1 if there is one (or a stale write was accepted). `--backend all` runs each.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  describeFenceViolation,
  describeOverlap,
  historyTable,
  type HistoryRow,
} from 'nest-locked/testing';
import {
  describeSchedule,
  PLANNED_FAULT_KINDS,
  type PlannedFaultKind,
} from '../test/support/history/fault-schedule';
import { runHistory, type HistoryRun } from '../test/support/history/history-run';
import {
  HISTORY_BACKENDS,
  type HistoryBackendName,
  startTarget,
} from '../test/support/history/history-targets';
import { intArg, parseOrExitCode, UsageError } from './demo-args';

const USAGE = `Usage: npm run check:history -- --backend <${[...HISTORY_BACKENDS, 'memory', 'all'].join('|')}> [--seconds 60] [--seed 1] [--members N] [--workers 3]

  --backend  the backend, or all (every one but memory, the negative control)
  --seconds  how long each run calls under faults (default 60)
  --seed     the fault schedule's seed: the same seed gives the same schedule (default 1)
  --members  Redis quorum nodes (5), etcd members (3), ZooKeeper members (1)
  --workers  worker processes at once (default 3)
  --out      a directory to write each run's whole history to (<backend>-<seed>.json)
  --faults   only these fault kinds, comma-separated (default every kind the backend takes):
             ${PLANNED_FAULT_KINDS.join(', ')}`;

interface Args {
  backends: HistoryBackendName[];
  seconds: number;
  seed: number;
  members?: number;
  workers: number;
  kinds?: PlannedFaultKind[];
  out?: string;
}

function parse(argv: readonly string[]): Args | 'help' {
  const args: Args = { backends: [], seconds: 60, seed: 1, workers: 3 };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = argv[i + 1];
    switch (flag) {
      case '--help':
      case '-h':
        return 'help';
      case '--backend':
        if (value === 'all') args.backends = [...HISTORY_BACKENDS];
        else if ([...HISTORY_BACKENDS, 'memory'].includes(value as HistoryBackendName))
          args.backends = [value as HistoryBackendName];
        else throw new UsageError(`--backend takes one of the backends or all, got ${value}.`);
        break;
      case '--seconds':
        args.seconds = intArg(flag, value, 1, 86_400);
        break;
      case '--seed':
        args.seed = intArg(flag, value, 0, 2 ** 31);
        break;
      case '--members':
        args.members = intArg(flag, value, 1, 7);
        break;
      case '--faults': {
        const kinds = (value ?? '').split(',');
        const unknown = kinds.filter((k) => !PLANNED_FAULT_KINDS.includes(k as PlannedFaultKind));
        if (unknown.length > 0)
          throw new UsageError(`--faults: unknown kind ${unknown.join(', ')}.`);
        args.kinds = kinds as PlannedFaultKind[];
        break;
      }
      case '--out':
        if (!value) throw new UsageError('--out takes a directory.');
        args.out = value;
        break;
      case '--workers':
        args.workers = intArg(flag, value, 2, 16);
        break;
      default:
        throw new UsageError(`Unknown argument ${flag}.`);
    }
    i++;
  }
  if (args.backends.length === 0) throw new UsageError('--backend is required.');
  return args;
}

const countBy = (names: readonly string[]): Record<string, number> =>
  names.reduce<Record<string, number>>((acc, n) => ({ ...acc, [n]: (acc[n] ?? 0) + 1 }), {});

/** The details of one run: what broke, and what the run could not do. */
function details(run: HistoryRun): string {
  const r = run.report;
  const lines = [
    `${run.target} seed ${run.seed}: ${Math.round(run.ms / 1000)} s, ${r.acquireFailures} failed acquires, ` +
      `${r.holdsLost} holds lost, errors ${JSON.stringify(run.errors)}`,
    `  overlaps by class: ${JSON.stringify(countBy(r.overlaps.map((o) => o.class)))}`,
    ...r.unexplained.map((o) => `  UNEXPLAINED ${describeOverlap(o)}`),
    ...r.fenceViolations.map((v) => `  FENCE ${describeFenceViolation(v)}`),
    ...r.staleWritesAccepted.map((w) => `  STALE WRITE ACCEPTED ${JSON.stringify(w)}`),
    ...run.crashes.map((c) => `  CRASH ${c}`),
    ...run.injectFailures.map((f) => `  NOT INJECTED ${f}`),
  ];
  if (r.unexplained.length > 0) {
    const around = run.input.faults?.filter((f) =>
      r.unexplained.some((o) => f.to >= o.first.invokedAt - 2_000 && f.from <= o.to + 500),
    );
    lines.push(`  faults around them: ${JSON.stringify(around)}`);
  }
  return lines.join('\n');
}

async function main(): Promise<number> {
  const parsed = parseOrExitCode(process.argv.slice(2), parse, USAGE);
  if (typeof parsed === 'number') return parsed;
  const rows: HistoryRow[] = [];
  let failed = false;
  for (const name of parsed.backends) {
    process.stdout.write(`\n== ${name}: starting its servers\n`);
    const target = await startTarget(name, { members: parsed.members });
    try {
      process.stdout.write(`${target.describe}\n`);
      const run = await runHistory(target, {
        seed: parsed.seed,
        durationMs: parsed.seconds * 1000,
        workers: parsed.workers,
        kinds: parsed.kinds?.filter((k) => target.kinds.includes(k)),
        log: (line) => process.stdout.write(`  ${line}\n`),
      });
      process.stdout.write(`schedule:\n${describeSchedule(run.schedule)}\n${details(run)}\n`);
      if (parsed.out) {
        fs.mkdirSync(parsed.out, { recursive: true });
        const file = path.join(parsed.out, `${name}-${parsed.seed}.json`);
        fs.writeFileSync(file, JSON.stringify({ ...run, report: undefined }));
        process.stdout.write(`history written to ${file}\n`);
      }
      rows.push({ name: `${name} seed ${parsed.seed}`, report: run.report });
      const r = run.report;
      if (r.unexplained.length + r.fenceViolations.length + r.staleWritesAccepted.length > 0)
        failed = true;
    } finally {
      await target.stop();
    }
  }
  process.stdout.write(`\n${historyTable(rows)}\n`);
  return failed ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(2);
  },
);
