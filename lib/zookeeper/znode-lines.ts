import type * as Zk from 'node-zookeeper-client';
import { LockBackendError, LockConfigError } from '../errors';
import type { Share } from '../core/lock-backend';
import { ZK_NODE_GONE } from './zookeeper.messages';
import { admission, type LockNode, lockLine, nodePrefix } from './lock-nodes';
import type { NodeCleanup } from './node-cleanup';
import { backendError, callFor, shareMismatch } from './zookeeper-errors';
import {
  NotConnectedError,
  type ZooKeeperDriver,
  type ZooKeeperSession,
  zkCode,
  ZK,
} from './zookeeper-session';

/** One node of this process in a key's line: the key, the node's full path, its fence. @internal */
export interface HeldNode {
  readonly key: string;
  readonly path: string;
  readonly fence: number;
}

/** Where a node stands in its line. @internal */
export interface Place {
  readonly admitted: boolean;
  /** Not admitted: the nodes ahead whose leaving can let it in. */
  readonly watch: readonly LockNode[];
}

/** What the lines need from the backend. @internal */
export interface LinesScope {
  readonly zk: ZooKeeperDriver;
  readonly session: ZooKeeperSession;
  readonly cleanup: NodeCleanup;
  parentOf(key: string): string;
  /** Deletes nodes in the background (a node that must not stay in line). */
  leave(nodes: readonly HeldNode[]): void;
}

/** Ops on a parent that races a cleanup (NO_NODE) are retried this many times. */
const PARENT_RACES = 5;
const EMPTY = Buffer.alloc(0);

/**
 * The keys' lines as znodes on ZooKeeper: a caller's node created in a key's line (one round trip when the
 * key is free), found again after a create whose answer was lost, and its place in line.
 * @internal
 */
export class ZnodeLines {
  constructor(private readonly scope: LinesScope) {}

  /**
   * Creates this caller's node in the key's line: the node and a touch of the parent in one
   * multi, whose answer gives the fence (the parent's mzxid is the multi's zxid, the node's
   * czxid) and the parent's children. Admitted at once when it is the only child (the common
   * uncontended case: one round trip), else after a look at the line.
   */
  async enter(
    key: string,
    token: string,
    share: Share | undefined,
    keys: readonly string[],
  ): Promise<{ node: HeldNode; admitted: boolean }> {
    const { session, cleanup, zk } = this.scope;
    cleanup.keyUsed(key);
    const parent = this.scope.parentOf(key);
    const name = nodePrefix(share, token);
    for (let race = 0; ; race++) {
      try {
        const results = await session.run(
          (c, done: (e: unknown, r?: { path?: string; stat?: Zk.Stat }[]) => void) =>
            c
              .transaction()
              .create(`${parent}/${name}`, EMPTY, zk.CreateMode.EPHEMERAL_SEQUENTIAL)
              .setData(parent, EMPTY, -1)
              .commit((e, r) => done(e, r as { path?: string; stat?: Zk.Stat }[])),
          false,
        );
        const stat = results[1].stat!;
        const node: HeldNode = { key, path: results[0].path!, fence: zxid(stat.mzxid) };
        if (stat.numChildren === 1) return { node, admitted: true };
        return await this.placed(node, share, keys);
      } catch (error) {
        if (error instanceof LockConfigError || error instanceof LockBackendError) throw error;
        const code = zkCode(error);
        if (code === ZK.NO_NODE && race < PARENT_RACES) {
          await callFor(session, keys, 'acquire', (c, done) => c.mkdirp(parent, (e) => done(e)));
          continue;
        }
        if (code === ZK.CONNECTION_LOSS && race < PARENT_RACES) {
          // The connection broke under the create (a member gone): it may or may not have
          // happened. The token in the name finds it (Curator's protected mode); else again.
          const found = await this.findOwn(key, name, keys).catch((e: unknown) => {
            cleanup.findLater(parent, name);
            throw e;
          });
          if (!found) continue;
          return await this.placed(found, share, keys);
        }
        // Sent but no answer: a node made meanwhile is found and deleted once connected.
        const sent = !(error instanceof NotConnectedError);
        if (sent && (code === undefined || code === ZK.CONNECTION_LOSS)) {
          cleanup.findLater(parent, name);
        }
        throw backendError(keys, 'acquire', error);
      }
    }
  }

