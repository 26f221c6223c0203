import type { LockBackendDefinition, RedlockModuleOptions } from 'nest-locked';

/**
 * One lock backend in `npm run bench -- --only backends`: the orchestrator
 * (`bench/backends/run-backends.ts`) starts it, measures the system's own raw floor and
 * `@Locked` over it side by side (uncontended cycles; hot key 1 x 50 with 1 ms sections: FIFO
 * streak and p99 wait), prints every backend in one table beside Redis, and stops it.
 * Each backend's file in this folder (`postgres.ts`, `mysql.ts`, `etcd.ts`, `zookeeper.ts`)
 * exports one `BenchTarget` as `target`.
 */
export interface BenchTarget {
  /** Column name: `postgres`, `mysql`, `etcd`, `zookeeper`. */
  readonly name: string;
  /** What the raw floor is, for the table's note (`pg_try_advisory_lock + pg_advisory_unlock`). */
  readonly floor: string;
  /** Starts the server(s) with the test harness (`test/support/...`), on 127.0.0.1. */
  start(): Promise<BenchServer>;
}

/** A started backend. */
export interface BenchServer {
  /** A fresh definition for one Nest app (what `postgresBackend(...)` returns). */
  definition(): LockBackendDefinition;
  /** The module options of the group instead, where it is no backend definition (Redis). */
  moduleOptions?(): RedlockModuleOptions;
  /**
   * The raw floor: opens what one uncontended cycle needs (a pooled connection, a client, a
   * session) and returns the cycle itself, which takes and frees `key` with the system's own
   * primitives (`pg_try_advisory_lock` + `pg_advisory_unlock` on one pooled connection; etcd a
   * lease-bound put + delete; ZooKeeper create ephemeral + delete), and a close.
   */
  rawCycle(): Promise<{ cycle(key: string): Promise<void>; close(): Promise<void> }>;
  /** Stops what `start` started (by PID). */
  stop(): Promise<void>;
}
