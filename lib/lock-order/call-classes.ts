import type { LockedOptions } from '../interfaces';
import type { KeySource } from '../keys';
import { type ClassSet, classMode, classTemplate, type LockClass, LockClasses } from './lock-class';

/**
 * The lock classes of a decorated method's templates, in template order (`['account:{from}',
 * 'ledger:{day}']` -> `['account:{}', 'ledger:{}']`); undefined for a key function, whose keys
 * are classed as raw keys are (see `rawKeyClasses`).
 * @internal
 */
export function templateClasses(source: KeySource<never[]>): readonly string[] | undefined {
  if (typeof source === 'string') return [classTemplate(source)];
  if (Array.isArray(source)) return (source as readonly string[]).map(classTemplate);
  return undefined;
}

/**
 * The class set of a call's keys. `rendered` are its keys in source order, `templates` their
 * classes when the source was templates; otherwise each key's class is the `lockClass` the
 * caller named (one for every key, or one per key in the order given), or failing that the key
 * itself. `needed` are the keys the call still takes (the others it re-entered). Undefined when
 * a raw key found raw keys' classes full (see `RAW_CLASS_LIMIT`): the call is not checked.
 * @internal
 */
export function callClassSet(
  classes: LockClasses,
  group: string,
  options: Pick<LockedOptions, 'mode' | 'permits' | 'lockClass'>,
  rendered: readonly string[],
  templates: readonly string[] | undefined,
  needed: readonly string[],
): ClassSet | undefined {
  const mode = classMode(options.mode ?? 'write', options.permits ?? 1);
  const named = templates ?? namedClasses(options.lockClass);
  const classOf = (key: string): LockClass | undefined => {
    if (named === undefined) return classes.rawClass(group, mode, key);
    if (typeof named === 'string') return classes.get(group, mode, named);
    const i = rendered.indexOf(key);
    return i >= 0 && i < named.length
      ? classes.get(group, mode, named[i])
      : classes.rawClass(group, mode, key);
  };
  if (needed.length === 1) return classOf(needed[0])?.alone;
  const list: LockClass[] = [];
  for (const key of needed) {
    const c = classOf(key);
    if (!c) return undefined;
    list.push(c);
  }
  return classes.set(list);
}

/** The `lockClass` option in class form: one class, one per key, or none. */
function namedClasses(
  lockClass: string | readonly string[] | undefined,
): string | readonly string[] | undefined {
  if (lockClass === undefined) return undefined;
  if (typeof lockClass === 'string') return classTemplate(lockClass);
  return lockClass.map(classTemplate);
}
