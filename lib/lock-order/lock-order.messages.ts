/** The messages of `lock-order/`: the cycle report, its hints, and the checker's own logs. */

export const CYCLE_TITLE = (length: number) =>
  `possible deadlock: a cycle of ${length} lock classes taken in opposite orders`;

export const SELF_TITLE = (label: string) =>
  `possible deadlock: ${label} is nested in itself (two calls may nest two of its keys in ` +
  `opposite orders)`;

export const EDGE_LINE = (from: string, to: string, site: string, instance: string) =>
  `  ${from} -> ${to}   first at ${site} on ${instance}`;

export const TABLE_TITLE = 'possible deadlock scenario:';

export const TABLE_LINE = (
  n: number,
  instance: string,
  site: string,
  held: string,
  waits: string,
) => `  instance ${n} (${instance}, ${site}): holds ${held}, waits ${waits}`;

export const SELF_TABLE = (instance: string, site: string, label: string) => [
  `  instance 1 (${instance}, ${site}): holds ${label} (key x), waits ${label} (key y)`,
  `  instance 2 (${site} with other arguments): holds ${label} (key y), waits ${label} (key x)`,
];

export const CYCLE_FIX =
  'Take these locks in one order everywhere, or in one call: @Locked([...]) and ' +
  'LockService.using([...]) take their keys together, in sorted order.';

export const SELF_FIX = (template: string) =>
  `Take both keys in one call (@Locked(['${template}', ...]) sorts them), or, if the nested ` +
  `keys always come in one fixed order (ascending ids...), declare it with ` +
  `\`nestedInOrder: true\` on the inner call.`;

export const ORDER_STORE_FAILED = (group: string, what: 'add' | 'list', error: unknown) =>
  `lock order: the lock-order edges of group "${group}" could not be ${what === 'add' ? 'stored' : 'read'} ` +
  `(${error instanceof Error ? error.message : String(error)}); this instance checks with what it ` +
  `knows, and tries again.`;

export const LONG_WAIT = (keys: readonly string[], waitedMs: number, holder: string | undefined) =>
  `lock ${keys.map((k) => `"${k}"`).join(', ')}: waiting for ${Math.round(waitedMs)} ms; ` +
  (holder ?? 'its holder is in another instance (this backend does not say which)');

export const HOLDER_HERE = (site: string, instance: string, heldMs: number) =>
  `held by ${site} in this instance (${instance}) for ${Math.round(heldMs)} ms`;

export const RAW_CLASSES_FULL = (limit: number) =>
  `lock order: ${limit} raw keys (no template, no lockClass) got a lock class of their own; ` +
  `further new raw keys are not checked. A key with an id in it is a class per id: name its ` +
  `class with the lockClass option (using('order:' + id, fn, { lockClass: 'order:{id}' })).`;
