import { performance } from 'node:perf_hooks';
import { isCluster, nodeName, type RedisNode } from './redis-node';
import { NODE_BACK_UNCONFIRMED, NODE_RESTARTED, RESTARTED_NODES_BARRED } from './redis.messages';

/** How long after a failed read of a node's start it is read again (while it stays connected). */
const READ_RETRY_MS = 1_000;

/** What is known of one node's server: when it started, and whether it may vote now. */
interface NodeState {
  readonly node: RedisNode;
  /** The server's `run_id` as last read; undefined before the first read. */
  runId?: string;
  /** `performance.now()` of the server's start as last read (the latest it can have been). */
  start?: number;
  /**
   * From when the node may have forgotten leases it granted (its start): it votes again once
   * the longest lease has passed since. Undefined: nothing forgotten, it votes.
   */
  forgotSince?: number;
  /**
   * `performance.now()` of this client's first read of the node, until it is judged by it (see
   * `cameBackIntoRunningGroup`); undefined once judged, or before the first read.
   */
  firstRead?: number;
  /** Its connection closed and its `run_id` was not read since: it may have restarted. */
  unconfirmed: boolean;
  /** `performance.now()` when its connection last closed. */
  closedAt?: number;
  /** Counts the closes: a read started before the last one is stale. */
  epoch: number;
  /** The read in flight, if any. */
  reading?: Promise<void>;
}

/**
 * Redlock's restart rule, kept by the client of a quorum (N ≥ 2 nodes): a Redis node restarted
 * without persistence forgot the locks it granted, so it counts toward no new acquire's majority
 * until the longest lease in use has passed since its start (renewals, which put the lock back
 * there, and releases still go to it). What a node is, is read once per connection, when it is
 * ready (INFO server: `run_id`, `uptime_in_seconds`), never on the lock path; from its close to
 * that read it does not vote. A node counts as restarted when:
 * - this client saw it before and its `run_id` changed (a restart, or a switch to another
 *   server behind the same address: then it forgot from the moment the old one was last heard);
 * - this client sees it first less than a lease after its start while another node of the
 *   group had been up a whole lease before it started: it came back into a running group. A
 *   group whose nodes all started within a lease of each other is taken as started together
 *   (else a fresh deployment would refuse every lock for a lease).
 * The longest lease in use is the group's `ttl`, or a longer one its `@Locked` methods declare or
 * this process asked for (acquire, renewal, handoff, release by expiry), with its drift
 * allowance. Not followed: Redis
 * Cluster nodes (a Cluster's masters fail over on their own) and nodes that refuse INFO (an ACL
 * without it): they vote as before.
 * @internal
 */
export class NodeRestarts {
  private readonly states = new Map<RedisNode, NodeState>();
  /** Nodes that may not vote now (unconfirmed, or restarted recently); 0 is the fast path. */
  private barred = 0;
  private longest: number;
  private closed = false;
  private readonly listeners: (() => void)[] = [];

  constructor(
    nodes: readonly RedisNode[],
    /** The group's default lease in ms: where the longest lease in use starts. */
    ttl: number,
    private readonly drift: (ttl: number) => number,
    /** How long a read of a node's start may take. */
    private readonly timeout: number,
  ) {
    this.longest = ttl;
    // A single node cannot be kept from voting: its answer is the only one.
    if (nodes.length < 2) return;
    for (const node of nodes) {
      if (isCluster(node)) continue;
      const state: NodeState = { node, unconfirmed: true, epoch: 0 };
      this.states.set(node, state);
      const onClose = () => this.connectionClosed(state);
      const onReady = () => this.read(state);
      node.on('close', onClose);
      node.on('ready', onReady);
      this.listeners.push(() => {
        node.off('close', onClose);
        node.off('ready', onReady);
      });
      if (node.status === 'ready') this.read(state);
    }
    this.recount();
  }

  /** A lease of `ttl` ms is in use: a restarted node waits at least this long. */
  leaseInUse(ttl: number): void {
    if (ttl <= this.longest) return;
    this.longest = ttl;
    // A node first read young under a shorter lease may be young under this one.
    this.cameBackIntoRunningGroup();
  }

  /** Whether `node` may count toward a new acquire's majority now. */
  votes(node: RedisNode): boolean {
    if (this.barred === 0) return true;
    const state = this.states.get(node);
    if (!state) return true;
    if (state.unconfirmed) return false;
    if (state.forgotSince === undefined) return true;
    if (performance.now() < this.clearsAt(state.forgotSince)) return false;
    state.forgotSince = undefined;
    this.recount();
    return true;
  }

