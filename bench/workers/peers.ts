import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  Redlock as NestRedlock,
  RedlockModule as NestRedlockModule,
} from '@anchan828/nest-redlock';
import { Redis } from 'ioredis';
import {
  Locked,
  LockContext,
  LockService,
  RedlockModule,
  type RedlockModuleOptions,
} from 'nest-locked';
import Redlock from 'redlock';
import { Mutex, RedlockMutex, Semaphore } from 'redis-semaphore';
import { type CommandCounts, OWN_KEY, PERMITS, type PeerName } from '../protocol';

/** The critical section; gets the slice index under a segmented lock. */
export type Body = (segment?: number) => Promise<void>;

/** A lock kept until `release()` (holds and waiters scenarios). */
export interface Held {
  release(): Promise<void>;
  /** Whether the peer reported the lock lost while it was held. */
  lost(): boolean;
}

/** How long a held lock lasts and how long its caller waits for it. */
export interface HoldOptions {
  ttl: number;
  /** ms to wait while the key is busy. */
  waitTimeout: number;
}

/** One way of taking a lock, behind one interface, so every peer runs the same loop. */
export interface Peer {
  /** Takes `key`, runs `body`, releases; resolves once the release is done. */
  run(key: string, body: Body): Promise<void>;
  /** Takes `key` and keeps it (renewed, where the peer renews) until `release()`. */
  hold?(key: string, options: HoldOptions): Promise<Held>;
  /** The same as a reader (a shared hold); peers without one read under `run`'s lock. */
  runRead?(key: string, body: Body): Promise<void>;
  close(): Promise<void>;
}

/** Thrown when a scenario cannot run on this build (e.g. `segments` not implemented yet). */
export class SkipError extends Error {
  override name = 'SkipError';
}

// ------------------------------------------------------------------ command counting

/**
 * Counts every command sent by any ioredis connection of this process (all peers use the same
 * ioredis copy): the client-side view of "commands per critical section". Commands run inside a
 * Lua script are not counted here (they are not sent), unlike in the server's commandstats.
 */
export const commandCounter = {
  enabled: false,
  counts: {} as CommandCounts,
  reset(): void {
    this.counts = {};
  },
};
{
  const proto = Redis.prototype as unknown as {
    sendCommand: (command: { name: string }, stream?: unknown) => unknown;
  };
  const original = proto.sendCommand;
  proto.sendCommand = function (this: unknown, command: { name: string }, stream?: unknown) {
    if (commandCounter.enabled && command?.name) {
      const c = commandCounter.counts;
      c[command.name] = (c[command.name] ?? 0) + 1;
    }
    return original.call(this, command, stream);
  };
}

// ------------------------------------------------------------------ helpers

const url = (port: number) => `redis://127.0.0.1:${port}`;

function connect(port: number): Redis {
  return new Redis({ host: '127.0.0.1', port, lazyConnect: false, maxRetriesPerRequest: 1 });
}

async function ready(clients: Redis[]): Promise<void> {
  await Promise.all(
    clients.map((c) =>
      c.status === 'ready'
        ? undefined
        : new Promise<void>((resolve, reject) => {
            c.once('ready', () => resolve());
            c.once('error', reject);
          }),
    ),
  );
}

async function quitAll(clients: Redis[]): Promise<void> {
  await Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect())));
}

// ------------------------------------------------------------------ peers

/** No lock at all: the timer-only ideal (1 worker) and nothing else. */
function timerPeer(): Peer {
  return { run: (_key, body) => body(), close: async () => undefined };
}

