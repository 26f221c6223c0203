/**
 * One benchmark worker process: builds one peer, warms it up, says `ready`, waits for `go`,
 * runs one bounded loop (iterations and time), reports, closes and exits.
 * Spec: JSON in argv[2] (see WorkerSpec).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { commandSnapshot, commandStats, countsDelta, sentUsec } from '../commandstats';
import type {
  FromWorker,
  MemSample,
  PeerName,
  ToWorker,
  WorkerResult,
  WorkerSpec,
} from '../protocol';
import { OWN_KEY } from '../protocol';
import { callerSeed, mulberry32, writeDraws } from '../seeded';
import { type Body, commandCounter, createPeer, SkipError, type Peer } from './peers';
import { runHolds, runWaiters } from './scale';

/** CLOCK_MONOTONIC in ms: one clock for every process of the machine. */
const now = () => Number(process.hrtime.bigint()) / 1e6;

const spec = JSON.parse(process.argv[2] ?? '{}') as WorkerSpec;
const send = (m: FromWorker) =>
  new Promise<void>((resolve) => (process.send ? process.send(m, () => resolve()) : resolve()));

function waitFor(type: ToWorker['type']): Promise<void> {
  return new Promise((resolve) => {
    const on = (m: ToWorker) => {
      if (m?.type === type) {
        process.off('message', on);
        resolve();
      }
    };
    process.on('message', on);
  });
}

const errorName = (e: unknown) =>
  e instanceof Error ? e.name || e.constructor.name : typeof e === 'string' ? e : 'unknown';

function emptyResult(): WorkerResult {
  return {
    type: 'result',
    proc: spec.proc,
    startedAt: 0,
    endedAt: 0,
    done: 0,
    failures: {},
    waits: [],
    sections: [],
    segments: [],
    clientCommands: {},
    cpuUs: 0,
    timedOut: false,
  };
}

async function warmUp(name: PeerName, peer: Peer): Promise<void> {
  // Uncontended, on a key of this process only: loads scripts, JIT, connections.
  const key = `${spec.key}${OWN_KEY}warm:${spec.proc}:${name}`;
  for (let i = 0; i < spec.warmup; i++) {
    let seg: number | undefined = -1;
    await peer.run(key, async (s) => {
      seg = s;
    });
    if (name === 'ours-locked-seg10' && i === 0 && typeof seg !== 'number') {
      throw new SkipError('segments: LockContext.current().segment is undefined');
    }
  }
}

/**
 * Hot mode: every async worker of this process takes a key of this process only, with the
 * scenario's section, `contendedWarmup` times: local queues, handoffs, sweeps and grants get
 * compiled before the timed run. With several processes, then `sharedWarmup` times a key all of
 * them share: the paths between processes get compiled too. A failed acquire is ignored (peers
 * that give up are warm too).
 */
async function warmUpContended(peer: Peer): Promise<void> {
  await warmUpOn(
    peer,
    `${spec.key}${OWN_KEY}warmc:${spec.proc}`,
    spec.contendedWarmup,
    1_000_000,
    10_000,
  );
  if (spec.procs > 1) {
    await warmUpOn(peer, `${spec.key}:warmx`, spec.sharedWarmup, 2_000_000, 15_000);
  }
}

/** `iterations` calls per async worker of this process on `key`, within `budgetMs`. */
async function warmUpOn(
  peer: Peer,
  key: string,
  iterations: number,
  seed: number,
  budgetMs: number,
): Promise<void> {
  const stopAt = now() + budgetMs;
  await Promise.all(
    Array.from({ length: spec.concurrency }, async (_, w) => {
      // rw: the scenario's mix of reads and writes (from another seed than the timed run's).
      const writes = writeDraws(seed + spec.proc * 1000 + w, spec.writeShare ?? 0);
      for (let i = 0; i < iterations && now() < stopAt; i++) {
        const take = spec.mode === 'rw' && !writes() && peer.runRead ? peer.runRead : peer.run;
        await take.call(peer, key, () => sleep(spec.sectionMs)).catch(() => undefined);
      }
    }),
  );
}

/**
 * One block of the seq mode: `spec.block` cycles on `key`, or, with many keys at once,
 * `concurrency` loops each on a key of its own, sharing the block.
 */
async function runBlock(peer: Peer, key: string, body: Body): Promise<void> {
  if (spec.concurrency <= 1) {
    for (let i = 0; i < spec.block; i++) await peer.run(key, body);
    return;
  }
  const c = spec.concurrency;
  await Promise.all(
    Array.from({ length: c }, async (_, l) => {
      const own = `${key}:${l}`;
      const mine = Math.floor(spec.block / c) + (l < spec.block % c ? 1 : 0);
      for (let i = 0; i < mine; i++) await peer.run(own, body);
    }),
  );
}

/** Cycles each peer runs untimed on the many-keys path before its first timed block. */
const CONCURRENT_WARMUP_CYCLES = 4_000;

