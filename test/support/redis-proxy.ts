import * as net from 'node:net';
import { connectUpstream } from './proxy-connection';

/** A command as the client sent it: its name and arguments, as text. */
export type CommandArgs = readonly string[];
/** Which commands a rule of the proxy applies to. */
export type CommandMatch = (args: CommandArgs) => boolean;

/**
 * One command the proxy answers `TRYAGAIN` (as a Cluster node does while a slot migrates), at
 * every sending of the same bytes, until `end`: the Cluster client re-sends it on its own timer
 * (`retryDelayOnTryAgain`), up to `maxRedirections` times.
 */
export interface Refusal {
  /** Resolves with the refused command, when it first comes. */
  readonly seen: Promise<CommandArgs>;
  /** Resolves once the command was refused `times` times. */
  refused(times: number): Promise<void>;
  /** Its next sending reaches the server; resolves once that sending's reply went back. */
  end(): Promise<void>;
}

/** Grant messages held back on the way to the client (see `holdMessages`). */
export interface HeldMessages {
  /** Resolves once `count` messages are held. */
  held(count: number): Promise<void>;
  /** Sends the `index`-th held message (in the order they came) to the client now. */
  deliver(index: number): void;
  /** Sends every held message not delivered yet, in order, and holds no more. */
  deliverAll(): void;
}

export interface RedisProxy {
  readonly port: number;
  /**
   * The first command matching `match` from now on (one not refused already) is answered
   * `TRYAGAIN` until its refusal ends.
   */
  refuse(match: CommandMatch): Refusal;
  /** Resolves once `count` commands matching `match`, from now on, had their replies sent. */
  answered(match: CommandMatch, count: number): Promise<void>;
  /**
   * From now on, the pub/sub messages whose payload matches `match` are held back until the
   * test delivers them (the others go through): a subscriber that reads a message late.
   */
  holdMessages(match: (payload: string) => boolean): HeldMessages;
  close(): Promise<void>;
}

/** The end of the RESP value that starts at `at` in `buf`, or -1 while it is incomplete. */
function valueEnd(buf: Buffer, at: number): number {
  const lineEnd = buf.indexOf('\r\n', at);
  if (lineEnd === -1) return -1;
  const n = Number(buf.toString('latin1', at + 1, lineEnd));
  let end = lineEnd + 2;
  switch (String.fromCharCode(buf[at])) {
    case '$':
      if (n < 0) return end;
      return buf.length >= end + n + 2 ? end + n + 2 : -1;
    case '*':
      for (let i = 0; i < n && end !== -1; i++) end = valueEnd(buf, end);
      return end;
    default:
      return end;
  }
}

/** The strings of a RESP array of bulk strings (a command, a pub/sub message). */
function arrayOf(frame: Buffer): string[] {
  const out: string[] = [];
  if (frame[0] !== 0x2a) return out;
  let at = frame.indexOf('\r\n') + 2;
  while (at < frame.length) {
    const lineEnd = frame.indexOf('\r\n', at);
    const n = Number(frame.toString('latin1', at + 1, lineEnd));
    out.push(frame.toString('utf8', lineEnd + 2, lineEnd + 2 + n));
    at = lineEnd + 2 + n + 2;
  }
  return out;
}

/** Complete RESP values from a stream's chunks, in order. */
class Frames {
  private buf: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): Buffer[] {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    const out: Buffer[] = [];
    let end: number;
    while (this.buf.length > 0 && (end = valueEnd(this.buf, 0)) !== -1) {
      out.push(this.buf.subarray(0, end));
      this.buf = this.buf.subarray(end);
    }
    return out;
  }
}