const FLOOR_RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0`;

type FloorRedis = Redis & { floorRelease(key: string, token: string): Promise<number> };

/**
 * Sends to every node at once and resolves as soon as a majority agreed (true) or a majority
 * can no longer agree (false); the slower replies still arrive, nobody waits for them. Safe for
 * a lock: commands on one connection run in order, so a late release lands before the next SET.
 */
function atQuorum<T>(calls: Promise<T>[], ok: (v: T) => boolean): Promise<boolean> {
  const quorum = Math.floor(calls.length / 2) + 1;
  return new Promise((resolve) => {
    let yes = 0;
    let no = 0;
    for (const call of calls) {
      call
        .then(
          (v) => (ok(v) ? ++yes : ++no),
          () => ++no,
        )
        .then(() => {
          if (yes === quorum) resolve(true);
          else if (no === calls.length - quorum + 1) resolve(false);
        });
    }
  });
}

/** Replica acknowledgement a floor variant waits for after its SET (`WAIT replicas timeout`). */
interface FloorAcks {
  replicas: number;
  timeout: number;
}

/**
 * The floor of a cross-process handoff by pub/sub (the handoff scenario: one caller per
 * process): no lock at all. The processes take turns on a key in order, process 0 first; after
 * its section a process hands the turn to the next with one `PUBLISH` on a channel that process
 * subscribed to. What it measures is what any grant by message costs at least on this machine:
 * the PUBLISH's round into Redis, the delivery, and waking the next process. A process's own
 * keys (`OWN_KEY`: its warm-ups) run at once.
 */
async function pubsubFloorPeer(ports: number[], proc: number, procs: number): Promise<Peer> {
  const pub = connect(ports[0]);
  const sub = connect(ports[0]);
  await ready([pub, sub]);
  const SUFFIX = ':turn:';
  /** Turns received for a key before its caller asked for one. */
  const banked = new Map<string, number>();
  const waiting = new Map<string, () => void>();
  const started = new Set<string>();
  sub.on('pmessage', (_pattern: string, channel: string) => {
    const key = channel.slice(0, channel.lastIndexOf(SUFFIX));
    const wake = waiting.get(key);
    if (wake) {
      waiting.delete(key);
      wake();
    } else {
      banked.set(key, (banked.get(key) ?? 0) + 1);
    }
  });
  await sub.psubscribe(`*${SUFFIX}${proc}`);
  const turn = (key: string): Promise<void> | undefined => {
    if (!started.has(key)) {
      started.add(key);
      if (proc === 0) return undefined;
    }
    const n = banked.get(key) ?? 0;
    if (n > 0) {
      banked.set(key, n - 1);
      return undefined;
    }
    // A turn not handed over within a second (the other process stopped at its time budget)
    // is taken anyway: a caller never hangs on a process that has left.
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        waiting.delete(key);
        resolve();
      }, 1_000);
      waiting.set(key, () => {
        clearTimeout(timer);
        resolve();
      });
    });
  };
  return {
    async run(key, body) {
      if (key.includes(OWN_KEY)) return body();
      await turn(key);
      try {
        await body();
      } finally {
        void pub.publish(`${key}${SUFFIX}${(proc + 1) % procs}`, '1');
      }
    },
    close: async () => {
      await Promise.all([sub.quit(), pub.quit()]);
    },
  };
}

/**
 * The raw floor: `SET key token NX PX ttl`, then a compare-and-delete Lua script by EVALSHA
 * (ioredis `defineCommand`, falling back to EVAL once). On 3 nodes: the same on every node in
 * parallel, going on as soon as a majority answered (as redlock does), the fastest correct
 * quorum lock. No waiting strategy: a busy key is an error.
 *
 * With `acks` (floor-wait1): `WAIT replicas timeout` is sent right after each SET on the same
 * connection (pipelined, not awaited in between, as nest-locked sends its WAIT after the lock
 * script); too few acknowledgements is an error and the key is given back. The release is not
 * followed by a WAIT (nor is ours).
 */
async function floorPeer(ports: number[], ttl: number, acks?: FloorAcks): Promise<Peer> {
  const clients = ports.map((p) => {
    const c = connect(p);
    c.defineCommand('floorRelease', { numberOfKeys: 1, lua: FLOOR_RELEASE });
    return c as FloorRedis;
  });
  await ready(clients);
  const prefix = randomBytes(8).toString('hex');
  let seq = 0;
  const release = (key: string, token: string) =>
    atQuorum(
      clients.map((c) => c.floorRelease(key, token)),
      () => true,
    );
  if (acks) return floorAckedPeer(clients, ttl, acks, prefix, release);
  return {
    async run(key, body) {
      const token = `${prefix}.${seq++}`;
      if (clients.length === 1) {
        if ((await clients[0].set(key, token, 'PX', ttl, 'NX')) !== 'OK') {
          throw Object.assign(new Error('busy'), { name: 'Busy' });
        }
      } else {
        const taken = await atQuorum(
          clients.map((c) => c.set(key, token, 'PX', ttl, 'NX')),
          (v) => v === 'OK',
        );
        if (!taken) {
          await release(key, token);
          throw Object.assign(new Error('busy'), { name: 'Busy' });
        }
      }
      try {
        await body();
      } finally {
        await release(key, token);
      }
    },
    close: () => quitAll(clients),
  };
}

/** `floorPeer` with `WAIT` after every SET (kept apart so the plain floor's path is untouched). */
function floorAckedPeer(
  clients: FloorRedis[],
  ttl: number,
  acks: FloorAcks,
  prefix: string,
  release: (key: string, token: string) => Promise<boolean>,
): Peer {
  let seq = 0;
  const take = (c: FloorRedis, key: string, token: string): Promise<string | null> => {
    const set = c.set(key, token, 'PX', ttl, 'NX');
    const wait = c.wait(acks.replicas, acks.timeout);
    return Promise.all([set, wait]).then(([reply, acked]) => {
      if (acked < acks.replicas) {
        throw Object.assign(
          new Error(
            `WAIT: ${acked} of ${acks.replicas} replicas acknowledged in ${acks.timeout} ms`,
          ),
          { name: 'ReplicaAck' },
        );
      }
      return reply;
    });
  };
  const busy = () => Object.assign(new Error('busy'), { name: 'Busy' });
  return {
    async run(key, body) {
      const token = `${prefix}.${seq++}`;
      if (clients.length === 1) {
        let reply: string | null;
        try {
          reply = await take(clients[0], key, token);
        } catch (err) {
          // Too few acknowledgements (or a failed WAIT): the SET may have landed, give it back.
          await release(key, token);
          throw err;
        }
        if (reply !== 'OK') throw busy();
      } else {
        const taken = await atQuorum(
          clients.map((c) => take(c, key, token)),
          (v) => v === 'OK',
        );
        if (!taken) {
          await release(key, token);
          throw busy();
        }
      }
      try {
        await body();
      } finally {
        await release(key, token);
      }
    },
    close: () => quitAll(clients),
  };
}

/** redlock 5 used directly: `acquire([key], ttl)` then `lock.release()`. */
async function redlockPeer(ports: number[], ttl: number, tuned: boolean): Promise<Peer> {
  const clients = ports.map(connect);
  await ready(clients);
  // Tuned: 10 +- 10 ms retries, never give up. This beta computes the lease end from before the
  // first attempt, so the contended scenarios use a long ttl (see WorkerSpec.ttl).
  const redlock = tuned
    ? new Redlock(clients, { retryDelay: 10, retryJitter: 10, retryCount: -1 })
    : new Redlock(clients);
  redlock.on('error', () => undefined);
  return {
    async run(key, body) {
      const lock = await redlock.acquire([key], ttl);
      try {
        await body();
      } finally {
        await lock.release().catch(() => undefined);
      }
    },
    // `using` is redlock 5's only auto-extension (a timer per lock, extends ~500 ms before the
    // end): the hold is a `using` whose routine waits for release().
    async hold(key, o) {
      let open!: () => void;
      const gate = new Promise<void>((resolve) => (open = resolve));
      let lost = false;
      let started!: () => void;
      const running = new Promise<void>((resolve) => (started = resolve));
      const done = redlock.using([key], o.ttl, async (signal) => {
        started();
        await gate;
        if (signal.aborted) lost = true;
      });
      await Promise.race([running, done]);
      return {
        release: async () => {
          open();
          await done.catch(() => undefined);
        },
        lost: () => lost,
      };
    },
    close: () => quitAll(clients),
  };
}

/** redis-semaphore `Mutex` (RedlockMutex on 3 nodes), defaults, a new instance per call. */
async function mutexPeer(ports: number[]): Promise<Peer> {
  const clients = ports.map(connect);
  await ready(clients);
  return {
    async run(key, body) {
      const m = clients.length === 1 ? new Mutex(clients[0], key) : new RedlockMutex(clients, key);
      await m.acquire();
      try {
        await body();
      } finally {
        await m.release();
      }
    },
    // lockTimeout = ttl: it refreshes itself every 0.8 x ttl (its own setInterval per mutex).
    async hold(key, o) {
      let lost = false;
      const options = {
        lockTimeout: o.ttl,
        acquireTimeout: Math.max(1, o.waitTimeout),
        onLockLost: () => (lost = true),
      };
      const m =
        clients.length === 1
          ? new Mutex(clients[0], key, options)
          : new RedlockMutex(clients, key, options);
      await m.acquire();
      return { release: () => m.release(), lost: () => lost };
    },
    close: () => quitAll(clients),
  };
}

/** `@anchan828/nest-redlock`: the `@Redlock` decorator on a Nest provider method, defaults. */
async function nestRedlockPeer(ports: number[], ttl: number): Promise<Peer> {
  @Injectable()
  class Runner {
    @NestRedlock((_target: unknown, key: string) => key, ttl)
    async run(key: string, body: Body): Promise<void> {
      void key;
      await body();
    }
  }
  const clients = ports.map(connect);
  await ready(clients);
  @Module({ imports: [NestRedlockModule.register({ clients })], providers: [Runner] })
  class AppModule {}
  const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn'] });
  const runner = app.get(Runner);
  return {
    run: (key, body) => runner.run(key, body),
    close: () => app.close(), // the module quits the clients
  };
}

async function oursApp(
  ports: number[],
  providers: (new (...args: never[]) => unknown)[],
  options: Omit<RedlockModuleOptions, 'clients'> = {},
): Promise<INestApplicationContext> {
  @Module({
    imports: [RedlockModule.forRoot({ ...options, clients: ports.map(url) })],
    providers,
  })
  class AppModule {}
  return NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn'] });
}

/**
 * Ours, the main row: `@Locked('{key}')` on a Nest provider method, module defaults (plus
 * `options`: `{ replicaAcks: 1 }` for ours-locked-acks1, `{ lockOrder: 'off' }` for
 * ours-locked-order-off, the same method otherwise).
 */
async function oursLockedPeer(
  ports: number[],
  options: Omit<RedlockModuleOptions, 'clients'> = {},
): Promise<Peer> {
  @Injectable()
  class Runner {
    @Locked('{key}')
    async run(key: string, body: Body): Promise<void> {
      void key;
      await body();
    }
  }
  const app = await oursApp(ports, [Runner], options);
  const runner = app.get(Runner);
  const locks = app.get(LockService);
  return {
    run: (key, body) => runner.run(key, body),
    // LockService.acquire: a handle, renewed by the watchdog until release().
    async hold(key, o) {
      const handle = await locks.acquire(key, { ttl: o.ttl, waitTimeout: o.waitTimeout });
      return { release: () => handle.release(), lost: () => handle.signal.aborted };
    },
    close: () => app.close(),
  };
}

/** Ours: `LockService.using(key, fn)`, module defaults. */
async function oursUsingPeer(ports: number[]): Promise<Peer> {
  const app = await oursApp(ports, []);
  const locks = app.get(LockService);
  return { run: (key, body) => locks.using(key, () => body()), close: () => app.close() };
}

/** Ours, segmented: `@Locked('{key}', { segments: 10 })`; the body gets the slice. */
async function oursSegmentedPeer(ports: number[]): Promise<Peer> {
  let Runner: new () => { run(key: string, body: Body): Promise<void> };
  try {
    @Injectable()
    class SegRunner {
      @Locked('{key}', { segments: 10 })
      async run(key: string, body: Body): Promise<void> {
        void key;
        await body(LockContext.current()?.segment);
      }
    }
    Runner = SegRunner;
  } catch (err) {
    throw new SkipError(`@Locked({ segments: 10 }) rejected: ${(err as Error).message}`);
  }
  const app = await oursApp(ports, [Runner]);
  const runner = app.get(Runner);
  return { run: (key, body) => runner.run(key, body), close: () => app.close() };
}

/**
 * Ours, read/write: `@Locked('{key}', { mode: 'read' })` for reads and
 * `@Locked('{key}', { mode: 'write' })` for writes, on the same key.
 */
async function oursReadWritePeer(ports: number[]): Promise<Peer> {
  @Injectable()
  class Runner {
    @Locked('{key}', { mode: 'write' })
    async write(key: string, body: Body): Promise<void> {
      void key;
      await body();
    }

    @Locked('{key}', { mode: 'read' })
    async read(key: string, body: Body): Promise<void> {
      void key;
      await body();
    }
  }
  const app = await oursApp(ports, [Runner]);
  const runner = app.get(Runner);
  return {
    run: (key, body) => runner.write(key, body),
    runRead: (key, body) => runner.read(key, body),
    close: () => app.close(),
  };
}

/** Ours, a semaphore: `@Locked('{key}', { permits: 5 })`. */
async function oursPermitsPeer(ports: number[]): Promise<Peer> {
  @Injectable()
  class Runner {
    @Locked('{key}', { permits: PERMITS })
    async run(key: string, body: Body): Promise<void> {
      void key;
      await body();
    }
  }
  const app = await oursApp(ports, [Runner]);
  const runner = app.get(Runner);
  return { run: (key, body) => runner.run(key, body), close: () => app.close() };
}

/** redis-semaphore `Semaphore` of 5, defaults (one server), a new instance per call. */
async function semaphorePeer(ports: number[]): Promise<Peer> {
  const client = connect(ports[0]);
  await ready([client]);
  return {
    async run(key, body) {
      const s = new Semaphore(client, key, PERMITS);
      await s.acquire();
      try {
        await body();
      } finally {
        await s.release();
      }
    },
    close: () => quitAll([client]),
  };
}

export async function createPeer(
  name: PeerName,
  ports: number[],
  ttl: number,
  proc = 0,
  procs = 1,
): Promise<Peer> {
  switch (name) {
    case 'timer':
      return timerPeer();
    case 'floor':
      return floorPeer(ports, ttl);
    case 'redlock':
      return redlockPeer(ports, ttl, false);
    case 'redlock-tuned':
      return redlockPeer(ports, ttl, true);
    case 'mutex':
      return mutexPeer(ports);
    case 'nest-redlock':
      return nestRedlockPeer(ports, ttl);
    case 'ours-locked':
      return oursLockedPeer(ports);
    case 'ours-locked-order-off':
      return oursLockedPeer(ports, { lockOrder: 'off' });
    case 'ours-using':
      return oursUsingPeer(ports);
    case 'ours-locked-seg10':
      return oursSegmentedPeer(ports);
    case 'floor-wait1':
      return floorPeer(ports, ttl, { replicas: 1, timeout: 1000 });
    case 'ours-locked-acks1':
      // replicaAckTimeout: the default (1000 ms), as floor-wait1's WAIT timeout.
      return oursLockedPeer(ports, { replicaAcks: 1 });
    case 'ours-rw':
      return oursReadWritePeer(ports);
    case 'ours-permits5':
      return oursPermitsPeer(ports);
    case 'semaphore5':
      return semaphorePeer(ports);
    case 'floor-pubsub':
      return pubsubFloorPeer(ports, proc, procs);
  }
}
