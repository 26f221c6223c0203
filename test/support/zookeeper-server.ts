import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
// From node:timers, not globals: a suite with jest's fake timers must still start and stop servers.
import { clearTimeout, setTimeout } from 'node:timers';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  followServer,
  removeServerDir,
  SERVER_DIR_PREFIX,
  SERVER_OUTPUT_LIMIT,
} from './pid-registry';
import { freePorts } from './redis-server';
import { installWithApt } from './server-binary';

/**
 * Real ZooKeeper 3.8 servers (Debian's `zookeeperd` jars, run with `java ... QuorumPeerMain`) for
 * the ZooKeeper suites: a single member or an ensemble of 3, on 127.0.0.1 random ports, each under
 * its own temporary directory, stopped by PID (PID records as redis-server's, so the global
 * teardown reaps what a crashed worker left). A JVM takes ~1 s to start: share one ensemble per
 * spec file.
 */

const HOST = '127.0.0.1';
const JAVA_DIR = '/usr/share/java';
/**
 * What QuorumPeerMain loads from /usr/share/java: the server, its wire records, logging (slf4j
 * with the no-op binding: the server's chatter is not wanted), netty and the utility jars.
 */
const JARS = [
  'zookeeper.jar',
  'zookeeper-jute.jar',
  'slf4j-api.jar',
  'slf4j-nop.jar',
  'netty-handler.jar',
  'netty-common.jar',
  'netty-buffer.jar',
  'netty-transport.jar',
  'netty-resolver.jar',
  'netty-codec.jar',
  'netty-transport-native-epoll.jar',
  'netty-transport-native-unix-common.jar',
  'commons-io.jar',
  'commons-cli.jar',
  'metrics-core.jar',
  'snappy-java.jar',
];
/** A small, fast-starting JVM: tests need a server, not throughput. */
const JVM_ARGS = [
  '-Xmx96m',
  '-XX:+UseSerialGC',
  '-XX:TieredStopAtLevel=1',
  '-Djava.net.preferIPv4Stack=true',
  // An election waits this long for a peer that does not answer (default 5 s).
  '-Dzookeeper.cnxTimeout=500',
  '-Dzookeeper.jmx.log4j.disable=true',
];
const READY_TIMEOUT_MS = 30_000;
const STOP_GRACE_MS = 2_000;
const NOT_INSTALLED =
  'ZooKeeper is not installed; install it with `sudo apt-get install -y zookeeperd` (Debian/Ubuntu: ' +
  'the server jars land in /usr/share/java, java comes with it).';

/** How a member sees itself (`srvr`'s Mode line), or `down`. */
export type ZooKeeperMode = 'standalone' | 'leader' | 'follower' | 'down' | 'not serving';

export interface ZooKeeperMember {
  readonly id: number;
  readonly port: number;
  /** `127.0.0.1:<port>`. */
  readonly address: string;
  /** PID of its JVM while it runs. */
  readonly pid: number | undefined;
  /** Sends `signal` (default SIGKILL) and returns at once, like a crash. */
  kill(signal?: NodeJS.Signals): void;
  /** Starts it again with its data (after kill or stop of the member alone). */
  restart(): Promise<void>;
  /** Its mode now, by the `srvr` four-letter word (allowed in the harness's config). */
  mode(timeoutMs?: number): Promise<ZooKeeperMode>;
  /** Client sessions connected to it now (`cons`), 0 when it does not answer. */
  sessions(timeoutMs?: number): Promise<number>;
}

export interface ZooKeeperEnsemble {
  readonly members: readonly ZooKeeperMember[];
  /** `127.0.0.1:p1,127.0.0.1:p2,...`: what `zookeeperBackend({ connectString })` takes. */
  readonly connectString: string;
  /** The member that leads now (3 members), or the only one. */
  leader(): Promise<ZooKeeperMember | undefined>;
  /**
   * Resolves once a quorum serves (a leader and enough followers), or with `'all'` once every
   * member leads or follows (a restarted or resumed one has caught up), within 30 s; else
   * fails with every member's mode and the end of its output.
   */
  waitServing(members?: 'quorum' | 'all'): Promise<void>;
  /** Stops every member (SIGCONT first, so a frozen one can exit) and removes the directory. */
  stop(): Promise<void>;
}

export interface StartZooKeeperOptions {
  /** 1 (standalone) or an odd ensemble size; default 1. */
  members?: number;
  /**
   * ZooKeeper's tick in ms (default 100): the session timeout a client may ask lies between 2
   * and 20 ticks (`minSessionTimeout`/`maxSessionTimeout`), so a small tick lets tests expire
   * sessions fast.
   */
  tickTime?: number;
}

