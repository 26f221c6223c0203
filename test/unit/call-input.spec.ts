import 'reflect-metadata';
import { Test, type TestingModule } from '@nestjs/testing';
import { LockConfigError, LockKeyError, LockService } from 'nest-locked';
import { RedlockTestingModule } from 'nest-locked/testing';

/**
 * What a lock call does with unusual input (issue 26, items 7-9): a body that is not a function,
 * a key named `__proto__`, keys that are not well-formed UTF-16. Over the in-memory backend.
 */
describe('lock call input', () => {
  let moduleRef: TestingModule;
  let locks: LockService;
  beforeAll(async () => {
    moduleRef = await Test.createTestingModule({
      imports: [RedlockTestingModule.forRoot({ waitTimeout: 500 })],
    }).compile();
    await moduleRef.init();
    locks = moduleRef.get(LockService);
  });
  afterAll(() => moduleRef.close());

  it('refuses a body that is not a function with a LockConfigError naming the argument', async () => {
    const error = await locks.using('k', 'notfn' as never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockConfigError);
    expect((error as LockConfigError).field).toBe('fn');
    expect((error as Error).message).toContain('LockService.using');
    expect((error as Error).message).toContain('a string');
    // Nothing was locked for it.
    expect(await locks.isLocked('k')).toBe(false);
  });

  it("lists a key named '__proto__' in fences like any other key", async () => {
    const fences = await locks.using(['__proto__', 'b'], (lock) => lock.fences);
    expect(Object.keys(fences).sort()).toEqual(['__proto__', 'b']);
    expect(Object.getOwnPropertyDescriptor(fences, '__proto__')?.value).toEqual(expect.any(Number));
    expect(JSON.parse(JSON.stringify(fences))).toHaveProperty(['__proto__']);
  });

  it.each([
    ['a high surrogate alone', 'a\uD800'],
    ['a low surrogate alone', 'a\uDC00'],
    ['two high surrogates', '\uDBFF\uDBFF'],
  ])('refuses a raw key with %s (Redis would read it as U+FFFD)', async (_, key) => {
    const error = await locks.using(key, () => 1).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockKeyError);
    expect((error as Error).message).toContain('lone surrogate');
  });

  it('takes a raw key with a well-formed surrogate pair', async () => {
    await expect(locks.using('emoji:\uD83D\uDE00', () => 1)).resolves.toBe(1);
  });
});
