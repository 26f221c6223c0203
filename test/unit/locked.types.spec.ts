import 'reflect-metadata';
import { type Observable, of } from 'rxjs';
import { LockKeyError, Locked } from '../../lib';

/**
 * What the compiler checks of `@Locked`. Every `@ts-expect-error` below is a compile-time
 * assertion: `tsc --noEmit -p tsconfig.json` (part of `npm run lint`) fails if the line after it
 * stops being an error, and fails on any error elsewhere in this file. The classes live in
 * functions nobody calls, because several of them would throw `LockKeyError` when defined.
 */

interface Order {
  customer: { id: string; tags: string[] };
  items: { sku: string }[];
  placedAt: Date;
  note?: string;
}

/** Compiles: what users write. */
export function accepted(): unknown[] {
  class Accepted {
    @Locked('product:{id}')
    async byName(id: number, qty: number) {
      return id + qty;
    }

    @Locked('product:{0}')
    async byIndex(id: number) {
      return id;
    }

    @Locked('cart:{0.customer.id}:{0.items.2.sku}')
    async byPath(order: Order) {
      return order;
    }

    @Locked('note:{0.note}') // optional: undefined fails the call, a string works
    async optional(order: Order) {
      return order;
    }

    @Locked(['account:{0}', 'account:{1}'])
    async several(from: string, to: string) {
      return from + to;
    }

    @Locked('literal:{{x}}:{0}')
    async literalBraces(id: string) {
      return id;
    }

    @Locked('batch:{0}:{3}')
    async rest(...ids: number[]) {
      return ids;
    }

    @Locked('size:{0.length}')
    async arrayLength(ids: string[]) {
      return ids;
    }

    @Locked('tenant:{0.acme}')
    async record(limits: Record<string, number>) {
      return limits;
    }

    @Locked('loose:{0.a.b.c}')
    async untyped(body: unknown) {
      return body;
    }

    @Locked((from: string, to: string) => [`account:${from}`, `account:${to}`])
    async keyFunction(from: string, to: string, amount: number) {
      return amount;
    }

    @Locked('stream:{0}')
    stream(id: string): Observable<string> {
      return of(id);
    }

    @Locked('cron:cleanup', { waitTimeout: 0, onBusy: 'skip' })
    async cron(): Promise<void> {}

    @Locked('report:{0}', { onBusy: 'skip' })
    async skipped(id: string): Promise<string | undefined> {
      return id;
    }
  }
  const template: string = 'product:{id}';
  const keys: string[] | ((id: string) => string) = ['a:{0}'];
  class Dynamic {
    @Locked(template) // not a literal: checked when the class is defined only
    async fromVariable(id: string) {
      return id;
    }

    @Locked(keys)
    async fromUnion(id: string) {
      return id;
    }
  }
  class Tenanted {
    tenant = 'acme';

    // A key function reading instance state through its `this` parameter.
    @Locked(function (this: Tenanted, id: string) {
      return `${this.tenant}:order:${id}`;
    })
    async settle(id: string) {
      return id;
    }
  }
  return [Accepted, Dynamic, Tenanted];
}

/** Refused by the compiler. */
export function refused(): unknown[] {
  class Templates {
    // @ts-expect-error: argument 2 of a two-parameter method
    @Locked('product:{2}')
    async pastTheEnd(id: number, qty: number) {
      return id + qty;
    }

    // @ts-expect-error: Order.customer has no `idd`
    @Locked('cart:{0.customer.idd}')
    async typoInPath(order: Order) {
      return order;
    }

    // @ts-expect-error: a key cannot be made of an object
    @Locked('cart:{0.customer}')
    async objectValue(order: Order) {
      return order;
    }

    // @ts-expect-error: nor of a Date
    @Locked('day:{0.placedAt}')
    async dateValue(order: Order) {
      return order;
    }

    // @ts-expect-error: one of several templates
    @Locked(['account:{0}', 'account:{2}'])
    async oneOfSeveral(from: string, to: string) {
      return from + to;
    }

    // @ts-expect-error: "{" never closed
    @Locked('product:{id')
    async unclosed(id: number) {
      return id;
    }

    // @ts-expect-error: "}" closes nothing
    @Locked('product}:{id}')
    async unopened(id: number) {
      return id;
    }

    // @ts-expect-error: empty placeholder
    @Locked('product:{}')
    async empty(id: number) {
      return id;
    }

    // @ts-expect-error: placeholders that touch
    @Locked('pair:{0}{1}')
    async touching(a: string, b: string) {
      return a + b;
    }
  }

  class Methods {
    // @ts-expect-error: a sync method would promise a number and return a Promise
    @Locked('product:{0}')
    sync(id: number) {
      return id;
    }

    // @ts-expect-error: the key function takes a number, the method gives a string
    @Locked((id: number) => `product:${id}`)
    async keyFunctionMismatch(id: string) {
      return id;
    }

    // @ts-expect-error: onBusy 'skip' resolves undefined; Promise<number> would hide it
    @Locked('report:{0}', { onBusy: 'skip' })
    async skippedWithoutUndefined(id: number): Promise<number> {
      return id;
    }

    // @ts-expect-error: an unknown option beside known ones
    @Locked('product:{0}', { ttl: 1_000, waitTimout: 5 })
    async unknownOption(id: number) {
      return id;
    }
  }
  class Stranger {
    region = 'eu';
  }
  class KeyThis {
    // @ts-expect-error: the key function's `this` is another class
    @Locked(function (this: Stranger, id: string) {
      return `${this.region}:${id}`;
    })
    async settle(id: string) {
      return id;
    }
  }
  return [Templates, Methods, KeyThis];
}

describe('@Locked types', () => {
  it('leaves parameter names to the check at decoration time (types have no names)', () => {
    // Compiles: `idd` could be a parameter as far as the compiler knows.
    const define = () => {
      class Typo {
        @Locked('product:{idd}')
        async purchase(id: number) {
          return id;
        }
      }
      return Typo;
    };
    expect(define).toThrow(LockKeyError);
    expect(define).toThrow(/\{idd\} names no parameter/);
  });

  it('keeps the run-time check for what the compiler refuses, for untyped callers', () => {
    const template: string = 'product:{2}';
    const define = () => {
      class PastTheEnd {
        @Locked(template)
        async purchase(id: number, qty: number) {
          return id + qty;
        }
      }
      return PastTheEnd;
    };
    expect(define).toThrow(/reads argument 2/);
  });

  it('defines every accepted class without throwing', () => {
    expect(accepted()).toHaveLength(3);
  });
});
