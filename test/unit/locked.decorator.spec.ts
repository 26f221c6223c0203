import 'reflect-metadata';
import { Controller, Get, Post, SetMetadata } from '@nestjs/common';
import { PATH_METADATA, METHOD_METADATA } from '@nestjs/common/constants';
import { Cron } from '@nestjs/schedule';
import { LockConfigError, LockKeyError, Locked } from '../../lib';
import { getLockedMethod } from '../../lib/api/locked.decorator';
import { LOCK_SERVICE_PROPERTY } from '../../lib/redlock.constants';

const CUSTOM = 'custom:meta';

@Controller('c')
class Placement {
  @Locked('a:{id}')
  @Get(':id')
  @SetMetadata(CUSTOM, 'below')
  async above(id: string, _extra?: number) {
    return id;
  }

  @Post(':id')
  @SetMetadata(CUSTOM, 'above')
  @Locked('b:{id}')
  async below(id: string) {
    return id;
  }

  @Locked('cron:tick')
  @Cron('* * * * * *', { name: 'tick' })
  async tick() {
    return 1;
  }
}

describe('@Locked', () => {
  const proto = Placement.prototype;

  it('keeps route, cron and custom metadata in any decorator order', () => {
    expect(Reflect.getMetadata(PATH_METADATA, proto.above)).toBe(':id');
    expect(Reflect.getMetadata(METHOD_METADATA, proto.above)).toBeDefined();
    expect(Reflect.getMetadata(CUSTOM, proto.above)).toBe('below');
    expect(Reflect.getMetadata(PATH_METADATA, proto.below)).toBe(':id');
    expect(Reflect.getMetadata(CUSTOM, proto.below)).toBe('above');
    const cronKeys = Reflect.getMetadataKeys(proto.tick).filter((k) =>
      String(k).includes('SCHEDULE'),
    );
    expect(cronKeys.length).toBeGreaterThan(0);
  });

  it('keeps the name and length of the method and marks it as locked', () => {
    expect(proto.above.name).toBe('above');
    expect(proto.above.length).toBe(2);
    expect(getLockedMethod(proto.above)?.where).toBe('Placement.above');
    expect(getLockedMethod(proto.below)?.where).toBe('Placement.below');
  });

  it('registers one property injection of LockService per class', () => {
    const deps = Reflect.getMetadata('self:properties_metadata', Placement) as { key: unknown }[];
    expect(deps.filter((d) => d.key === LOCK_SERVICE_PROPERTY)).toHaveLength(1);
  });

  it('fails closed, with a sentence, on an instance Nest did not build', async () => {
    // A decorated method is async at run time, whatever its declared return type.
    const err = await (new Placement().above('1') as unknown as Promise<string>).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(LockConfigError);
    expect((err as Error).message).toMatch(/Placement\.above found no LockService/);
  });

  it('rejects an unknown placeholder at decoration time', () => {
    expect(() => {
      class Bad {
        @Locked('p:{nope}')
        async m(id: string) {
          return id;
        }
      }
      return Bad;
    }).toThrow(LockKeyError);
  });

  it.each([
    [{ segments: 0 }, 'segments'],
    [{ segments: -2 }, 'segments'],
    [{ segments: 2.5 }, 'segments'],
    [{ ttl: 0 }, 'ttl'],
    [{ ttl: -5 }, 'ttl'],
    [{ waitTimeout: -1 }, 'waitTimeout'],
    [{ maxHold: 0 }, 'maxHold'],
    [{ watchdog: 'yes' as unknown as boolean }, 'watchdog'],
    [{ client: '' }, 'client'],
  ])('rejects bad options %j at decoration time, naming %s', (options, field) => {
    let error: unknown;
    try {
      class Bad {
        @Locked('p:{id}', options)
        async m(id: string) {
          return id;
        }
      }
      void Bad;
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(LockConfigError);
    expect((error as LockConfigError).field).toContain(field);
    expect((error as Error).message).toContain(field);
  });

  it('rejects segments combined with several templates or a function', () => {
    const decorate = (keys: string[] | (() => string)) => () => {
      class Bad {
        @Locked(keys, { segments: 4 })
        async m(a: string, b: string) {
          return a + b;
        }
      }
      return Bad;
    };
    expect(decorate(['a:{a}', 'b:{b}'])).toThrow(LockConfigError);
    expect(decorate(() => 'x')).toThrow(/segments/);
  });

  it('rejects a static method', () => {
    expect(() => {
      class Bad {
        @Locked('x')
        static async m() {
          return 1;
        }
      }
      return Bad;
    }).toThrow(LockConfigError);
  });
});
