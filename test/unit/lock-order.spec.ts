import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import {
  Locked,
  LockOrderError,
  type LockOrderEvent,
  LockService,
  RedlockModule,
  type RedlockModuleOptions,
} from 'nest-locked';
import { expectNoLockOrderCycles, RedlockTestingModule } from 'nest-locked/testing';

/**
 * Lock-order checking within one instance (PRODUCT 2.11) on the memory backend: the rules live
 * above the backends. Across instances: test/integration/lock-order-processes.spec.ts.
 */

@Injectable()
class Bank {
  constructor(readonly locks: LockService) {}

  @Locked('account:{id}')
  async transfer(id: string, day: string): Promise<string> {
    return this.post(day);
  }

  @Locked('ledger:{day}')
  async post(day: string): Promise<string> {
    return day;
  }

  @Locked('ledger:{day}')
  async close(day: string, id: string): Promise<string> {
    return this.touch(id);
  }

  @Locked('account:{id}')
  async touch(id: string): Promise<string> {
    return id;
  }

  @Locked(['account:{from}', 'ledger:{day}'])
  async both(from: string, day: string): Promise<string> {
    return from + day;
  }

  @Locked(['ledger:{day}', 'account:{from}'])
  async bothReversed(from: string, day: string): Promise<string> {
    return from + day;
  }

  @Locked('account:{from}')
  async move(from: string, to: string, declared: boolean): Promise<string> {
    return declared ? this.credit(to) : this.touch(to);
  }

  @Locked('account:{to}', { nestedInOrder: true })
  async credit(to: string): Promise<string> {
    return to;
  }

  @Locked('ledger:{day}', { waitTimeout: 0 })
  async tryPost(day: string): Promise<string> {
    return day;
  }

  @Locked('ledger:{day}')
  async closeTrying(day: string, id: string): Promise<string> {
    return this.tryTouch(id);
  }

  @Locked('account:{id}', { waitTimeout: 0 })
  async tryTouch(id: string): Promise<string> {
    return id;
  }
}

async function start(options: RedlockModuleOptions) {
  const moduleRef: TestingModule = await Test.createTestingModule({
    imports: [RedlockModule.forRoot({ backend: 'memory', ...options })],
    providers: [Bank],
  }).compile();
  const warnings: string[] = [];
  moduleRef.useLogger({
    log: () => undefined,
    error: () => undefined,
    warn: (message: unknown) => void warnings.push(String(message)),
  });
  await moduleRef.init();
  const locks = moduleRef.get(LockService);
  const events: LockOrderEvent[] = [];
  locks.on('lockOrder', (e) => events.push(e));
  return { moduleRef, bank: moduleRef.get(Bank), locks, warnings, events };
}

const cycleWarnings = (warnings: string[]) =>
  warnings.filter((w) => w.includes('possible deadlock'));

