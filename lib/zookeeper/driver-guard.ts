import type * as Zk from 'node-zookeeper-client';
import { ZK_DRIVER_FAULT } from './zookeeper.messages';

/** A reply the driver failed to read: the connection was dropped and is made again. @internal */
export class DriverFaultError extends Error {
  constructor(connectString: string, cause: unknown) {
    super(ZK_DRIVER_FAULT(connectString, cause instanceof Error ? cause.message : String(cause)), {
      cause,
    });
    this.name = 'DriverFaultError';
  }
}

/** A request the driver sent and waits a reply for. */
interface PendingPacket {
  callback?: (error: unknown) => void;
}

/**
 * What the guard touches in node-zookeeper-client's ConnectionManager (1.x): the socket
 * handlers it binds at every connect (own properties bound there win over the prototype's), the
 * bytes of a reply not complete yet, and the requests waiting for a reply.
 */
interface ConnectionManagerInternals {
  socket?: { destroy(): void };
  pendingBuffer: Buffer | null;
  pendingQueue: PendingPacket[];
  onSocketData(buffer: Buffer): void;
  onSocketConnected(): void;
}

/**
 * Keeps a fault of the driver's reply reader inside the session. The driver reads replies in its
 * socket's `data` handler, where a throw is an uncaught exception that ends the process (it
 * throws `Unknown code: N` for an error code it does not know, and a RangeError for a short
 * reply). Here such a throw fails the call whose reply was being read (with DriverFaultError),
 * and drops the connection: the driver connects again, with the same session, and every other
 * call waiting for a reply fails with CONNECTION_LOSS (run again, or looked for, as for any
 * broken connection). Also, each new connection is read from its start: the driver keeps the
 * part of a reply that a broken connection cut, and would read the next connection's handshake
 * after it (garbage, or worse, replies matched to the wrong calls).
 *
 * Nothing is wrapped on a driver without these internals (another major version): it runs as it
 * is. @internal
 */
export function guardDriver(client: Zk.Client, connectString: string): void {
  const manager = (client as unknown as { connectionManager?: ConnectionManagerInternals })
    .connectionManager;
  if (
    !manager ||
    typeof manager.onSocketData !== 'function' ||
    typeof manager.onSocketConnected !== 'function' ||
    !Array.isArray(manager.pendingQueue)
  ) {
    return;
  }
  const read = manager.onSocketData;
  const connected = manager.onSocketConnected;
  manager.onSocketConnected = function (this: ConnectionManagerInternals) {
    this.pendingBuffer = null;
    connected.call(this);
  };
  manager.onSocketData = function (this: ConnectionManagerInternals, buffer: Buffer) {
    const head = this.pendingQueue[0];
    try {
      read.call(this, buffer);
    } catch (error) {
      this.pendingBuffer = null;
      // Taken off the queue for the reply that failed to read: nobody else will answer it.
      if (head && this.pendingQueue[0] !== head) {
        try {
          head.callback?.(new DriverFaultError(connectString, error));
        } catch {
          // Its own callback failing changes nothing: the connection goes anyway.
        }
      }
      this.socket?.destroy();
    }
  };
}
