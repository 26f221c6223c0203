import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
// From node:timers, not globals: a suite with jest's fake timers must still start servers.
import { clearTimeout, setTimeout } from 'node:timers';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  followServer,
  removeServerDir,
  SERVER_DIR_PREFIX,
  SERVER_OUTPUT_LIMIT,
} from './pid-registry';

/**
 * A database server process the SQL suites start (PostgreSQL, MariaDB): on 127.0.0.1 and a port
 * of its own, its data under a temp dir, in the foreground (we need its PID); a freeze stops it
 * and every process it started (PostgreSQL serves each connection from a child process). A PID record lets the global teardown kill a server a test forgot.
 */

const READY_TIMEOUT_MS = 30_000;
const STOP_GRACE_MS = 5_000;

export interface DatabaseServerHandle {
  readonly port: number;
  readonly host: '127.0.0.1';
  /** PID of the server (the postmaster); undefined while it is down. */
  readonly pid: number | undefined;
  /** A clean, fast shutdown (SIGKILL after 5 s); removes its data. Idempotent. */
  stop(): Promise<void>;
  /** Sends `signal` to the server and every process it started (SIGSTOP / SIGCONT: freeze, thaw). */
  signal(signal: NodeJS.Signals): void;
  /** Stops the server cleanly and starts it again on the same port with the same data. */
  restart(): Promise<void>;
  /** Stops the server cleanly, keeping its data (an outage until `up`). */
  down(): Promise<void>;
  /** Starts a server `down` stopped, on the same port with the same data. */
  up(): Promise<void>;
}

/** How to run one kind of database server. */
export interface DatabaseServerSpec {
  /** For messages and the PID record (the binary's name in its command line). */
  readonly binary: string;
  readonly command: string;
  readonly args: readonly string[];
  /** The clean, fast shutdown (PostgreSQL: SIGINT; SIGTERM would wait for every client). */
  readonly stopSignal: NodeJS.Signals;
  /** Runs the server as this user (PostgreSQL refuses root). */
  readonly user?: { uid: number; gid: number };
  /** Resolves true once the server answers as itself on `port`. */
  ready(): Promise<boolean>;
}

