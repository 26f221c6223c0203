import 'reflect-metadata';
import { LockService } from '../../lib/api/lock.service';
import { LockKeyError } from '../../lib/errors';
import { MAX_KEY_BYTES } from '../../lib/keys/key-length';
import { rawKeys } from '../../lib/keys/raw-key';
import type { LockGroupRegistry } from '../../lib/module/lock-group.registry';
import type { ResolvedRedlockOptions } from '../../lib/options/redlock-options';
import { keyError } from '../support/key-error';

const WHERE = 'LockService.acquire';

describe('rawKeys', () => {
  it('takes a key or a non-empty array of keys, as given, in a fresh array', () => {
    expect(rawKeys('report:7', WHERE)).toEqual(['report:7']);
    const keys = ['acct:B', 'acct:A', 'acct:B'];
    const checked = rawKeys(keys, WHERE);
    expect(checked).toEqual(keys); // the lock layer sorts and dedupes
    expect(checked).not.toBe(keys);
    expect(rawKeys(['a b:*'], WHERE)).toEqual(['a b:*']); // not encoded
  });

  it.each<[string, unknown, string]>([
    ['a number', 42, 'got 42'],
    ['null', null, 'got null'],
    ['undefined', undefined, 'got undefined'],
    ['an object', { key: 'a' }, 'got an object'],
    ['a Set', new Set(['a']), 'got an object (Set)'],
    ['a function', () => 'a', 'got a function'],
  ])('rejects %s, saying what to pass', (_, keys, text) => {
    const error = keyError(() => rawKeys(keys, WHERE));
    expect(error.message).toContain(WHERE);
    expect(error.message).toContain(text);
    expect(error.message).toContain('a lock key or a non-empty array of keys');
    expect(error.message).toContain("'product:42'");
    expect(error.template).toBe(WHERE);
  });

  it('rejects an empty array: nothing to lock', () => {
    const error = keyError(() => rawKeys([], WHERE));
    expect(error.message).toBe(
      'LockService.acquire got an empty array of lock keys: there is nothing to lock. Pass at ' +
        "least one key, such as 'product:42'.",
    );
    expect(error.template).toBe(WHERE);
  });

  it.each<[string, unknown, string]>([
    ['an empty key', '', 'got an empty string'],
    ['an empty element', ['a', ''], 'element 1): got an empty string'],
    ['a number element', ['a', 'b', 3], 'element 2): got 3'],
    ['a null element', [null], 'element 0): got null'],
    ['a nested array', [['a']], 'element 0): got an array'],
    ['a key over the limit', 'x'.repeat(MAX_KEY_BYTES + 1), '1025 UTF-8 bytes'],
    ['an element over the limit', ['a', 'é'.repeat(MAX_KEY_BYTES)], 'element 1): it is 2048'],
  ])('checks every key as assertRawKey does: %s', (_, keys, text) => {
    const error = keyError(() => rawKeys(keys, WHERE));
    expect(error.message).toContain(`Invalid lock key (${WHERE}`);
    expect(error.message).toContain(text);
    expect(error.template).toBe(WHERE);
  });

  it('accepts a key of exactly MAX_KEY_BYTES', () => {
    expect(rawKeys(['x'.repeat(MAX_KEY_BYTES)], WHERE)[0]).toHaveLength(MAX_KEY_BYTES);
  });
});

describe('LockService.using and acquire check their keys before anything else', () => {
  // Neither the options nor the registry is reached: the keys fail first.
  const service = new LockService({} as ResolvedRedlockOptions, {} as LockGroupRegistry);
  const fn = () => 'ran';

  it.each<[string, unknown, string]>([
    ['a number', 42, 'got 42'],
    ['null', null, 'got null'],
    ['an empty array', [], 'nothing to lock'],
    ['an array with an empty key', ['a', ''], 'element 1'],
  ])('rejects %s with LockKeyError', async (_, keys, text) => {
    const bad = keys as string[];
    const using = service.using(bad, fn);
    await expect(using).rejects.toThrow(LockKeyError);
    await expect(using).rejects.toThrow(text);
    await expect(using).rejects.toThrow('LockService.using');
    const acquire = service.acquire(bad);
    await expect(acquire).rejects.toThrow(LockKeyError);
    await expect(acquire).rejects.toThrow(text);
    await expect(acquire).rejects.toThrow('LockService.acquire');
  });
});