  /** Ms until the first node kept from voting may vote again (0 when unknown: unconfirmed). */
  clearsIn(): number {
    const now = performance.now();
    let soonest = Infinity;
    for (const s of this.states.values()) {
      if (s.forgotSince !== undefined && !s.unconfirmed) {
        soonest = Math.min(soonest, this.clearsAt(s.forgotSince) - now);
      }
    }
    return soonest === Infinity ? 0 : Math.max(1, Math.ceil(soonest));
  }

  /** Why nodes cannot vote now, and when they can: for the error of an acquire they fail. */
  why(): string {
    const now = performance.now();
    const nodes: string[] = [];
    for (const s of this.states.values()) {
      const name = nodeName(s.node);
      // A node not connected is not listed: its vote was its connection's error.
      if (s.unconfirmed) {
        if (s.node.status === 'ready') nodes.push(NODE_BACK_UNCONFIRMED(name));
      } else if (s.forgotSince !== undefined && now < this.clearsAt(s.forgotSince)) {
        nodes.push(NODE_RESTARTED(name, now - s.forgotSince, this.clearsAt(s.forgotSince) - now));
      }
    }
    return RESTARTED_NODES_BARRED(nodes, this.longest);
  }

  /** Resolves once the reads of nodes' starts in flight are answered (startup waits for it). */
  async confirmed(): Promise<void> {
    await Promise.all([...this.states.values()].map((s) => s.reading));
  }

  /** Stops following the nodes. */
  close(): void {
    this.closed = true;
    for (const off of this.listeners) off();
  }

  private clearsAt(since: number): number {
    return since + this.longest + this.drift(this.longest);
  }

  private recount(): void {
    let barred = 0;
    for (const s of this.states.values()) {
      if (s.unconfirmed || s.forgotSince !== undefined) barred++;
    }
    this.barred = barred;
  }

  private connectionClosed(state: NodeState): void {
    state.closedAt = performance.now();
    state.epoch++;
    state.unconfirmed = true;
    this.recount();
  }

  /** Reads the node's `run_id` and uptime (INFO server), again later if that fails. */
  private read(state: NodeState): void {
    const { node, epoch } = state;
    let timer: NodeJS.Timeout | undefined;
    const reading = Promise.race([
      node.info('server'),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('timeout')), this.timeout);
      }),
    ]).then(
      (info) => {
        if (state.epoch === epoch) this.started(state, info);
      },
      (error: unknown) => {
        if (this.closed || state.epoch !== epoch) return;
        // Refused (INFO not allowed to this user): its restarts cannot be told, it votes.
        // (ioredis's ReplyError, told by name: any copy of ioredis, and none loaded here.)
        if ((error as Error | undefined)?.name === 'ReplyError') return this.unreadable(state);
        if (node.status !== 'ready') return;
        setTimeout(() => {
          if (!this.closed && state.epoch === epoch) this.read(state);
        }, READ_RETRY_MS).unref();
      },
    );
    state.reading = reading.finally(() => clearTimeout(timer));
  }

  /** A node whose server cannot be read votes as if it never restarted (documented). */
  private unreadable(state: NodeState): void {
    state.unconfirmed = false;
    this.recount();
  }

  /** What an INFO server reply says of the node's start. */
  private started(state: NodeState, info: string): void {
    const runId = /^run_id:(\w+)/m.exec(info)?.[1];
    const uptime = Number(/^uptime_in_seconds:(\d+)/m.exec(info)?.[1]);
    if (runId === undefined || !Number.isFinite(uptime)) return this.unreadable(state);
    const now = performance.now();
    // Uptime counts whole seconds: the start taken is the latest it can have been.
    const start = now - uptime * 1_000;
    if (state.runId === undefined) {
      state.firstRead = now;
    } else if (state.runId !== runId) {
      state.firstRead = undefined;
      // Restarted (or another server behind the address): what it granted is gone since its
      // start, or since the old server was last heard when that was later.
      state.forgotSince = Math.max(start, state.closedAt ?? start);
    }
    state.runId = runId;
    state.start = start;
    state.unconfirmed = false;
    this.cameBackIntoRunningGroup();
  }

  /**
   * Nodes first read less than a lease after their start count as restarted when another node
   * had been up a whole lease before they started: they came back into a group that was
   * granting leases. Judged again as reads come in and the longest lease grows.
   */
  private cameBackIntoRunningGroup(): void {
    let earliest = Infinity;
    for (const s of this.states.values()) {
      if (s.start !== undefined) earliest = Math.min(earliest, s.start);
    }
    for (const s of this.states.values()) {
      if (s.firstRead === undefined || s.start === undefined) continue;
      const youngWhenRead = s.start + this.longest > s.firstRead;
      if (!youngWhenRead || earliest + this.longest > s.start) continue;
      s.forgotSince ??= s.start;
      s.firstRead = undefined;
    }
    this.recount();
  }
}
