import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { LUA_DIR, loadScript, ScriptLoadError } from '../../lib/redis/protocol/script-loader';

describe('loadScript', () => {
  let dir: string;
  const write = (file: string, text: string) => {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), text);
  };

  beforeEach(() => (dir = mkdtempSync(path.join(tmpdir(), 'nest-locked-lua-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('puts each include in place of its line, its own includes first, each file once', () => {
    write('includes/a.lua', 'local function a() end');
    write('includes/b.lua', '--- @include "includes/a"\nlocal function b() a() end');
    write(
      'main.lua',
      'local x = 1\n--- @include "includes/a"\n--- @include "includes/b"\nreturn b()',
    );
    expect(loadScript('main', {}, dir)).toBe(
      'local x = 1\nlocal function a() end\n\nlocal function b() a() end\nreturn b()',
    );
  });

  it('puts in the constants named $NAME', () => {
    write('main.lua', "return {'$PREFIX' .. KEYS[1], $MS}");
    expect(loadScript('main', { PREFIX: 'p:', MS: 1000 }, dir)).toBe(
      "return {'p:' .. KEYS[1], 1000}",
    );
  });

  it('a missing include fails the load, naming the file that includes it', () => {
    write('main.lua', '--- @include "includes/nowhere"\nreturn 1');
    expect(() => loadScript('main', {}, dir)).toThrow(ScriptLoadError);
    expect(() => loadScript('main', {}, dir)).toThrow(
      /includes[/\\]nowhere\.lua.*included by main\.lua/,
    );
  });

  it('an include cycle fails the load, naming the cycle', () => {
    write('includes/a.lua', '--- @include "includes/b"\nlocal function a() end');
    write('includes/b.lua', '--- @include "includes/a"\nlocal function b() end');
    write('main.lua', '--- @include "includes/a"\nreturn 1');
    expect(() => loadScript('main', {}, dir)).toThrow(
      'include cycle: main.lua -> includes/a.lua -> includes/b.lua -> includes/a.lua',
    );
  });

  it('a constant no one defines fails the load', () => {
    write('main.lua', 'return $NOPE');
    expect(() => loadScript('main', {}, dir)).toThrow(/main\.lua uses \$NOPE/);
  });

  it('the lock scripts are where the loader looks, beside it (lib/ or dist/)', () => {
    expect(() => loadScript('try', { FENCE_COUNTER_LIFETIME_MS: 1 })).not.toThrow();
    expect(LUA_DIR).toBe(path.join(__dirname, '../../lib/redis/protocol/lua'));
  });
});
