import {
  type SampleClusterOptions,
  type SampleInstance,
  startSampleCluster,
  startSampleInstance,
} from './sample-cluster';

/**
 * The sample instances of the chaos demo, as the buyers see them: the live ones in turn, and the
 * faults done to them (stop, resume, kill and start again) by PID. `stop()` ends every process
 * it ever started, stopped ones resumed first so they can exit.
 */
export class ChaosInstances {
  private readonly all: SampleInstance[] = [];
  private live: SampleInstance[] = [];
  private readonly stopped = new Set<number>();
  private readonly starting = new Set<Promise<unknown>>();
  private turn = 0;

  private constructor(private readonly options: SampleClusterOptions) {}

  static async start(options: SampleClusterOptions): Promise<ChaosInstances> {
    const pool = new ChaosInstances(options);
    const cluster = await startSampleCluster(options);
    pool.all.push(...cluster.instances);
    pool.live = [...cluster.instances];
    return pool;
  }

  /** The live instances, for printing. */
  get instances(): readonly SampleInstance[] {
    return this.live;
  }

  /**
   * The next URL, round robin over the instances that run and are not stopped: a load balancer
   * whose health checks take a dead or frozen instance out (requests already sent to it wait).
   */
  nextUrl(): string {
    const up = this.live.filter((i) => !this.stopped.has(i.pid));
    if (up.length === 0) throw new Error('no sample instance is running');
    return up[this.turn++ % up.length].url;
  }

  byPid(pid: number): SampleInstance | undefined {
    return this.all.find((i) => i.pid === pid);
  }

  /** SIGSTOP: the process freezes where it is, its timers and sockets with it. */
  freeze(pid: number): void {
    process.kill(pid, 'SIGSTOP');
    this.stopped.add(pid);
  }

  /** SIGCONT after `freeze`. */
  resume(pid: number): void {
    this.stopped.delete(pid);
    try {
      process.kill(pid, 'SIGCONT');
    } catch {
      // Gone already.
    }
  }

  /**
   * SIGKILL (no shutdown hook runs, its locks stay in Redis until their lease ends), then starts
   * an instance of the same name; resolves once that one listens and takes requests.
   */
  async killAndRestart(pid: number): Promise<SampleInstance> {
    const victim = this.byPid(pid);
    if (!victim) throw new Error(`pid ${pid} is not a sample instance of this demo`);
    this.live = this.live.filter((i) => i !== victim);
    process.kill(pid, 'SIGKILL');
    const starting = startSampleInstance(victim.name, this.options);
    this.starting.add(starting);
    try {
      const replacement = await starting;
      this.all.push(replacement);
      this.live.push(replacement);
      return replacement;
    } finally {
      this.starting.delete(starting);
    }
  }

  async stop(): Promise<void> {
    for (const pid of [...this.stopped]) this.resume(pid);
    await Promise.allSettled([...this.starting]);
    await Promise.all(this.all.map((i) => i.stop()));
  }
}