/**
 * Sequential acquire+release cycles, every peer of `spec.peers` in this one process: each
 * round runs one block of `spec.block` cycles per peer, in an order shuffled every round, so all
 * peers see the same machine (load from other processes, vCPU placement) at nearly the same
 * time. Server command counts are taken around each block (outside its timing).
 */
async function runSeq(peers: Map<PeerName, Peer>, stats: Redis[], r: WorkerResult) {
  const body = async () => undefined;
  const stopAt = now() + spec.budgetMs;
  const names = [...peers.keys()];
  // Many keys at once: the uncontended warm-up compiled each peer's one-caller path only; its
  // concurrent path (many calls in flight, replies arriving together) gets as many untimed
  // cycles first, on the keys of the timed blocks, so the short timed run measures each peer
  // warm rather than its JIT (a fresh process would otherwise spend most of it compiling).
  if (spec.concurrency > 1) {
    for (const name of names) {
      for (let n = 0; n < CONCURRENT_WARMUP_CYCLES; n += spec.block) {
        await runBlock(peers.get(name)!, `${spec.key}:${name}`, body);
      }
    }
  }
  r.blocks = [];
  r.startedAt = now();
  for (let round = 0; round < spec.iterations; round++) {
    if (now() > stopAt) {
      r.timedOut = true;
      break;
    }
    // A fresh order every round (seeded: the same for every run): no peer always follows the
    // same one, whose garbage or cache footprint it would otherwise inherit.
    const order = shuffled(names, round + 1);
    for (const name of order) {
      const peer = peers.get(name)!;
      const key = `${spec.key}:${name}`;
      const before = await commandSnapshot(stats);
      commandCounter.reset();
      commandCounter.enabled = true;
      const cpu = process.cpuUsage();
      const t = now();
      await runBlock(peer, key, body);
      const ms = now() - t;
      const used = process.cpuUsage(cpu);
      commandCounter.enabled = false;
      const after = await commandSnapshot(stats);
      const server = countsDelta(after.calls, before.calls);
      const serverUs = sentUsec(commandCounter.counts, after.usec, before.usec);
      r.blocks.push({
        peer: name,
        round,
        cycles: spec.block,
        ms,
        cpuUs: used.user + used.system,
        client: commandCounter.counts,
        server,
        serverUs,
        serverUsBy: countsDelta(after.usec, before.usec),
      });
      r.done += spec.block;
    }
  }
  r.endedAt = now();
}

