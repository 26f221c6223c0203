import { Chain } from '../../chain';
import type { ReplicaAcks } from '../../core/lock-backend';
import type { Redis } from 'ioredis';
import type { RedisNode } from './redis-node';
import { NO_ANSWER_IN_TIME, REPLICAS_DID_NOT_ACK, REPLICAS_NOT_ANSWERING } from './redis.messages';
import { ReplicaAckGate } from './replica-ack-gate';
import type { Script, ScriptArgs } from './scripts';
import type { WriteBatching } from './write-batching';

export type { ReplicaAcks } from '../../core/lock-backend';

/** EVALSHA and EVAL with their arguments in one array (ioredis flattens array arguments). */
interface ArgvCommands {
  evalsha(argv: readonly (string | number)[]): Promise<unknown>;
  eval(argv: readonly (string | number)[]): Promise<unknown>;
}

/** The answer to a script call: the decoded reply, or why there is none. */
export type ScriptCallback<R> = (error: Error | undefined, reply?: R) => void;

/**
 * One round trip in flight: answered once, by its reply, its error or the sweeper's timeout. A
 * class with methods (not a set of closures per call): the hot path allocates this object and
 * the two reply handlers only. The answer goes to `cb`.
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
    if (!this.settle()) return;
    this.cb(undefined, this.decode ? this.decode(value) : (value as R));
  }

  fail(error: Error): void {
    if (!this.settle()) return;
    this.cb(error);
  }

  /** Whether this is the first answer (the call leaves the chain then). */
  private settle(): boolean {
    if (this.settled) return false;
    this.settled = true;
    this.calls.remove(this as InFlight);
    return true;
  }
}

/**
 * `e` as an Error of this realm. An error Node's internals made (a socket's ECONNREFUSED) fails
 * `instanceof Error` where this code runs in a vm context (Jest): it is wrapped, its message kept.
 */
export const asError = (e: unknown): Error => {
  if (e instanceof Error) return e;
  if (isErrorLike(e)) return new Error(e.message, { cause: e });
  return new Error(String(e));
};

const isErrorLike = (e: unknown): e is { message: string } =>
  typeof e === 'object' && e !== null && typeof (e as { message?: unknown }).message === 'string';

const ignore = (): void => undefined;

/**
 * One argument list for EVALSHA or EVAL (`script`: the SHA or the text), passed as an array
 * (ioredis flattens it): no spread call per command.
 */
