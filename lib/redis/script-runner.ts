import { Chain } from '../chain';
import type { Redis } from 'ioredis';
import type { Writable } from 'node:stream';
import type { RedisNode } from './redis-node';
import { REPLICAS_DID_NOT_ACK } from '../redlock.messages';
import type { Script, ScriptArgs } from './scripts';

/** Replica acknowledgement required of every write that takes or keeps a lock (`WAIT`). */
export interface ReplicaAcks {
  readonly replicas: number;
  /** ms the `WAIT` may block. */
  readonly timeout: number;
}

/** The answer to a script call: the decoded reply, or why there is none. */
export type ScriptCallback<R> = (error: Error | undefined, reply?: R) => void;

/**
 * One round trip in flight: answered once, by its reply, its error or the sweeper's timeout. A
 * class with methods (not a set of closures per call): the hot path allocates this object and
 * the two reply handlers only.
 */
class InFlight<R = unknown> {
  prev?: InFlight;
  next?: InFlight;
  private settled = false;

  constructor(
    private readonly calls: Chain<InFlight>,
    /** The sweeper's tick when it was sent (a coarse clock: no clock read per command). */
    readonly sent: number,
    private readonly decode: ((reply: unknown) => R) | undefined,
    private readonly cb: ScriptCallback<R>,
  ) {}

  reply(value: unknown): void {
    if (this.settle()) this.cb(undefined, this.decode ? this.decode(value) : (value as R));
  }

  fail(error: Error): void {
    if (this.settle()) this.cb(error);
  }

  /** Whether this is the first answer (the call leaves the chain then). */
  private settle(): boolean {
    if (this.settled) return false;
    this.settled = true;
    this.calls.remove(this as InFlight);
    return true;
  }
}

export const asError = (e: unknown): Error => (e instanceof Error ? e : new Error(String(e)));

/**
 * Commands the first corked batch of a tick holds before they leave in one write; each later
 * batch of the tick holds twice as many (see `ScriptRunner.cork`). Measured in one process
 * against one write at the end of the tick (64 callers on their own keys, one connection, a
 * shared 2-vCPU VM): 1.04-1.33x the cycles/s; 1,024 callers 1.09x. A fixed 16 did as well at 64
 * callers and worse at 1,024 (a system call per 16 commands).
 */
export const CORK_BATCH = 16;

/** One socket's writes in this tick: those held corked, and the size of the batch they fill. */
class TickWrites {
  /** Writes held corked (0: not corked; the tick's first write went out at once). */
  held = 0;
  /** Writes the current batch holds before it leaves: `CORK_BATCH`, doubled at each batch. */
  batch = CORK_BATCH;
}

/**
 * Sends the lock scripts: EVALSHA, falling back to EVAL when a node does not have the script
 * yet, each call bounded by `commandTimeout`. One shared sweeper enforces the bound, so a round
 * trip costs no timer of its own and no promise but the command's.
 *
 * A call that timed out may still run on its node (a stalled server runs what waited on the
 * socket when it resumes): a caller that undoes it sends the undo on the same connection, where
 * it runs after the call.
 * @internal
 */
export class ScriptRunner {
  private readonly inFlight = new Chain<InFlight>();
  private sweeper?: NodeJS.Timeout;
  /** The sweeper's clock: intervals since it started. */
  private ticks = 0;
  /** Sockets written to in this tick, and their corked writes (see `cork`). */
  private readonly written = new Map<Writable, TickWrites>();

  constructor(private readonly commandTimeout: number) {}

  send<A extends ScriptArgs, R>(
    node: RedisNode,
    script: Script<A, R>,
    keys: readonly string[],
    args: A,
    cb: ScriptCallback<R>,
  ): void {
    // Alone in flight (one caller at a time): nothing to batch it with.
    if (this.inFlight.first) this.cork(node);
    const call = this.track(script.decode, cb);
    node.evalsha(script.sha, keys.length, ...keys, ...args).then(
      (v) => call.reply(v),
      (e: unknown) => {
        if (e instanceof Error && e.message.startsWith('NOSCRIPT')) {
          node.eval(script.lua, keys.length, ...keys, ...args).then(
            (v) => call.reply(v),
            (e2: unknown) => call.fail(asError(e2)),
          );
        } else call.fail(asError(e));
      },
    );
  }

  /**
   * `WAIT replicas timeout` on the node's connection: how many replicas acknowledged every write
   * sent on it so far (sent right after a script, it covers that script's writes).
   */
  waitForReplicas(node: RedisNode, replicas: number, timeout: number, cb: ScriptCallback<number>) {
    const call = this.track<number>(Number, cb);
    (node as Redis).wait(replicas, timeout).then(
      (n) => call.reply(n),
      (e: unknown) => call.fail(asError(e)),
    );
  }

