import { callerSeed, writeDraws } from './seeded';

/**
 * The read-heavy scenario's ceiling under the lock's own rules (PRODUCT.md 2.7), with nothing
 * else in the way: the same callers and the same draws as the timed run, every section exactly
 * one unit long, every handoff instant. Rules: one queue in arrival order; a writer holds alone;
 * readers at the head of the queue are granted together, up to the first writer; a reader that
 * arrives while readers hold and nobody is queued joins them; a caller asks again the moment its
 * section ends. Returns sections per section-length: the exclusive lock's ceiling is 1, so this
 * is the largest speedup over it the rules allow for these draws (write-preferring fairness
 * makes every waiting writer wait for the readers ahead of it, then hold alone).
 */
export function readHeavyCeiling(
  procs: number,
  callers: number,
  iterations: number,
  writeShare: number,
): number {
  interface Caller {
    draws: () => boolean;
    left: number;
  }
  const all: Caller[] = [];
  for (let p = 0; p < procs; p++) {
    for (let w = 0; w < callers; w++) {
      all.push({ draws: writeDraws(callerSeed(p, w), writeShare), left: iterations });
    }
  }
  const queue: { caller: number; write: boolean }[] = [];
  // Sections in progress: end time and caller, kept sorted by end (all last one unit).
  const running: { end: number; caller: number }[] = [];
  let mode: 'r' | 'w' | undefined;
  let done = 0;
  let now = 0;
  const start = (caller: number) => running.push({ end: now + 1, caller });
  // The head goes in unless someone holds and either of them writes; a writer goes alone.
  const grant = () => {
    while (queue.length) {
      const head = queue[0];
      if (running.length > 0 && (mode === 'w' || head.write)) return;
      mode = head.write ? 'w' : 'r';
      queue.shift();
      start(head.caller);
      if (head.write) return;
    }
  };
  const ask = (caller: number) => {
    const c = all[caller];
    if (c.left <= 0) return;
    c.left--;
    const write = c.draws();
    if (!write && mode === 'r' && running.length > 0 && queue.length === 0) start(caller);
    else queue.push({ caller, write });
  };
  for (let i = 0; i < all.length; i++) ask(i);
  grant();
  while (running.length) {
    now = running[0].end;
    const ended: number[] = [];
    while (running.length && running[0].end === now) ended.push(running.shift()!.caller);
    done += ended.length;
    for (const caller of ended) ask(caller);
    if (running.length === 0) mode = undefined;
    grant();
  }
  return done / now;
}
