import * as net from 'node:net';
import { performance } from 'node:perf_hooks';
import type { BackendHealth, BackendNodeHealth } from '../core/lock-backend';
import { ZK_MEMBER_NOT_SERVING, ZK_NO_HEALTH_ANSWER } from './zookeeper.messages';
import type { ZooKeeperSession } from './zookeeper-session';

/**
 * The ensemble as a health check finds it: a read through the group's own session (what locks
 * need: a member that serves, so a quorum) and, per member of the connect string, the `srvr`
 * four-letter word for its role and whether it serves. Many ensembles allow no four-letter word
 * (`4lw.commands.whitelist`): a member that accepts the connection but refuses the word counts as
 * up when the session's read went through, with no role.
 * @internal
 */
export async function checkMembers(
  session: ZooKeeperSession,
  timeout: number,
): Promise<BackendHealth> {
  const members = session.connectString
    .replace(/\/.*$/, '')
    .split(',')
    .map((m) => m.trim())
    .filter(Boolean);
  const [read, ...probes] = await Promise.all([
    sessionRead(session, timeout),
    ...members.map((m) => srvr(m, timeout)),
  ]);
  const nodes = members.map((node, i): BackendNodeHealth => {
    const probe = probes[i];
    if (probe.error) return { node, status: 'down', error: probe.error };
    const mode = /^Mode: (\w+)/m.exec(probe.reply)?.[1];
    if (mode) return { node, status: 'up', latencyMs: probe.ms, role: mode };
    if (/not currently serving/.test(probe.reply)) {
      return { node, status: 'down', error: ZK_MEMBER_NOT_SERVING };
    }
    return read.error
      ? { node, status: 'down', error: read.error }
      : { node, status: 'up', latencyMs: read.ms };
  });
  return { quorum: Math.floor(members.length / 2) + 1, nodes };
}

async function sessionRead(
  session: ZooKeeperSession,
  timeout: number,
): Promise<{ ms: number; error?: string }> {
  const start = performance.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      session.run((c, done) => c.exists('/', (e) => done(e))),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(ZK_NO_HEALTH_ANSWER(timeout))), timeout);
      }),
    ]);
    return { ms: round(performance.now() - start) };
  } catch (error) {
    return { ms: 0, error: (error as Error).message };
  } finally {
    clearTimeout(timer);
  }
}

/** `srvr` on a fresh connection: its reply, or why there was none. */
function srvr(
  member: string,
  timeout: number,
): Promise<{ reply: string; ms: number; error?: string }> {
  const at = member.lastIndexOf(':');
  const host = at > 0 ? member.slice(0, at) : member;
  const port = at > 0 ? Number(member.slice(at + 1)) : 2181;
  return new Promise((resolve) => {
    const start = performance.now();
    let reply = '';
    let settled = false;
    const socket = net.connect({ host, port });
    const finish = (error?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ reply, ms: round(performance.now() - start), error });
    };
    const timer = setTimeout(() => finish(ZK_NO_HEALTH_ANSWER(timeout)), timeout);
    socket.on('connect', () => socket.write('srvr'));
    socket.on('data', (chunk: Buffer) => (reply += chunk.toString()));
    socket.on('error', (error) => finish(error.message));
    socket.on('close', () => finish());
  });
}

const round = (ms: number) => Math.round(ms * 100) / 100;
