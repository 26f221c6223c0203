import type { LockOrderMemory } from './lock-order-memory';
import { TOPOLOGIES } from './protocol';
import { fmt } from './report-format';
import type { CaseSummary } from './run';

/** Lock-order checking on (the default, `'warn'`) may cost at most this much of the rate off. */
export const LOCK_ORDER_TARGET = 0.97;

/**
 * The cost of lock-order checking (PRODUCT 2.11): the uncontended and hot-key rows of `@Locked`
 * with the checker on (the default) and off, the rate on over off against the 3% budget, and
 * the heap one class pair keeps (the `lockorder` scenario).
 */
export function lockOrderMarkdown(
  summaries: readonly CaseSummary[],
  memory: LockOrderMemory | undefined,
): string[] {
  const by = (id: string) => summaries.find((s) => s.def.id === id && s.n > 0);
  const rows: string[] = [];
  const row = (label: string, base: string) => {
    const on = by(`${base}:ours-locked`);
    const off = by(`${base}:ours-locked-order-off`);
    if (!on || !off) return;
    const ratio = on.rate.median / off.rate.median;
    const pass = ratio >= LOCK_ORDER_TARGET ? 'PASS' : 'FAIL';
    rows.push(
      `| ${label} | ${fmt(on.rate.median)} | ${fmt(off.rate.median)} | ${fmt(ratio, 3)} | ${pass} |`,
    );
  };
  row('uncontended, 1 server', 'uncontended:1');
  row('uncontended, 3 servers', 'uncontended:3');
  for (const [procs, callers] of TOPOLOGIES) {
    row(`hot key ${procs}x${callers}`, `hot:${procs}x${callers}:think0`);
  }
  if (rows.length === 0 && !memory) return [];
  const L = ['', '## Lock-order checking: on (default) vs off', ''];
  if (rows.length) {
    L.push(
      `\`@Locked\` with \`lockOrder: 'warn'\` (the default) and \`'off'\`, same run, medians of the ` +
        `runs; target: on >= ${LOCK_ORDER_TARGET} x off. The uncontended rows alternate blocks of ` +
        'every peer in one process, so the two rows are paired.',
      '',
      '| row | on (/s) | off (/s) | on / off | target |',
      '|---|---|---|---|---|',
      ...rows,
    );
  }
  if (memory) {
    L.push(
      '',
      `Memory per class pair (${fmt(memory.pairs)} nestings of two new classes each, ` +
        'LockService.using on the memory backend, heap after a full GC): ' +
        `${fmt(memory.perPair)} bytes with the checker on (${fmt(memory.on)} B/pair on, ` +
        `${fmt(memory.off)} B/pair off: two classes, the edge with its first site, two held chains).`,
    );
  }
  return L;
}
