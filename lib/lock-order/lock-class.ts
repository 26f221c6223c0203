import type { LockClassMode } from '../core/order-edge-store';

export type { LockClassMode } from '../core/order-edge-store';

/**
 * A lock class (lockdep's term): every lock that is logically the same, here a key template in
 * one group and one mode. `account:1` and `account:2` rendered from `account:{id}` are one class,
 * so an inversion is seen the first time the two orders occur, whatever ids they ran with.
 * @internal
 */
export interface LockClass {
  /** Dense number of the class in this process, the graph's node. */
  readonly id: number;
  readonly group: string;
  /** The template with every placeholder written `{}` (`account:{from}` -> `account:{}`). */
  readonly template: string;
  readonly mode: LockClassMode;
  /** How reports name it: `account:{}/exclusive`, with `[group]` unless it is `default`. */
  readonly label: string;
  /** The class alone, as the set of classes a single-key call takes (built once). */
  readonly alone: ClassSet;
}

/**
 * The classes one call takes at once (all or nothing, in sorted key order: no order among
 * them). Interned, so a chain of held classes finds its next chain by identity.
 * @internal
 */
export interface ClassSet {
  readonly classes: readonly LockClass[];
}

/**
 * The class of a template: every `{placeholder}` becomes `{}`, so `account:{from}` and
 * `account:{id}` (the same keys, named by two methods) are one class; `{{` and `}}` (literal
 * braces) stay as they are.
 * @internal
 */
export function classTemplate(template: string): string {
  if (!template.includes('{')) return template;
  let out = '';
  for (let i = 0; i < template.length; i++) {
    const ch = template[i];
    if ((ch === '{' || ch === '}') && template[i + 1] === ch) {
      out += ch + ch;
      i++;
    } else if (ch === '{') {
      const close = template.indexOf('}', i + 1);
      if (close < 0) return out + template.slice(i);
      out += '{}';
      i = close;
    } else {
      out += ch;
    }
  }
  return out;
}

/**
 * Raw keys (no template, no `lockClass`) that get a class of their own, per process: past it,
 * a raw key never seen is not checked (one warning says so).
 * @internal
 */
export const RAW_CLASS_LIMIT = 10_000;

/** The mode of a call's class. @internal */
export const classMode = (mode: 'read' | 'write', permits: number): LockClassMode =>
  mode === 'read' ? 'read' : permits > 1 ? 'permits' : 'exclusive';

/**
 * The lock classes of one process, interned: looking a class up allocates nothing (nested maps,
 * no joined string), so a raw key's class costs three map reads per call.
 * @internal
 */
export class LockClasses {
  private readonly byGroup = new Map<string, Map<LockClassMode, Map<string, LockClass>>>();
  private readonly all: LockClass[] = [];
  private readonly sets = new Map<string, ClassSet>();
  /** Classes made from raw keys (no template, no `lockClass`): bounded, see `rawClass`. */
  private raw = 0;

  constructor(private readonly rawLimit = RAW_CLASS_LIMIT) {}

  /**
   * The class of a raw key (the key itself), or undefined once `rawLimit` such classes exist and
   * this key is not one: a key with an id in it is a class per id, and a process that nests
   * `using('order:' + id)` would keep one per order it ever saw.
   */
  rawClass(group: string, mode: LockClassMode, key: string): LockClass | undefined {
    const found = this.byGroup.get(group)?.get(mode)?.get(key);
    if (found || this.raw >= this.rawLimit) return found;
    this.raw++;
    return this.get(group, mode, key);
  }

  /** Whether raw keys stopped getting classes of their own. */
  get rawFull(): boolean {
    return this.raw >= this.rawLimit;
  }

  /** The class of `template` (already in class form, see `classTemplate`). */
  get(group: string, mode: LockClassMode, template: string): LockClass {
    let modes = this.byGroup.get(group);
    if (!modes) this.byGroup.set(group, (modes = new Map()));
    let templates = modes.get(mode);
    if (!templates) modes.set(mode, (templates = new Map()));
    let found = templates.get(template);
    if (!found) {
      const suffix = group === 'default' ? '' : ` [${group}]`;
      const made: { -readonly [K in keyof LockClass]: LockClass[K] } = {
        id: this.all.length,
        group,
        template,
        mode,
        label: `${template}/${mode}${suffix}`,
        alone: undefined as unknown as ClassSet,
      };
      made.alone = { classes: [made] };
      found = made;
      templates.set(template, found);
      this.all.push(found);
    }
    return found;
  }

  /** The class numbered `id`. */
  byId(id: number): LockClass {
    return this.all[id];
  }

  /** The interned set of `classes` (any order, duplicates allowed). */
  set(classes: readonly LockClass[]): ClassSet {
    if (classes.length === 1) return classes[0].alone;
    const unique = [...new Set(classes)].sort((a, b) => a.id - b.id);
    if (unique.length === 1) return unique[0].alone;
    const key = unique.map((c) => c.id).join(',');
    let found = this.sets.get(key);
    if (!found) this.sets.set(key, (found = { classes: unique }));
    return found;
  }
}