  /**
   * Where `node` stands in its line now. A shared hold of another kind ahead is a
   * LockConfigError (its node is deleted first).
   */
  async look(node: HeldNode, share: Share | undefined, keys: readonly string[]): Promise<Place> {
    let line = lockLine(await this.children(node.key, keys, 'acquire'));
    const own = node.path.slice(node.path.lastIndexOf('/') + 1);
    if (!line.some((n) => n.name === own)) {
      throw backendError(keys, 'acquire', new Error(ZK_NODE_GONE(node.key)));
    }
    // Another node of this very call: a create whose answer was lost and that a member behind
    // did not show yet when it was looked for. It would block us: it goes.
    const alike = line.filter((n) => n.name !== own && sameCall(n.name, own));
    if (alike.length > 0) {
      const parent = this.scope.parentOf(node.key);
      const twins = await this.owned(
        parent,
        alike.map((n) => n.name),
        keys,
      );
      this.scope.leave(twins.map((t) => ({ key: node.key, path: t.path, fence: 0 })));
      const gone = new Set(twins.map((t) => t.name));
      line = line.filter((n) => !gone.has(n.name));
    }
    const verdict = admission(line, own, share);
    if ('mismatch' in verdict) {
      this.scope.leave([node]);
      throw shareMismatch(node.key, share!, verdict.mismatch);
    }
    return verdict.admitted
      ? { admitted: true, watch: [] }
      : { admitted: false, watch: verdict.watch };
  }

  /** The children of the key's parent (none when it does not exist). */
  async children(key: string, keys: readonly string[], operation: string): Promise<string[]> {
    try {
      return await this.scope.session.run((c, done: (e: unknown, r?: string[]) => void) =>
        c.getChildren(this.scope.parentOf(key), (e, r) => done(e, r)),
      );
    } catch (error) {
      if (zkCode(error) === ZK.NO_NODE) return [];
      throw backendError(keys, operation, error);
    }
  }

  /** A node in line whose place is not known yet: admitted or not; deleted if that fails. */
  private async placed(
    node: HeldNode,
    share: Share | undefined,
    keys: readonly string[],
  ): Promise<{ node: HeldNode; admitted: boolean }> {
    try {
      return { node, admitted: (await this.look(node, share, keys)).admitted };
    } catch (error) {
      this.scope.leave([node]);
      throw error;
    }
  }

  /**
   * This caller's node for `key` (its name starts with `name`, and this session owns it), if a
   * create made it.
   */
  private async findOwn(
    key: string,
    name: string,
    keys: readonly string[],
  ): Promise<HeldNode | undefined> {
    const named = (await this.children(key, keys, 'acquire')).filter((c) => c.startsWith(name));
    if (named.length === 0) return undefined;
    const [own] = await this.owned(this.scope.parentOf(key), named, keys);
    return own ? { key, path: own.path, fence: zxid(own.stat.czxid) } : undefined;
  }

  /** Of the children `names` of `parent`, those that are nodes of this session. */
  private async owned(
    parent: string,
    names: readonly string[],
    keys: readonly string[],
  ): Promise<{ name: string; path: string; stat: Zk.Stat }[]> {
    const found = await Promise.all(
      names.map(async (name) => {
        const path = `${parent}/${name}`;
        const stat = await callFor(
          this.scope.session,
          keys,
          'acquire',
          (c, done: (e: unknown, s?: Zk.Stat) => void) => c.exists(path, (e, s) => done(e, s)),
        );
        return this.scope.session.owns(stat) ? { name, path, stat: stat! } : undefined;
      }),
    );
    return found.filter((f) => f !== undefined);
  }
}

/** Whether two node names are of one call (same kind and token: all but the sequence). */
function sameCall(a: string, b: string): boolean {
  return a.length === b.length && a.slice(0, -10) === b.slice(0, -10);
}

/** A zxid (8 bytes, big-endian) as a number: exact below 2^53 (epochs below 2^21). */
function zxid(bytes: Buffer): number {
  return Number(bytes.readBigInt64BE(0));
}
