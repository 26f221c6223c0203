import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * Where the harnesses find the servers they start (redis-server, postgres, mariadbd, etcd,
 * java for ZooKeeper), and how a fresh machine gets them: the Debian package, installed with
 * apt-get when we are root (a fresh CI machine), else an error saying how to install it.
 */

/** Directories searched after PATH (sbin for mariadbd, PostgreSQL's versioned bin). */
const SEARCH_DIRS = ['/usr/bin', '/usr/local/bin', '/usr/sbin', '/usr/lib/postgresql/15/bin'];

/** The path of the executable `name` in PATH, `dirs` or the usual places; undefined if none. */
export function findBinary(name: string, dirs: readonly string[] = []): string | undefined {
  const path_ = (process.env.PATH ?? '').split(path.delimiter).filter(Boolean);
  for (const dir of [...path_, ...dirs, ...SEARCH_DIRS]) {
    const candidate = path.join(dir, name);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      if (fs.statSync(candidate).isFile()) return candidate;
    } catch {
      // Not in this directory.
    }
  }
  return undefined;
}

/** The one-sentence error of a server that is not installed. */
export const notInstalled = (what: string, pkg: string): Error =>
  new Error(`${what} is not installed; install it with \`sudo apt-get install -y ${pkg}\`.`);

/**
 * Installs the Debian package `pkg` when we are root; how it ended, for an error message.
 * Several jest workers may get here at once: the dpkg lock timeout makes them queue instead of
 * failing, and a failed `update` (lists locked by a sibling) is no reason not to try.
 */
export function installWithApt(pkg: string): string {
  if (process.getuid?.() !== 0) return 'not root';
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  let status = 'no result';
  for (const args of [['update'], ['install', '-y', '-o', 'DPkg::Lock::Timeout=300', pkg]]) {
    process.stderr.write(`[test harness] ${pkg} is missing; running apt-get ${args.join(' ')}\n`);
    const result = spawnSync('apt-get', args, { env, stdio: ['ignore', 2, 2] });
    status = result.error ? result.error.message : `exit code ${result.status ?? result.signal}`;
  }
  return status;
}

const found = new Map<string, string | Error>();

/**
 * `name`, installing the Debian package `pkg` first when it is missing; cached for the process.
 * @throws an Error saying how to install it, when it cannot be had
 */
export function ensureBinary(name: string, pkg: string, dirs: readonly string[] = []): string {
  let answer = found.get(name);
  if (answer === undefined) {
    answer = findBinary(name, dirs);
    if (answer === undefined) {
      installWithApt(pkg);
      answer = findBinary(name, dirs) ?? notInstalled(name, pkg);
    }
    found.set(name, answer);
  }
  if (answer instanceof Error) throw answer;
  return answer;
}