const TRY_AGAIN = (() => {
  const args = ['EVAL', "return redis.error_reply('TRYAGAIN refused by the test proxy')", '0'];
  return `*3\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
})();

interface RefusalState {
  readonly match: CommandMatch;
  bytes?: string;
  times: number;
  ended: boolean;
  seen: (args: CommandArgs) => void;
  counted: { times: number; done: () => void }[];
  ran?: () => void;
}

/**
 * A loopback TCP proxy in front of one Redis server (a Cluster node: point the Cluster client's
 * `natMap` at it), for the tests of what a Cluster client does on its own: it forwards both
 * ways, reads the commands and replies as RESP, and on demand answers a command `TRYAGAIN`
 * instead of passing it on (so the client re-sends it later, as it does while a shard fails
 * over) or holds back pub/sub messages. A real network part between a real client and a real
 * server: nothing of either is replaced.
 */
export async function startRedisProxy(serverPort: number): Promise<RedisProxy> {
  const sockets = new Set<net.Socket>();
  const refusals: RefusalState[] = [];
  const watches: { match: CommandMatch; left: number; done: () => void }[] = [];
  let holding: { match: (payload: string) => boolean; held: HeldMessage[] } | undefined;
  const holds: { count: number; done: () => void }[] = [];

  interface HeldMessage {
    readonly client: net.Socket;
    readonly frame: Buffer;
    sent: boolean;
  }
  const checkHolds = () => {
    for (const h of [...holds]) {
      if ((holding?.held.length ?? 0) >= h.count) {
        holds.splice(holds.indexOf(h), 1);
        h.done();
      }
    }
  };

  const server = net.createServer((client) => {
    const upstream = connectUpstream(client, serverPort, '127.0.0.1', sockets);
    /** Per command forwarded, in order: what to do when its reply comes (a subscriber's none). */
    const pending: ((() => void) | undefined)[] = [];
    let subscriber = false;
    const fromClient = new Frames();
    const fromServer = new Frames();

    client.on('data', (chunk: Buffer) => {
      for (const frame of fromClient.push(chunk)) {
        const args = arrayOf(frame);
        const name = (args[0] ?? '').toLowerCase();
        if (name.endsWith('subscribe')) subscriber = true;
        const text = frame.toString('latin1');
        let refusal = refusals.find((r) => r.bytes === text);
        if (!refusal) {
          refusal = refusals.find((r) => r.bytes === undefined && r.match(args));
          if (refusal) refusal.bytes = text;
        }
        const after: (() => void)[] = [];
        if (refusal && !refusal.ended) {
          refusal.times++;
          if (refusal.times === 1) refusal.seen(args);
          for (const c of refusal.counted.filter((c) => c.times <= refusal.times)) {
            refusal.counted.splice(refusal.counted.indexOf(c), 1);
            c.done();
          }
          upstream.write(TRY_AGAIN);
        } else {
          if (refusal?.ran) after.push(refusal.ran);
          for (const w of watches.filter((w) => w.match(args))) {
            if (--w.left === 0) after.push(w.done);
          }
          upstream.write(frame);
        }
        if (!subscriber) pending.push(after.length ? () => after.forEach((f) => f()) : undefined);
      }
    });

    upstream.on('data', (chunk: Buffer) => {
      for (const frame of fromServer.push(chunk)) {
        if (subscriber) {
          const [kind, , payload] = arrayOf(frame);
          if (holding && kind === 'message' && holding.match(payload ?? '')) {
            holding.held.push({ client, frame, sent: false });
            checkHolds();
            continue;
          }
          client.write(frame);
          continue;
        }
        client.write(frame);
        pending.shift()?.();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;

  return {
    port,
    refuse(match) {
      let seen!: (args: CommandArgs) => void;
      const seenPromise = new Promise<CommandArgs>((resolve) => (seen = resolve));
      const state: RefusalState = { match, times: 0, ended: false, seen, counted: [] };
      refusals.push(state);
      return {
        seen: seenPromise,
        refused: (times) =>
          state.times >= times
            ? Promise.resolve()
            : new Promise<void>((done) => state.counted.push({ times, done })),
        end: () =>
          new Promise<void>((resolve) => {
            state.ran = resolve;
            state.ended = true;
          }),
      };
    },
    answered(match, count) {
      return new Promise<void>((done) => watches.push({ match, left: count, done }));
    },
    holdMessages(match) {
      const state = { match, held: [] as HeldMessage[] };
      holding = state;
      const send = (m: HeldMessage) => {
        if (m.sent) return;
        m.sent = true;
        m.client.write(m.frame);
      };
      return {
        held: (count) =>
          new Promise<void>((done) => {
            holds.push({ count, done });
            checkHolds();
          }),
        deliver: (index) => send(state.held[index]),
        deliverAll: () => {
          if (holding === state) holding = undefined;
          state.held.forEach(send);
        },
      };
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
