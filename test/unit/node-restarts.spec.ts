import { EventEmitter } from 'node:events';
import { ReplyError } from 'ioredis';
import { NodeRestarts } from '../../lib/redis/protocol/node-restarts';
import type { RedisNode } from '../../lib/redis/protocol/redis-node';
import { until } from '../support/lock-app';

/** A node's connection as NodeRestarts follows it: ready and close events, INFO server. */
class FakeServer extends EventEmitter {
  status = 'wait';
  refuses = false;
  readonly options: { host: string; port: number };

  constructor(
    port: number,
    public runId: string,
    /** Uptime in seconds. */
    public uptime: number,
  ) {
    super();
    this.options = { host: '127.0.0.1', port };
  }

  info(): Promise<string> {
    if (this.refuses) return Promise.reject(new ReplyError('NOPERM no INFO for this user'));
    return Promise.resolve(
      `# Server\r\nredis_version:7.0.0\r\nrun_id:${this.runId}\r\nuptime_in_seconds:${this.uptime}\r\n`,
    );
  }

  /** The connection is ready (again). */
  ready(): void {
    this.status = 'ready';
    this.emit('ready');
  }

  /** The connection closed (the server went away). */
  closed(): void {
    this.status = 'reconnecting';
    this.emit('close');
  }
}

const noDrift = () => 0;
const HOUR = 3_600;

/** `n` servers up `uptimes` seconds, followed with a longest lease of `ttl` ms, all ready. */
async function group(uptimes: number[], ttl = 10_000) {
  const servers = uptimes.map((up, i) => new FakeServer(7000 + i, `run${i}`, up));
  const nodes = servers as unknown as RedisNode[];
  const restarts = new NodeRestarts(nodes, ttl, noDrift, 1_000);
  for (const s of servers) s.ready();
  await restarts.confirmed();
  const voting = () => nodes.map((n) => restarts.votes(n));
  return { servers, nodes, restarts, voting };
}

describe('NodeRestarts: which quorum nodes may vote for a new lock (Redlock restart rule)', () => {
  it('a group whose nodes all started together votes at once, however young', async () => {
    const { voting, restarts } = await group([0, 1, 0]);
    expect(voting()).toEqual([true, true, true]);
    restarts.close();
  });

  it('a node first seen young, in a group that ran a lease before it started, waits', async () => {
    const { voting, restarts } = await group([HOUR, HOUR, 2]);
    expect(voting()).toEqual([true, true, false]);
    expect(restarts.why()).toMatch(/127\.0\.0\.1:7002 restarted \d+ ms ago and votes again in/);
    expect(restarts.clearsIn()).toBeGreaterThan(0);
    expect(restarts.clearsIn()).toBeLessThanOrEqual(10_000 - 2_000);
    restarts.close();
  });

  it('a node seen before that comes back with another run_id waits; the same run_id votes', async () => {
    const { servers, voting, restarts } = await group([HOUR, HOUR, HOUR]);
    servers[0].closed();
    servers[1].closed();
    // Between its close and the read of its server, a node does not vote.
    expect(voting()).toEqual([false, false, true]);
    servers[0].runId = 'restarted';
    servers[0].uptime = 0;
    servers[0].ready();
    servers[1].ready(); // a blip: same server
    await restarts.confirmed();
    expect(voting()).toEqual([false, true, true]);
    restarts.close();
  });

  it('the longest lease in use grows with the leases asked for', async () => {
    const { servers, restarts } = await group([HOUR, HOUR, HOUR], 1_000);
    restarts.leaseInUse(60_000);
    servers[2].closed();
    servers[2].runId = 'restarted';
    servers[2].uptime = 5;
    servers[2].ready();
    await restarts.confirmed();
    expect(restarts.clearsIn()).toBeGreaterThan(50_000);
    expect(restarts.why()).toContain('(60000 ms)');
    restarts.close();
  });

  it('a node first read under a short lease is judged again when a longer one comes into use', async () => {
    const { voting, restarts } = await group([20, 20, 2], 1_000);
    expect(voting()).toEqual([true, true, true]);
    // A @Locked method declares a 10 s lease: the node restarted 2 s ago may have forgotten one.
    restarts.leaseInUse(10_000);
    expect(voting()).toEqual([true, true, false]);
    restarts.close();
  });

  it('a restarted node votes again once the longest lease has passed since its start', async () => {
    const { servers, nodes, restarts } = await group([HOUR, HOUR, HOUR], 50);
    servers[1].closed();
    servers[1].runId = 'restarted';
    servers[1].uptime = 0;
    servers[1].ready();
    await restarts.confirmed();
    expect(restarts.votes(nodes[1])).toBe(false);
    await until(() => restarts.votes(nodes[1]), 'the restarted node votes again', 2_000);
    restarts.close();
  });

  it('a node that refuses INFO (an ACL without it) votes: its restarts cannot be told', async () => {
    const servers = [new FakeServer(7000, 'a', HOUR), new FakeServer(7001, 'b', HOUR)];
    servers[1].refuses = true;
    const nodes = servers as unknown as RedisNode[];
    const restarts = new NodeRestarts(nodes, 10_000, noDrift, 1_000);
    for (const s of servers) s.ready();
    await restarts.confirmed();
    expect(nodes.map((n) => restarts.votes(n))).toEqual([true, true]);
    restarts.close();
  });

  it('a single node is not followed: it is the only vote', () => {
    const server = new FakeServer(7000, 'a', 0);
    const restarts = new NodeRestarts([server as unknown as RedisNode], 10_000, noDrift, 1_000);
    expect(server.listenerCount('ready')).toBe(0);
    expect(restarts.votes(server as unknown as RedisNode)).toBe(true);
  });

  it('close stops following the nodes', async () => {
    const { servers, restarts } = await group([HOUR, HOUR]);
    restarts.close();
    expect(servers.map((s) => s.listenerCount('ready') + s.listenerCount('close'))).toEqual([0, 0]);
  });
});
