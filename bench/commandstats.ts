import type { Redis } from 'ioredis';
import type { CommandCounts } from './protocol';

/**
 * Commands not part of any lock protocol: our own INFO snapshots (and ioredis ready checks),
 * and QUIT of a worker that finished while others still run.
 */
const IGNORED = new Set(['info', 'quit']);

/** `INFO commandstats` summed over the servers, both figures of one reading by command. */
export interface CommandSnapshot {
  /** Calls (in-script calls included). */
  calls: CommandCounts;
  /** µs spent (a script's include the commands it ran, also counted under their own names). */
  usec: CommandCounts;
}

/** One `INFO commandstats` per server, summed: calls and µs by command. */
export async function commandSnapshot(conns: readonly Redis[]): Promise<CommandSnapshot> {
  const snapshot: CommandSnapshot = { calls: {}, usec: {} };
  const infos = await Promise.all(conns.map((c) => c.info('commandstats')));
  for (const info of infos) {
    for (const line of info.split('\n')) {
      const m = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line.trim());
      if (!m) continue;
      snapshot.calls[m[1]] = (snapshot.calls[m[1]] ?? 0) + Number(m[2]);
      snapshot.usec[m[1]] = (snapshot.usec[m[1]] ?? 0) + Number(m[3]);
    }
  }
  return snapshot;
}

/** `INFO commandstats` summed over the servers: calls by command (in-script calls included). */
export async function commandStats(conns: readonly Redis[]): Promise<CommandCounts> {
  return (await commandSnapshot(conns)).calls;
}

/**
 * Server µs spent on the commands a client sent (`sent`: by name), from the `usec` of two
 * `commandSnapshot`s: scripts with the commands they ran, never those counted twice.
 */
export function sentUsec(sent: CommandCounts, after: CommandCounts, before: CommandCounts): number {
  let us = 0;
  for (const name of Object.keys(sent)) us += (after[name] ?? 0) - (before[name] ?? 0);
  return us;
}

/** CPU seconds (user + system) used so far by the servers' processes, summed. */
export async function serverCpuSeconds(conns: readonly Redis[]): Promise<number> {
  const infos = await Promise.all(conns.map((c) => c.info('cpu')));
  let total = 0;
  for (const info of infos) {
    for (const m of info.matchAll(/^used_cpu_(?:sys|user):([\d.]+)/gm)) total += Number(m[1]);
  }
  return total;
}

export function countsDelta(after: CommandCounts, before: CommandCounts): CommandCounts {
  const d: CommandCounts = {};
  for (const [k, v] of Object.entries(after)) {
    if (IGNORED.has(k)) continue;
    const n = v - (before[k] ?? 0);
    if (n > 0) d[k] = n;
  }
  return d;
}

export function addCounts(into: CommandCounts, from: CommandCounts): void {
  for (const [k, v] of Object.entries(from)) into[k] = (into[k] ?? 0) + v;
}