/** A fresh directory for one server's data, removed by `stop()`; owned by `user` if given. */
export function serverDir(kind: string, user?: { uid: number; gid: number }): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${SERVER_DIR_PREFIX}${kind}-`));
  if (user) fs.chownSync(dir, user.uid, user.gid);
  return dir;
}

/** Runs a setup command (initdb, mariadb-install-db) to its end; throws with its output. */
function runSetup(
  command: string,
  args: readonly string[],
  user?: { uid: number; gid: number },
): void {
  const result = spawnSync(command, args, { ...user, encoding: 'utf8', timeout: 60_000 });
  if (result.status !== 0) {
    throw new Error(
      `${command} ${args.join(' ')} failed (${result.error?.message ?? result.status}):\n` +
        `${result.stdout}\n${result.stderr}`,
    );
  }
}

/** A data directory made by a setup command (initdb, mariadb-install-db). */
export interface DataTemplate {
  /** For the template's name (`postgres`, `mariadb`). */
  readonly kind: string;
  readonly command: string;
  /** The setup's arguments, to write its data into `<dir>/data`. */
  args(dir: string): string[];
  /** Writes what the setup reads from `dir` first (PostgreSQL's password file). */
  prepare?(dir: string): void;
  readonly user?: { uid: number; gid: number };
}

/** Where the templates live, across runs: a cache, made again when the setup changes. */
const TEMPLATES_DIR = path.join(os.tmpdir(), 'nest-locked-data-templates');

/**
 * Fills `data` (which must not exist) with a copy of the data directory `template` makes: the
 * setup runs once, into a directory named by its command, arguments and binary, and each server
 * gets a copy (initdb and mariadb-install-db take seconds on a loaded machine, a copy a fraction
 * of that). Several processes may ask at once: each makes its own and renames it into place,
 * the first one kept.
 */
export function copyTemplate(template: DataTemplate, data: string): void {
  const made = templateDir(template);
  const copy = spawnSync('cp', ['-a', made, data], { encoding: 'utf8', timeout: 60_000 });
  if (copy.status !== 0) {
    throw new Error(
      `cp -a ${made} ${data} failed (${copy.error?.message ?? copy.status}): ${copy.stderr}`,
    );
  }
}

/** The template's directory, made first if it is not there yet. */
function templateDir(template: DataTemplate): string {
  const binary = fs.statSync(template.command);
  const key = createHash('sha256')
    .update(
      JSON.stringify([template.command, template.args('<dir>'), template.user, binary.mtimeMs]),
    )
    .digest('hex')
    .slice(0, 16);
  const made = path.join(TEMPLATES_DIR, `${template.kind}-${key}`);
  if (fs.existsSync(made)) return made;
  fs.mkdirSync(TEMPLATES_DIR, { recursive: true });
  const build = fs.mkdtempSync(path.join(TEMPLATES_DIR, `${template.kind}-building-`));
  try {
    if (template.user) fs.chownSync(build, template.user.uid, template.user.gid);
    template.prepare?.(build);
    runSetup(template.command, template.args(build), template.user);
    try {
      fs.renameSync(path.join(build, 'data'), made);
    } catch (error) {
      // Another process made it first: keep theirs.
      if (!fs.existsSync(made)) throw error;
    }
  } finally {
    fs.rmSync(build, { recursive: true, force: true });
  }
  return made;
}

/** Starts the server and resolves once `spec.ready()` answers true. */
export async function startDatabaseServer(
  spec: DatabaseServerSpec,
  port: number,
  dir: string,
): Promise<DatabaseServerHandle> {
  const server = new SpawnedDatabaseServer(spec, port, dir);
  try {
    await server.launch();
  } catch (error) {
    await server.stop();
    throw error;
  }
  return server;
}

/** Every process below `pid` (children first found through /proc). */
function descendants(pid: number): number[] {
  const found: number[] = [];
  const visit = (parent: number) => {
    let tasks: string[];
    try {
      tasks = fs.readdirSync(`/proc/${parent}/task`);
    } catch {
      return;
    }
    for (const task of tasks) {
      let children = '';
      try {
        children = fs.readFileSync(`/proc/${parent}/task/${task}/children`, 'utf8');
      } catch {
        continue;
      }
      for (const child of children.trim().split(/\s+/).filter(Boolean).map(Number)) {
        found.push(child);
        visit(child);
      }
    }
  };
  visit(pid);
  return found;
}

class SpawnedDatabaseServer implements DatabaseServerHandle {
  readonly host = '127.0.0.1';
  private child?: ChildProcess;
  private exited: Promise<void> = Promise.resolve();
  private stopping?: Promise<void>;
  private output = '';

  constructor(
    private readonly spec: DatabaseServerSpec,
    readonly port: number,
    private readonly dir: string,
  ) {}

  get pid(): number | undefined {
    return this.running() ? this.child?.pid : undefined;
  }

  async launch(): Promise<void> {
    this.output = '';
    const child = spawn(this.spec.command, this.spec.args, {
      ...this.spec.user,
      cwd: this.dir,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    if (child.pid === undefined) {
      const [error] = (await once(child, 'error')) as [Error];
      throw new Error(`Could not start ${this.spec.command}: ${error.message}`);
    }
    this.exited = followServer(
      child as typeof child & { pid: number },
      { port: this.port, dir: this.dir, binary: this.spec.binary },
      (text) => (this.output = (this.output + text).slice(-SERVER_OUTPUT_LIMIT)),
    );
    const deadline = Date.now() + READY_TIMEOUT_MS;
    for (;;) {
      if (!this.running()) {
        throw new Error(`${this.spec.binary} on port ${this.port} exited:\n${this.output}`);
      }
      if (await this.spec.ready().catch(() => false)) return;
      if (Date.now() > deadline) {
        throw new Error(`${this.spec.binary} on port ${this.port} not ready:\n${this.output}`);
      }
      await sleep(50);
    }
  }

  stop(): Promise<void> {
    this.stopping ??= this.terminate().finally(() => removeServerDir(this.dir));
    return this.stopping;
  }

  signal(signal: NodeJS.Signals): void {
    const pid = this.pid;
    if (pid === undefined) return;
    // PostgreSQL's children leave the postmaster's process group (setsid): each by its PID.
    for (const target of [pid, ...descendants(pid)]) {
      try {
        process.kill(target, signal);
      } catch {
        // Exited meanwhile.
      }
    }
  }

  async restart(): Promise<void> {
    await this.terminate();
    await this.launch();
  }

  down(): Promise<void> {
    return this.terminate();
  }

  up(): Promise<void> {
    return this.launch();
  }

  private running(): boolean {
    const child = this.child;
    return child !== undefined && child.exitCode === null && child.signalCode === null;
  }

  private async terminate(): Promise<void> {
    const child = this.child;
    if (child && this.running()) {
      child.kill(this.spec.stopSignal);
      // A frozen server handles its stop signal only once it runs again.
      this.signal('SIGCONT');
      const escalate = setTimeout(() => this.running() && this.signal('SIGKILL'), STOP_GRACE_MS);
      try {
        await this.exited;
      } finally {
        clearTimeout(escalate);
      }
    }
    await this.exited;
  }
}
