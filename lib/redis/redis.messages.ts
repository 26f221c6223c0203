/** The messages of the Redis protocol (`redis/`). */

export const REPLICAS_DID_NOT_ACK = (acked: number, wanted: number, timeout: number) =>
  `only ${acked} of ${wanted} replicas acknowledged the lock within ${timeout} ms ` +
  `(replicaAcks / replicaAckTimeout)`;

export const REPLICAS_NOT_ANSWERING = (wanted: number, timeout: number) =>
  `the replicas did not acknowledge the last lock within ${timeout} ms (replicaAcks: ${wanted}); ` +
  `until they do, one lock at a time is tried and the others fail at once`;

export const NO_ANSWER_IN_TIME = (timeout: number) =>
  `no answer from Redis within ${timeout} ms (commandTimeout)`;

export const UNDO_STILL_SENT = (waitedMs: number) =>
  `the Redis Cluster client was still re-sending the undo of this caller's failed attempt ` +
  `after ${waitedMs} ms (a failover in progress); its next attempt waits for that undo`;

/** A refused password, in words (the `auth` hint of a `LockBackendError` follows). */
export const REDIS_WRONG_PASSWORD = (node: string, detail: string) =>
  `Redis at ${node} refused the user or password (${detail.replace(/\.$/, '')}).`;

/** No password given to a server that wants one, in words (the `auth` hint follows). */
export const REDIS_PASSWORD_MISSING = (node: string, detail: string) =>
  `Redis at ${node} requires a password and none was given (${detail.replace(/\.$/, '')}); a ` +
  `node's URL carries it as redis://:password@host:port.`;

export const NODE_RESTARTED = (node: string, agoMs: number, inMs: number) =>
  `${node} restarted ${Math.round(agoMs)} ms ago and votes again in ${Math.ceil(inMs)} ms`;

export const NODE_BACK_UNCONFIRMED = (node: string) =>
  `${node} is back but its server (run_id, uptime) is not read yet`;

export const RESTARTED_NODES_BARRED = (nodes: readonly string[], longestMs: number) =>
  `no majority of nodes may vote for a new lock: ${nodes.join('; ')}. A node restarted without ` +
  `persistence forgot the locks it granted, so it counts toward no new lock until the longest ` +
  `lease in use (${longestMs} ms) has passed since its start (Redlock's restart rule); ` +
  `waiting callers wait for it`;
