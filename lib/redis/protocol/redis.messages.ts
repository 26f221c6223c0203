/** The messages of the Redis protocol (`redis/`). */
import { sentence } from '../../redlock.messages';

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

export const REDIS_UNREACHABLE_AT_START = (group: string, reason: string) =>
  `Lock group "${group}": not connected to Redis yet: ${sentence(reason)} Calls fail with ` +
  `LockBackendError until it answers.`;

export const REDIS_CONNECTION_LOST = (group: string, reason: string) =>
  `Lock group "${group}": lost the connection to Redis (${reason}); reconnecting. Calls fail ` +
  `with LockBackendError, callers already waiting keep waiting, until it is back.`;

export const REDIS_CONNECTION_BACK = (group: string) =>
  `Lock group "${group}": connected to Redis again.`;

export const EVICTION_POLICY_UNSAFE = (group: string, policy: string) =>
  `Lock group "${group}": Redis has a maxmemory limit with maxmemory-policy ${policy}, which can ` +
  `evict a held lock under memory pressure (another caller could then take it; the holder ` +
  `learns at its next renewal, and fences still increase). Use maxmemory-policy noeviction on ` +
  `lock servers.`;

export const REDIS_PEER_MISSING = (field: string) =>
  `${field} names a Redis node, which needs the "ioredis" package: install it (npm install ` +
  `ioredis), or give the group another backend.`;
