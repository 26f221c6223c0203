import * as net from 'node:net';
import { connectUpstream } from './proxy-connection';

/** A ZooKeeper session as its connect response gave it: what resumes (or ends) it elsewhere. */
export interface ProxiedSession {
  readonly id: Buffer;
  readonly password: Buffer;
}

export interface ZooKeeperProxy {
  /** `127.0.0.1:<port>`: a connect string for the client under test. */
  readonly address: string;
  /** The session of the last connect response that went through (undefined before one). */
  readonly session: ProxiedSession | undefined;
  /** Connections made through the proxy so far (a reconnect makes one more). */
  readonly connections: number;
  /**
   * The next reply to a request (not a ping, not a watch event) reaches the client with `code`
   * as its error code: a code ZooKeeper never sends, as a desynchronised stream would give.
   * Resolves once such a reply was sent.
   */
  corruptNextReply(code: number): Promise<void>;
  /**
   * The next reply to a request reaches the client only in part (its first half), then the
   * connection drops: a member killed, or a connection cut, in the middle of a reply.
   */
  breakNextReply(): Promise<void>;
  /**
   * From now on, the watch events the server sends on the connections open now are dropped
   * (replies and pings still go through): as when a member closes an expired session's
   * connection before that session's own watch events went out. A connection made later is
   * forwarded whole.
   */
  dropWatchEvents(): void;
  /**
   * The reply to the next request of type `op` (a ZooKeeper OpCode: 14 for a multi), and
   * everything the server sends after it on that connection, is held back until the function
   * this resolves with is called (it resolves once such a reply is held): a reply that reaches
   * the client only after what happened meanwhile.
   */
  holdReplyTo(op: number): Promise<() => void>;
  /** Drops every connection and refuses new ones (closes them at once) until `restore`. */
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

/** Reply xids below 0 are the server's own: -1 a watch event, -2 a ping, -4 an auth answer. */
const FIRST_REQUEST_XID = 0;
const WATCH_EVENT_XID = -1;

/**
 * A loopback TCP proxy in front of one ZooKeeper member, for the driver-fault tests: it forwards
 * both ways unchanged, reads the server's frames (a 4-byte length, then the frame) to learn each
 * connection's session, and on demand alters one reply, so a test can feed the client a reply
 * the real server would never send, or drops its watch events.
 */
export async function startZooKeeperProxy(target: string): Promise<ZooKeeperProxy> {
  const [host, port] = target.split(':');
  let session: ProxiedSession | undefined;
  let connections = 0;
  let corrupt: { code: number; sent: () => void } | undefined;
  let broken: (() => void) | undefined;
  let holding: { op: number; held: (release: () => void) => void } | undefined;
  const sockets = new Set<net.Socket>();
  const eventless = new WeakSet<net.Socket>();
  let refusing = false;

  const server = net.createServer((client) => {
    if (refusing) return client.destroy();
    connections++;
    const upstream = connectUpstream(client, Number(port), host, sockets);
    // The xid of the request whose reply is to be held, once one of type `holding.op` went out.
    let holdXid: number | undefined;
    let requests = Buffer.alloc(0);
    let connectRequest = true;
    client.on('data', (chunk) => {
      upstream.write(chunk);
      requests = Buffer.concat([requests, chunk]);
      while (requests.length >= 4 && requests.length >= 4 + requests.readInt32BE(0)) {
        const frame = requests.subarray(0, 4 + requests.readInt32BE(0));
        requests = requests.subarray(frame.length);
        // RequestHeader: xid (4), type (4); the connect request has neither.
        if (!connectRequest && holding && holdXid === undefined) {
          if (frame.readInt32BE(8) === holding.op) holdXid = frame.readInt32BE(4);
        }
        connectRequest = false;
      }
    });
    let pending = Buffer.alloc(0);
    let first = true;
    let held: Buffer[] | undefined;
    upstream.on('data', (chunk) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 4 && pending.length >= 4 + pending.readInt32BE(0)) {
        const frame = Buffer.from(pending.subarray(0, 4 + pending.readInt32BE(0)));
        pending = pending.subarray(frame.length);
        if (!first && eventless.has(upstream) && frame.readInt32BE(4) === WATCH_EVENT_XID) continue;
        if (held) {
          held.push(frame);
          continue;
        }
        if (!first && holding && holdXid !== undefined && frame.readInt32BE(4) === holdXid) {
          const queue = [frame];
          const tell = holding.held;
          held = queue;
          holding = undefined;
          holdXid = undefined;
          tell(() => {
            held = undefined;
            for (const f of queue) client.write(f);
          });
          continue;
        }
        if (first) {
          first = false;
          // ConnectResponse: protocol version, timeout, session id (8), password (length + bytes).
          const id = frame.subarray(12, 20);
          const length = frame.readInt32BE(20);
          session = { id: Buffer.from(id), password: Buffer.from(frame.subarray(24, 24 + length)) };
        } else if (corrupt && frame.readInt32BE(4) >= FIRST_REQUEST_XID) {
          // ReplyHeader: xid (4), zxid (8), err (4).
          frame.writeInt32BE(corrupt.code, 16);
          const sent = corrupt.sent;
          corrupt = undefined;
          client.write(frame, () => sent());
          continue;
        } else if (broken && frame.readInt32BE(4) >= FIRST_REQUEST_XID) {
          const sent = broken;
          broken = undefined;
          client.write(frame.subarray(0, frame.length >> 1), () => {
            client.destroy();
            upstream.destroy();
            sent();
          });
          return;
        }
        client.write(frame);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = `127.0.0.1:${(server.address() as net.AddressInfo).port}`;

  return {
    address,
    get session() {
      return session;
    },
    get connections() {
      return connections;
    },
    corruptNextReply(code: number) {
      return new Promise<void>((resolve) => (corrupt = { code, sent: resolve }));
    },
    breakNextReply() {
      return new Promise<void>((resolve) => (broken = resolve));
    },
    dropWatchEvents() {
      for (const socket of sockets) eventless.add(socket);
    },
    holdReplyTo(op: number) {
      return new Promise<() => void>((resolve) => (holding = { op, held: resolve }));
    },
    cut() {
      refusing = true;
      for (const socket of sockets) socket.destroy();
    },
    restore() {
      refusing = false;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
