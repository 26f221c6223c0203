import * as fs from 'node:fs';
import * as path from 'node:path';
import { say } from './demo-progress';
import { repoRoot } from './sample-cluster';

/** A command line the demo cannot run: its message says what to change. */
export class UsageError extends Error {}

/** `raw` as an integer from `min` to `max`, else a `UsageError` naming `flag`. */
export function intArg(flag: string, raw: string | undefined, min: number, max: number): number {
  const n = Number(raw);
  if (raw === undefined || !/^\d+$/.test(raw) || n < min || n > max) {
    throw new UsageError(
      `${flag} takes an integer from ${min} to ${max}, got ${raw ?? 'nothing'}.`,
    );
  }
  return n;
}

/**
 * The options `parse` reads from `argv`, or the exit code when there is nothing to run: 0 after
 * printing `usage` for `--help`, 2 after printing a usage error and `usage` on stderr.
 */
export function parseOrExitCode<T>(
  argv: readonly string[],
  parse: (argv: readonly string[]) => T | 'help',
  usage: string,
): T | number {
  let parsed: T | 'help';
  try {
    parsed = parse(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`${err.message}\n\n${usage}\n`);
    return 2;
  }
  if (parsed === 'help') {
    say(usage);
    return 0;
  }
  return parsed;
}

/** `.tmp/demo/<name>`, emptied (each run starts from nothing): where a run writes its files. */
export function freshRunDir(name: string): string {
  const runDir = path.join(demoOutDir(), name);
  fs.rmSync(runDir, { recursive: true, force: true });
  fs.mkdirSync(runDir, { recursive: true });
  return runDir;
}

/** `.tmp/demo`: where the demo writes what it shows (SVGs) beside its run folders. */
export function demoOutDir(): string {
  return path.join(repoRoot(), '.tmp', 'demo');
}