/** `items` in an order drawn from `seed` (Fisher-Yates over a mulberry32 sequence). */
function shuffled<T>(items: readonly T[], seed: number): T[] {
  const random = mulberry32(seed);
  const out = items.slice();
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

/** `concurrency` async workers on the same key: acquire -> section -> release -> think. */
async function runHot(peer: Peer, r: WorkerResult): Promise<void> {
  const stopAt = now() + spec.budgetMs;
  r.arrivals = [];
  r.released = [];
  let probe: Redis | undefined;
  if (spec.probe) {
    // Hears every grant message of every process, on a connection of its own: when a grant
    // reached this process, apart from when the library's subscriber acted on it.
    const heard: number[] = (r.grantHeard = []);
    probe = new Redis({ host: '127.0.0.1', port: spec.ports[0] });
    probe.on('pmessage', () => heard.push(now()));
    await probe.psubscribe('nest-locked:g:*');
  }
  r.startedAt = now();
  const one = async (w: number) => {
    const id = spec.proc * 1000 + w;
    for (let i = 0; i < spec.iterations; i++) {
      if (now() > stopAt) {
        r.timedOut = true;
        return;
      }
      const t0 = now();
      try {
        await peer.run(spec.key, async (segment) => {
          const t1 = now();
          r.waits.push(t1 - t0);
          await sleep(spec.sectionMs);
          r.sections.push(id, t1, now());
          r.segments.push(typeof segment === 'number' ? segment : -1);
          r.arrivals!.push(t0);
        });
        r.released!.push(now());
        r.done++;
      } catch (err) {
        const name = errorName(err);
        r.failures[name] = (r.failures[name] ?? 0) + 1;
      }
      if (spec.thinkMs > 0) await sleep(spec.thinkMs);
    }
  };
  await Promise.all(Array.from({ length: spec.concurrency }, (_, w) => one(w)));
  r.endedAt = now();
  if (probe) await probe.quit().catch(() => probe.disconnect());
}

/**
 * rw mode: the hot loop with reads and writes mixed (`writeShare` of the calls write). Reads go
 * through the peer's `runRead` (its shared hold), or its exclusive lock when it has none. Each
 * section is recorded at its end with its kind and wait.
 */
async function runRw(peer: Peer, r: WorkerResult): Promise<void> {
  const stopAt = now() + spec.budgetMs;
  const kinds: number[] = (r.kinds = []);
  const writeWaits: number[] = (r.writeWaits = []);
  r.startedAt = now();
  const one = async (w: number) => {
    const id = spec.proc * 1000 + w;
    const writes = writeDraws(callerSeed(spec.proc, w), spec.writeShare ?? 0);
    for (let i = 0; i < spec.iterations; i++) {
      if (now() > stopAt) {
        r.timedOut = true;
        return;
      }
      const write = writes();
      const take = !write && peer.runRead ? peer.runRead : peer.run;
      const t0 = now();
      try {
        await take.call(peer, spec.key, async () => {
          const t1 = now();
          await sleep(spec.sectionMs);
          r.waits.push(t1 - t0);
          if (write) writeWaits.push(t1 - t0);
          r.sections.push(id, t1, now());
          r.segments.push(-1);
          kinds.push(write ? 1 : 0);
        });
        r.done++;
      } catch (err) {
        const name = errorName(err);
        r.failures[name] = (r.failures[name] ?? 0) + 1;
      }
    }
  };
  await Promise.all(Array.from({ length: spec.concurrency }, (_, w) => one(w)));
  r.endedAt = now();
}

function sample(cycles: number): MemSample {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('the memory worker needs --expose-gc');
  gc();
  gc();
  const resources: Record<string, number> = {};
  const info = process.getActiveResourcesInfo();
  for (const t of info) resources[t] = (resources[t] ?? 0) + 1;
  return { cycles, heapUsed: process.memoryUsage().heapUsed, handles: info.length, resources };
}

/**
 * `iterations` uncontended cycles in total, by `concurrency` loops on distinct keys; every
 * `sampleEvery` cycles all loops pause, the heap is collected and heap and handles sampled.
 */
async function runMem(peer: Peer, r: WorkerResult): Promise<void> {
  const body = async () => undefined;
  const stopAt = now() + spec.budgetMs;
  const samples: MemSample[] = [sample(0)];
  const every = Math.max(1, spec.sampleEvery);
  r.startedAt = now();
  let busyMs = 0;
  while (r.done < spec.iterations) {
    if (now() > stopAt) {
      r.timedOut = true;
      break;
    }
    const t = now();
    // Exactly `every` cycles per sample, spread over the loops (the first ones take the rest).
    const n = Math.min(every, spec.iterations - r.done);
    const c = spec.concurrency;
    await Promise.all(
      Array.from({ length: c }, async (_, l) => {
        const key = `${spec.key}:${l}`;
        const mine = Math.floor(n / c) + (l < n % c ? 1 : 0);
        for (let i = 0; i < mine; i++) await peer.run(key, body);
      }),
    );
    busyMs += now() - t;
    r.done += n;
    samples.push(sample(r.done));
  }
  // Cycles/s excluding the time spent in gc + sampling.
  r.endedAt = r.startedAt + busyMs;
  r.mem = samples;
}

async function main(): Promise<void> {
  const r = emptyResult();
  const names = spec.mode === 'seq' ? spec.peers : [spec.peer];
  const peers = new Map<PeerName, Peer>();
  let stats: Redis[] = [];
  try {
    for (const name of names) {
      const peer = await createPeer(name, spec.ports, spec.ttl, spec.proc, spec.procs);
      peers.set(name, peer);
      await warmUp(name, peer);
      if (spec.contendedWarmup > 0) await warmUpContended(peer);
    }
    if (spec.mode === 'seq') {
      stats = spec.ports.map((port) => new Redis({ host: '127.0.0.1', port }));
      await commandStats(stats);
    }
  } catch (err) {
    const skip = err instanceof SkipError || /not implemented/i.test(String(err));
    await send({ type: 'fatal', message: String((err as Error)?.stack ?? err), skip });
    process.exit(0);
  }
  const go = waitFor('go');
  await send({ type: 'ready' });
  await go;
  commandCounter.reset();
  commandCounter.enabled = true;
  const peer = peers.get(spec.peer)!;
  const cpu = process.cpuUsage();
  try {
    if (spec.mode === 'seq') await runSeq(peers, stats, r);
    else if (spec.mode === 'hot') await runHot(peer, r);
    else if (spec.mode === 'holds') await runHolds(peer, spec, r);
    else if (spec.mode === 'waiters') await runWaiters(peer, spec, r);
    else if (spec.mode === 'rw') await runRw(peer, r);
    else await runMem(peer, r);
  } catch (err) {
    commandCounter.enabled = false;
    const skip = err instanceof SkipError || /not implemented/i.test(String(err));
    await send({ type: 'fatal', message: String((err as Error)?.stack ?? err), skip });
    process.exit(0);
  }
  commandCounter.enabled = false;
  const used = process.cpuUsage(cpu);
  r.cpuUs = used.user + used.system;
  r.clientCommands = commandCounter.counts;
  await send(r);
  // Closing is bounded: the orchestrator kills this process by PID if it hangs.
  const closing = [...peers.values()].map((p) => p.close().catch(() => undefined));
  for (const c of stats)
    closing.push(
      c.quit().then(
        () => undefined,
        () => undefined,
      ),
    );
  await Promise.race([Promise.all(closing), sleep(5_000)]);
  process.exit(0);
}

process.on('message', (m: ToWorker) => {
  if (m?.type === 'stop') process.exit(0);
});
// The orchestrator is gone: nobody will read the result.
process.on('disconnect', () => process.exit(0));
void main();