describe('lock-order checking', () => {
  let ctx: Awaited<ReturnType<typeof start>>;
  afterEach(() => ctx?.moduleRef.close());

  it('warns once, at the first nesting in the opposite order, with both sites and the table', async () => {
    ctx = await start({});
    expect(await ctx.bank.transfer('1', 'd1')).toBe('d1');
    expect(cycleWarnings(ctx.warnings)).toEqual([]);
    expect(await ctx.bank.close('d2', '2')).toBe('2');
    const [warning, ...more] = cycleWarnings(ctx.warnings);
    expect(more).toEqual([]);
    expect(warning).toContain('a cycle of 2 lock classes');
    expect(warning).toContain(
      'account:{}/exclusive -> ledger:{}/exclusive   first at Bank.post inside Bank.transfer',
    );
    expect(warning).toContain(
      'ledger:{}/exclusive -> account:{}/exclusive   first at Bank.touch inside Bank.close',
    );
    expect(warning).toMatch(
      /instance 1 \(.*, Bank\.post inside Bank\.transfer\): holds account:\{\}\/exclusive, waits ledger:\{\}\/exclusive/,
    );
    expect(warning).toMatch(
      /instance 2 \(.*, Bank\.touch inside Bank\.close\): holds ledger:\{\}\/exclusive, waits account:\{\}\/exclusive/,
    );
    expect(ctx.events).toHaveLength(1);
    expect(ctx.events[0].cycle.map((e) => `${e.from} -> ${e.to}`)).toEqual([
      'ledger:{}/exclusive -> account:{}/exclusive',
      'account:{}/exclusive -> ledger:{}/exclusive',
    ]);
    expect(ctx.events[0].keys).toEqual(['account:2']);
    // Once per cycle: both orders again report nothing more.
    await ctx.bank.close('d3', '3');
    await ctx.bank.transfer('4', 'd4');
    expect(cycleWarnings(ctx.warnings)).toHaveLength(1);
    expect(ctx.locks.lockOrderCycles()).toHaveLength(1);
  });

  it("'throw' fails the acquire that closes the cycle before it is taken, every time", async () => {
    ctx = await start({ lockOrder: 'throw' });
    await ctx.bank.transfer('1', 'd1');
    for (let i = 0; i < 2; i++) {
      const refused = await ctx.bank.close('d2', '2').catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(LockOrderError);
      expect((refused as LockOrderError).cycle).toHaveLength(2);
      expect((refused as LockOrderError).message).toContain("lockOrder: 'throw'");
      // Nothing of it is locked: the outer hold was released, the inner never taken.
      expect(await ctx.locks.isLocked('account:2')).toBe(false);
      expect(await ctx.locks.isLocked('ledger:d2')).toBe(false);
    }
    expect(cycleWarnings(ctx.warnings)).toHaveLength(1);
    // The order that was seen first still runs.
    expect(await ctx.bank.transfer('5', 'd5')).toBe('d5');
  });

  it('a multi-key call adds no order among its own keys, in either template order', async () => {
    ctx = await start({ lockOrder: 'throw' });
    await ctx.bank.both('1', 'd1');
    await ctx.bank.bothReversed('2', 'd2');
    await ctx.bank.transfer('3', 'd3');
    await ctx.bank.both('4', 'd4');
    expect(cycleWarnings(ctx.warnings)).toEqual([]);
  });

  it('a class nested in itself is reported unless the inner call declares its order', async () => {
    ctx = await start({});
    await ctx.bank.move('1', '2', true);
    expect(cycleWarnings(ctx.warnings)).toEqual([]);
    await ctx.bank.move('3', '4', false);
    const [warning] = cycleWarnings(ctx.warnings);
    expect(warning).toContain('account:{}/exclusive is nested in itself');
    expect(warning).toContain('nestedInOrder: true');
  });

  it('a try (waitTimeout: 0) cannot wait, so it adds no edge', async () => {
    ctx = await start({ lockOrder: 'throw' });
    await ctx.bank.transfer('1', 'd1');
    expect(await ctx.bank.closeTrying('d2', '2')).toBe('2');
    expect(cycleWarnings(ctx.warnings)).toEqual([]);
  });

  it('raw keys: the class is the lockClass named, else the key itself', async () => {
    ctx = await start({});
    const { locks } = ctx;
    const nest = (outer: string, inner: string, named: boolean) =>
      locks.using(
        outer,
        () =>
          locks.using(inner, () => 'ok', named ? { lockClass: inner.replace(/\d+$/, '{id}') } : {}),
        named ? { lockClass: outer.replace(/\d+$/, '{id}') } : {},
      );
    await nest('a:1', 'b:1', false);
    await nest('b:2', 'a:2', false);
    // Different keys, so different classes: no cycle.
    expect(cycleWarnings(ctx.warnings)).toEqual([]);
    await nest('a:3', 'b:3', true);
    await nest('b:4', 'a:4', true);
    const [warning] = cycleWarnings(ctx.warnings);
    expect(warning).toContain('a:{}/exclusive -> b:{}/exclusive');
    // The site of a raw call is its caller's frame.
    expect(warning).toMatch(/first at .*lock-order\.spec\.ts:\d+/);
  });

  it("'off' checks nothing", async () => {
    ctx = await start({ lockOrder: 'off' });
    await ctx.bank.transfer('1', 'd1');
    await ctx.bank.close('d2', '2');
    expect(cycleWarnings(ctx.warnings)).toEqual([]);
    expect(ctx.locks.lockOrderCycles()).toEqual([]);
  });
});

describe('expectNoLockOrderCycles (nest-locked/testing)', () => {
  it('passes while the orders agree, and fails with the report once they do not', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedlockTestingModule.forRoot()],
      providers: [Bank],
    }).compile();
    moduleRef.useLogger(false);
    await moduleRef.init();
    try {
      // The cycles the tests above found (each made and closed its own app) are told once.
      expect(() => expectNoLockOrderCycles()).toThrow(/lock-order cycle\(s\) found/);
      expectNoLockOrderCycles();
      const bank = moduleRef.get(Bank);
      await bank.transfer('1', 'd1');
      expectNoLockOrderCycles(moduleRef);
      expectNoLockOrderCycles();
      await bank.close('d2', '2');
      expect(() => expectNoLockOrderCycles(moduleRef)).toThrow(
        /1 lock-order cycle\(s\) found[\s\S]*account:\{\}\/exclusive -> ledger:\{\}\/exclusive/,
      );
      expect(() => expectNoLockOrderCycles()).toThrow(/possible deadlock/);
      // Without an argument, each cycle is told once.
      expectNoLockOrderCycles();
    } finally {
      await moduleRef.close();
    }
  });
});