function argvOf(script: string, keys: readonly string[], args: ScriptArgs): (string | number)[] {
  const argv: (string | number)[] = [script, keys.length];
  for (let i = 0; i < keys.length; i++) argv.push(keys[i]);
  for (let i = 0; i < args.length; i++) argv.push(args[i]);
  return argv;
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
  /** Per node: whether its replicas acknowledge (see ReplicaAckGate). */
  private readonly gates = new WeakMap<RedisNode, ReplicaAckGate>();

  constructor(
    private readonly commandTimeout: number,
    /**
     * The real reason a node that is not connected fails (a wrong password...): a command sent
     * to it fails with the driver's "Stream isn't writeable", which names no cause.
     */
    private readonly connectionError: (node: RedisNode) => Error | undefined = () => undefined,
    /** The `writeBatching` policy, when on: without it every command is written on its own. */
    private readonly batching?: WriteBatching,
  ) {}

  /** A command's error on `node`, or the connection's own when that says why. */
  private failure(node: RedisNode, e: unknown): Error {
    return asError(this.connectionError(node) ?? e);
  }

  private gateOf(node: RedisNode): ReplicaAckGate {
    let gate = this.gates.get(node);
    if (!gate) this.gates.set(node, (gate = new ReplicaAckGate()));
    return gate;
  }

  /**
   * Sends `script`; `cb` gets its answer. `resent` is called when the node did not have the
   * script and it was sent again as EVAL (after whatever followed the EVALSHA on the connection).
   */
  send<A extends ScriptArgs, R>(
    node: RedisNode,
    script: Script<A, R>,
    keys: readonly string[],
    args: A,
    cb: ScriptCallback<R>,
    resent?: () => void,
  ): void {
    this.call(node, script, keys, args, this.track(script.decode, cb), resent);
  }

  private call<R>(
    node: RedisNode,
    script: Script<ScriptArgs, R>,
    keys: readonly string[],
    args: ScriptArgs,
    call: InFlight<R>,
    resent?: () => void,
  ): void {
    // Alone in flight (one caller at a time): nothing to batch it with.
    if (call.prev) this.batching?.beforeWrite(node);
    const argv = argvOf(script.sha, keys, args);
    (node as unknown as ArgvCommands).evalsha(argv).then(
      (v) => call.reply(v),
      (e: unknown) => {
        if (e instanceof Error && e.message.startsWith('NOSCRIPT')) {
          argv[0] = script.lua;
          this.evalThen(node, argv, call);
          resent?.();
        } else call.fail(this.failure(node, e));
      },
    );
  }

  /** EVAL with `argv` (the script's text first), answered to `call`. */
  private evalThen<R>(node: RedisNode, argv: (string | number)[], call: InFlight<R>): void {
    (node as unknown as ArgvCommands).eval(argv).then(
      (v) => call.reply(v),
      (e: unknown) => call.fail(this.failure(node, e)),
    );
  }

  /**
   * `script` as EVAL, never EVALSHA: for an undo, which must run where it was sent on the
   * connection. An EVALSHA that a node answers NOSCRIPT (restarted, SCRIPT FLUSH) goes again as
   * EVAL after whatever followed it there, and an undo of a token's round that landed after the
   * token's next round would take away the key that round counts as held. Undos are rare: the
   * script's text they carry costs little. Not bounded by `commandTimeout`: resolves (never
   * rejects) once the driver is done with the command, answered or failed for good. A Cluster
   * client re-sends a command answered CLUSTERDOWN, TRYAGAIN or MOVED, or lost with its
   * connection, on its own timers (up to `maxRedirections` times), long after `commandTimeout`:
   * until this resolves the undo may still run.
   */
  runInPlace<A extends ScriptArgs, R>(
    node: RedisNode,
    script: Script<A, R>,
    keys: readonly string[],
    args: A,
  ): Promise<void> {
    const argv = argvOf(script.lua, keys, args);
    return (node as unknown as ArgvCommands).eval(argv).then(ignore, ignore);
  }

  /**
   * `WAIT replicas timeout` on the node's connection: how many replicas acknowledged every write
   * sent on it so far (sent right after a script, it covers that script's writes).
   */
  waitForReplicas(node: RedisNode, replicas: number, timeout: number, cb: ScriptCallback<number>) {
    const call = this.track<number>(Number, cb);
    (node as Redis).wait(replicas, timeout).then(
      (n) => call.reply(n),
      (e: unknown) => call.fail(this.failure(node, e)),
    );
  }

  /**
   * A script that takes or keeps a lock, followed on the same connection by `WAIT` when
   * replicas must acknowledge it: a write that too few replicas acknowledged in time is an
   * error (undone by the caller like any failed acquire), never a silent success. While the
   * node's replicas miss their acknowledgements, one such write goes at a time and the others
   * fail at once (see ReplicaAckGate).
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
    const gate = this.gateOf(node);
    const admitted = gate.admit();
    if (!admitted) {
      // Nothing sent: answered as a round trip would be, not from within this call.
      process.nextTick(cb, new Error(REPLICAS_NOT_ANSWERING(acks.replicas, acks.timeout)));
      return;
    }
    let pending = 2;
    let error: Error | undefined;
    let reply: R | undefined;
    let acked = 0;
    // Which WAIT counts: the one after the script's last sending.
    let waits = 0;
    const done = () => {
      if (--pending > 0) return;
      gate.settled(admitted, !error && acked >= acks.replicas);
      if (error) return cb(error);
      if (acked < acks.replicas) {
        return cb(new Error(REPLICAS_DID_NOT_ACK(acked, acks.replicas, acks.timeout)));
      }
      cb(undefined, reply);
    };
    const wait = () => {
      const nth = ++waits;
      this.waitForReplicas(node, acks.replicas, acks.timeout, (e, n) => {
        if (nth === waits) {
          error ??= e;
          acked = n ?? 0;
        }
        done();
      });
    };
    // A node without the script answers NOSCRIPT and runs it as EVAL after the first WAIT, which
    // then covered nothing: a second WAIT follows the EVAL.
    this.send(
      node,
      script,
      keys,
      args,
      (e, r) => {
        error ??= e;
        reply = r;
        done();
      },
      () => {
        pending++;
        wait();
      },
    );
    wait();
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
      const call = this.track<R>(script.decode, (error, reply) =>
        error ? reject(error) : resolve(reply as R),
      );
      this.call(node, script, keys, args, call);
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
        call.fail(new Error(NO_ANSWER_IN_TIME(timeout)));
      }
    }, interval);
    timer.unref();
    return timer;
  }
}