let lookup: string | Error | undefined;

/**
 * The classpath of ZooKeeper's server; installs `zookeeperd` with apt-get when missing and root.
 *
 * @example
 * const classpath = ensureZooKeeperInstalled();
 */
export function ensureZooKeeperInstalled(): string {
  lookup ??= lookUp();
  if (lookup instanceof Error) throw lookup;
  return lookup;
}

function classpath(): string | undefined {
  const jars = JARS.map((jar) => path.join(JAVA_DIR, jar));
  if (!fs.existsSync(jars[0]) || spawnSync('java', ['-version']).status !== 0) return undefined;
  return jars.filter((jar) => fs.existsSync(jar)).join(':');
}

function lookUp(): string | Error {
  const found = classpath();
  if (found) return found;
  installWithApt('zookeeperd');
  return classpath() ?? new Error(NOT_INSTALLED);
}

/**
 * Starts a ZooKeeper ensemble (one standalone member by default) and resolves once it serves.
 *
 * @example
 * const zk = await startZooKeeper();             // standalone
 * const trio = await startZooKeeper({ members: 3 });
 * // zookeeperBackend({ connectString: trio.connectString })
 * await trio.stop();
 */
export async function startZooKeeper(
  options: StartZooKeeperOptions = {},
): Promise<ZooKeeperEnsemble> {
  const cp = ensureZooKeeperInstalled();
  const count = options.members ?? 1;
  if (!Number.isInteger(count) || count < 1 || count % 2 === 0) {
    throw new Error(`members must be 1 or an odd number; startZooKeeper got ${count}.`);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${SERVER_DIR_PREFIX}zookeeper-`));
  const ports = await freePorts(count * 3);
  const peers = Array.from({ length: count }, (_, i) => ({
    id: i + 1,
    client: ports[i * 3],
    peer: ports[i * 3 + 1],
    election: ports[i * 3 + 2],
  }));
  const tick = options.tickTime ?? 100;
  const members = peers.map((p) => {
    const home = path.join(dir, `member-${p.id}`);
    fs.mkdirSync(path.join(home, 'data'), { recursive: true });
    const lines = [
      `tickTime=${tick}`,
      'initLimit=20',
      'syncLimit=5',
      `dataDir=${path.join(home, 'data')}`,
      `clientPort=${p.client}`,
      `clientPortAddress=${HOST}`,
      'admin.enableServer=false',
      // wchp: the watches by path, for a test that waits until a waiter watches a node.
      '4lw.commands.whitelist=srvr,ruok,cons,wchp',
      `minSessionTimeout=${2 * tick}`,
      `maxSessionTimeout=${Math.max(20 * tick, 10_000)}`,
      // Transaction logs are not kept across tests: no fsync stalls on a loaded disk.
      'forceSync=no',
      'autopurge.purgeInterval=0',
    ];
    if (count > 1) {
      fs.writeFileSync(path.join(home, 'data', 'myid'), `${p.id}\n`);
      for (const q of peers) lines.push(`server.${q.id}=${HOST}:${q.peer}:${q.election}`);
    }
    const cfg = path.join(home, 'zoo.cfg');
    fs.writeFileSync(cfg, `${lines.join('\n')}\n`);
    return new SpawnedMember(p.id, p.client, cfg, cp, dir);
  });
  const ensemble = new Ensemble(members, dir);
  try {
    await Promise.all(members.map((m) => m.launch()));
    await ensemble.waitServing();
  } catch (error) {
    await ensemble.stop();
    throw error;
  }
  return ensemble;
}

class Ensemble implements ZooKeeperEnsemble {
  readonly connectString: string;

  constructor(
    readonly members: readonly SpawnedMember[],
    private readonly dir: string,
  ) {
    this.connectString = members.map((m) => m.address).join(',');
  }

  async leader(): Promise<ZooKeeperMember | undefined> {
    const modes = await Promise.all(this.members.map((m) => m.mode()));
    return this.members.find((_, i) => modes[i] === 'leader' || modes[i] === 'standalone');
  }

  async waitServing(members: 'quorum' | 'all' = 'quorum'): Promise<void> {
    const deadline = performance.now() + READY_TIMEOUT_MS;
    const needed =
      members === 'all' ? this.members.length : Math.floor(this.members.length / 2) + 1;
    for (;;) {
      const modes = await Promise.all(this.members.map((m) => m.mode()));
      const serving = modes.filter((m) => m === 'leader' || m === 'follower' || m === 'standalone');
      if (serving.length >= needed && modes.some((m) => m === 'leader' || m === 'standalone')) {
        return;
      }
      if (performance.now() > deadline) {
        const output = this.members.map((m) => `member ${m.id}: ${m.output.slice(-2000)}`);
        throw new Error(
          `ZooKeeper did not serve within ${READY_TIMEOUT_MS / 1000} s (modes ${modes.join(', ')}).\n` +
            output.join('\n'),
        );
      }
      await sleep(50);
    }
  }

  async stop(): Promise<void> {
    await Promise.all(this.members.map((m) => m.terminate()));
    removeServerDir(this.dir);
  }
}

class SpawnedMember implements ZooKeeperMember {
  readonly address: string;
  output = '';
  private child?: ChildProcess;
  private exited: Promise<void> = Promise.resolve();

  constructor(
    readonly id: number,
    readonly port: number,
    private readonly cfg: string,
    private readonly cp: string,
    private readonly dir: string,
  ) {
    this.address = `${HOST}:${port}`;
  }

  get pid(): number | undefined {
    return this.running() ? this.child?.pid : undefined;
  }

  async launch(): Promise<void> {
    const child = spawn(
      'java',
      [...JVM_ARGS, '-cp', this.cp, 'org.apache.zookeeper.server.quorum.QuorumPeerMain', this.cfg],
      { cwd: path.dirname(this.cfg), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    this.child = child;
    const pid = child.pid;
    if (pid === undefined) throw new Error('Could not start java for ZooKeeper.');
    // The record's dir is the ensemble's: the teardown removes it with a leftover member.
    this.exited = followServer(
      child as typeof child & { pid: number },
      { port: this.port, dir: this.dir },
      (text) => (this.output = (this.output + text).slice(-SERVER_OUTPUT_LIMIT)),
    );
    // Listening is enough here; the ensemble waits for a quorum itself.
    const deadline = performance.now() + READY_TIMEOUT_MS;
    while ((await this.mode()) === 'down') {
      if (!this.running()) {
        throw new Error(`ZooKeeper member ${this.id} exited. Its output:\n${this.output}`);
      }
      if (performance.now() > deadline) {
        throw new Error(`ZooKeeper member ${this.id} did not listen. Its output:\n${this.output}`);
      }
      await sleep(50);
    }
  }

  kill(signal: NodeJS.Signals = 'SIGKILL'): void {
    if (this.running()) this.child?.kill(signal);
  }

  async restart(): Promise<void> {
    await this.terminate();
    await this.launch();
  }

  mode(timeoutMs = 1_000): Promise<ZooKeeperMode> {
    return fourLetterWord(this.port, 'srvr', timeoutMs).then(
      (reply) => {
        const mode = /^Mode: (\w+)/m.exec(reply)?.[1];
        if (mode === 'leader' || mode === 'follower' || mode === 'standalone') return mode;
        return 'not serving';
      },
      () => 'down',
    );
  }

  sessions(timeoutMs = 1_000): Promise<number> {
    return fourLetterWord(this.port, 'cons', timeoutMs).then(
      (reply) => (reply.match(/sid=0x[0-9a-f]+/g) ?? []).length,
      () => 0,
    );
  }

  async terminate(): Promise<void> {
    const child = this.child;
    if (child && this.running()) {
      child.kill('SIGTERM');
      // A member frozen with SIGSTOP handles SIGTERM only once it runs again.
      child.kill('SIGCONT');
      const escalate = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
      try {
        await this.exited;
      } finally {
        clearTimeout(escalate);
      }
    }
    await this.exited;
  }

  private running(): boolean {
    const child = this.child;
    return child !== undefined && child.exitCode === null && child.signalCode === null;
  }
}

/** `count` distinct free loopback ports. */

/** Sends a four-letter word (`srvr`, `ruok`, `wchp`) and resolves with the whole reply. */
export function fourLetterWord(port: number, word: string, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let reply = '';
    const socket = net.connect({ host: HOST, port });
    const timer = setTimeout(
      () => socket.destroy(new Error(`no reply within ${timeoutMs} ms`)),
      timeoutMs,
    );
    socket.on('connect', () => socket.write(word));
    socket.on('data', (chunk: Buffer) => (reply += chunk.toString()));
    socket.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(reply);
    });
  });
}
