import type { Redis } from 'ioredis';
import type { Writable } from 'node:stream';
import type { RedisNode } from './redis-node';

/**
 * Commands the first corked batch of a tick holds before they leave in one write; each later
 * batch of the tick holds twice as many (see `WriteBatching`). Measured in one process against
 * one write at the end of the tick (64 callers on their own keys, one connection, a shared
 * 2-vCPU VM): 1.04-1.33x the cycles/s; 1,024 callers 1.09x. A fixed 16 did as well at 64
 * callers and worse at 1,024 (a system call per 16 commands).
 */
export const CORK_BATCH = 16;

/** A socket corked in this tick: the writes it holds, and the size of the batch they fill. */
class TickWrites {
  /** Writes held corked (the tick's first write went out at once, before the cork). */
  held = 1;
  /** Writes the current batch holds before it leaves: `CORK_BATCH`, doubled at each batch. */
  batch = CORK_BATCH;

  constructor(readonly stream: Writable) {}
}

/**
 * The `writeBatching` policy (docs/ARCHITECTURE.md, "Fast paths"): the script calls of one tick
 * to a node, while other calls are in flight, leave in a few system calls instead of one each.
 * The first command of a tick goes out at once; when more follow in the same tick (many callers
 * answered by one read, a script and its WAIT), the socket is corked and they leave in batches
 * of `CORK_BATCH`, then twice, four times as many..., one system call each, the last ones at the
 * end of the tick (a tick of 1,024 commands leaves in 8 writes). Commands keep their order and
 * nothing waits past the tick. The batches leave while the tick goes on (not all at its end), so
 * Redis runs the first of them while this process still makes the rest: with many callers
 * answered at once, a flush at the end of the tick only made each side wait for the other.
 *
 * Not ioredis's `enableAutoPipelining`: that one defers every command, a lone one too, to
 * `setImmediate` and keeps one pipeline in flight per connection, the next waiting for all of
 * its replies (docs/performance.md, "Socket corking against plain writes and ioredis
 * auto-pipelining").
 * @internal
 */
export class WriteBatching {
  /**
   * Sockets written to in this tick, and the corked ones with the writes each holds. Arrays: a
   * tick writes to a few sockets at most, and a map's hashing cost more per command.
   */
  private readonly written: Writable[] = [];
  private readonly corked: TickWrites[] = [];

  /**
   * Called just before a command is written to `node` while other calls are in flight. Only a
   * standalone connection that is ready writes to its socket at once (ioredis queues the others
   * itself): the others are left alone.
   */
  beforeWrite(node: RedisNode): void {
    const stream = (node as Partial<Redis>).stream;
    if (!stream || (node as Redis).status !== 'ready') return;
    const { written, corked } = this;
    if (!written.includes(stream)) {
      if (written.push(stream) === 1) process.nextTick(this.endTick);
      return;
    }
    let tick: TickWrites | undefined;
    for (const t of corked) {
      if (t.stream === stream) {
        tick = t;
        break;
      }
    }
    if (!tick) {
      stream.cork();
      corked.push(new TickWrites(stream));
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
    for (const tick of this.corked) tick.stream.uncork();
    this.corked.length = 0;
    this.written.length = 0;
  };
}
