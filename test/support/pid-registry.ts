import type { ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import type * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';

/**
 * Every redis-server the harness spawns gets one file here, named by its PID. Jest workers can
 * die without running exit hooks, so the global teardown (another process) reads these files to
 * find servers that outlived their test file. The directory is shared by every jest run on the
 * machine, so each record names the processes that own it.
 */
export const PID_REGISTRY_DIR = path.join(os.tmpdir(), 'nest-locked-test-pids');

export interface PidRecord {
  /** PID of the redis-server. */
  pid: number;
  /** Port it listens on; with the PID, it tells our server apart from a reused PID. */
  port: number;
  /** The test process that spawned it: a jest worker, or jest itself with `--runInBand`. */
  owner: number;
  /** Parent of `owner`: the jest process when tests run in workers. */
  ownerParent: number;
  /** The server's `--dir`, removed together with a leftover server. */
  dir: string;
  /**
   * The binary's name in its command line when it is not redis-server (`postgres`, `mariadbd`):
   * how the teardown tells it apart from a reused PID.
   */
  binary?: string;
}

/** Prefix of every server's `--dir` under `os.tmpdir()`. */
export const SERVER_DIR_PREFIX = 'nest-locked-redis-';

export function writePidRecord(pid: number, port: number, dir: string, binary?: string): void {
  const record: PidRecord = {
    pid,
    port,
    owner: process.pid,
    ownerParent: process.ppid,
    dir,
    binary,
  };
  fs.mkdirSync(PID_REGISTRY_DIR, { recursive: true });
  fs.writeFileSync(path.join(PID_REGISTRY_DIR, String(pid)), JSON.stringify(record));
}

export function removePidRecord(pid: number): void {
  fs.rmSync(path.join(PID_REGISTRY_DIR, String(pid)), { force: true });
}

/** Removes a server's `--dir`, refusing any path the harness did not create. */
export function removeServerDir(dir: string): void {
  const resolved = path.resolve(dir);
  if (
    path.dirname(resolved) === path.resolve(os.tmpdir()) &&
    path.basename(resolved).startsWith(SERVER_DIR_PREFIX)
  ) {
    fs.rmSync(resolved, { recursive: true, force: true });
  }
}

export function readPidRecords(): PidRecord[] {
  let names: string[];
  try {
    names = fs.readdirSync(PID_REGISTRY_DIR);
  } catch {
    return [];
  }
  const records: PidRecord[] = [];
  for (const name of names) {
    try {
      const record = JSON.parse(
        fs.readFileSync(path.join(PID_REGISTRY_DIR, name), 'utf8'),
      ) as PidRecord;
      if (Number.isInteger(record.pid) && String(record.pid) === name) records.push(record);
    } catch {
      // Half-written or foreign file: not ours to act on.
    }
  }
  return records;
}

export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * True only if `pid` is still the redis-server (or etcd member) we recorded: the PID may have been reused by an
 * unrelated process since the record was written.
 */
export function isRecordedRedisServer(record: PidRecord): boolean {
  let cmdline: string;
  try {
    cmdline = fs.readFileSync(`/proc/${record.pid}/cmdline`, 'utf8').split('\0').join(' ');
  } catch {
    return false;
  }
  if (record.binary) {
    return cmdline.includes(record.binary) && cmdline.includes(String(record.port));
  }
  // redis-server rewrites its title to "redis-server 127.0.0.1:<port> [cluster]" once it is up;
  // before that, the original "--port <port>" arguments are still there.
  const listens = new RegExp(`(127\\.0\\.0\\.1:|--port )${record.port}\\b`);
  if (cmdline.includes('redis-server')) return listens.test(cmdline);
  // A ZooKeeper member (test/support/zookeeper-server.ts): a JVM whose zoo.cfg is in `dir`.
  if (cmdline.includes('QuorumPeerMain')) return cmdline.includes(`${record.dir}/`);
  // An etcd member of test/support/etcd-server.ts: its record's port is its client port.
  return /(^|\/)etcd /.test(cmdline) && cmdline.includes(`http://127.0.0.1:${record.port} `);
}

/** The most a harness keeps of a server's output, for the message of a failed start. */
export const SERVER_OUTPUT_LIMIT = 16 * 1024;

/**
 * Follows a server a harness spawned: records its PID for the global teardown (removed once it
 * exits), hands its output to `onOutput`, and lets the jest worker exit without it (a server a
 * test forgot is killed from its record). Resolves once the process exited.
 */
export function followServer(
  child: ChildProcess & { pid: number },
  record: { port: number; dir: string; binary?: string },
  onOutput: (text: string) => void,
): Promise<void> {
  const { pid } = child;
  writePidRecord(pid, record.port, record.dir, record.binary);
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      removePidRecord(pid);
      resolve();
    }),
  );
  const collect = (chunk: Buffer) => onOutput(chunk.toString());
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  child.unref();
  (child.stdout as net.Socket | null)?.unref();
  (child.stderr as net.Socket | null)?.unref();
  return exited;
}