  /**
   * A script that takes or keeps a lock, followed on the same connection by `WAIT` when
   * replicas must acknowledge it: a write that too few replicas acknowledged in time is an
   * error (undone by the caller like any failed acquire), never a silent success.
   */
  sendAcked<A extends ScriptArgs, R>(
    node: RedisNode,
    script: Script<A, R>,
    keys: readonly string[],
    args: A,
    acks: ReplicaAcks | undefined,
    cb: ScriptCallback<R>,
  ): void {
    if (!acks) return this.send(node, script, keys, args, cb);
    let pending = 2;
    let error: Error | undefined;
    let reply: R | undefined;
    let acked = 0;
    const done = () => {
      if (--pending > 0) return;
      if (error) return cb(error);
      if (acked < acks.replicas) {
        return cb(new Error(REPLICAS_DID_NOT_ACK(acked, acks.replicas, acks.timeout)));
      }
      cb(undefined, reply);
    };
    this.send(node, script, keys, args, (e, r) => {
      error ??= e;
      reply = r;
      done();
    });
    this.waitForReplicas(node, acks.replicas, acks.timeout, (e, n) => {
      error ??= e;
      acked = n ?? 0;
      done();
    });
  }

  /** `sendAcked` as a promise. */
  runAcked<A extends ScriptArgs, R>(
    node: RedisNode,
    script: Script<A, R>,
    keys: readonly string[],
    args: A,
    acks: ReplicaAcks | undefined,
  ): Promise<R> {
    if (!acks) return this.run(node, script, keys, args);
    return new Promise((resolve, reject) =>
      this.sendAcked(node, script, keys, args, acks, (e, r) => (e ? reject(e) : resolve(r as R))),
    );
  }

  /** `send` as a promise. */
  run<A extends ScriptArgs, R>(
    node: RedisNode,
    script: Script<A, R>,
    keys: readonly string[],
    args: A,
  ): Promise<R> {
    return new Promise((resolve, reject) => {
      this.send(node, script, keys, args, (error, reply) =>
        error ? reject(error) : resolve(reply as R),
      );
    });
  }

  /** A call in flight: `cb` gets its decoded answer or its timeout, once. */
  private track<R>(
    decode: ((reply: unknown) => R) | undefined,
    cb: ScriptCallback<R>,
  ): InFlight<R> {
    const call = new InFlight<R>(this.inFlight, this.ticks, decode, cb);
    this.inFlight.push(call as InFlight);
    this.sweeper ??= this.startSweeper();
    return call;
  }

  /**
   * Batches the writes of one tick to a node while other calls are in flight: the first command
   * of a tick goes out at once; when more follow in the same tick (many callers answered by one
   * read, a script and its WAIT), the socket is corked and they leave in batches of `CORK_BATCH`,
   * then twice, four times as many..., one system call each, the last ones at the end of the
   * tick (a tick of 1,024 commands leaves in 8 writes). Commands keep their order and
   * nothing waits past the tick. The batches leave while the tick goes on (not all at its end),
   * so Redis runs the first of them while this process still makes the rest: with many callers
   * answered at once, a flush at the end of the tick only made each side wait for the other.
   * Only a standalone connection that is ready writes to its socket at once (ioredis queues the
   * others itself).
   */
  private cork(node: RedisNode): void {
    const stream = (node as Partial<Redis>).stream;
    if (!stream || (node as Redis).status !== 'ready') return;
    const tick = this.written.get(stream);
    if (tick === undefined) {
      this.written.set(stream, new TickWrites());
      if (this.written.size === 1) process.nextTick(this.endTick);
    } else if (tick.held === 0) {
      stream.cork();
      tick.held = 1;
    } else if (tick.held >= tick.batch) {
      // A full batch leaves now; this write starts the next one, twice as large.
      stream.uncork();
      stream.cork();
      tick.held = 1;
      tick.batch *= 2;
    } else tick.held++;
  }

  /** The tick is over: corked sockets write what they hold. */
  private readonly endTick = (): void => {
    for (const [stream, tick] of this.written) if (tick.held > 0) stream.uncork();
    this.written.clear();
  };

  close(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = undefined;
  }

  /**
   * Every `interval` ms: a call sent `commandTimeout` ms ago or more (up to one interval more)
   * fails. Calls are kept in sending order, so the sweep stops at the first recent one.
   */
  private startSweeper(): NodeJS.Timeout {
    const timeout = this.commandTimeout;
    const interval = Math.max(5, Math.min(100, timeout / 10));
    const ticks = Math.ceil(timeout / interval);
    const timer = setInterval(() => {
      this.ticks++;
      let call: InFlight | undefined;
      while ((call = this.inFlight.first) && this.ticks - call.sent >= ticks) {
        this.inFlight.remove(call);
        call.fail(new Error(`no answer from Redis within ${timeout} ms (commandTimeout)`));
      }
    }, interval);
    timer.unref();
    return timer;
  }
}
