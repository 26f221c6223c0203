import { dirname, relative } from 'node:path';

/** Where this library's own code lives (`lib/` from source, `dist/` once built). */
const OWN_DIR = dirname(__dirname);

/**
 * The caller of `LockService.using` / `acquire`, as `function (file:line)` relative to the working
 * directory: the first stack frame outside this library and Node's internals. Read only when an
 * edge is seen for the first time (a stack costs microseconds; the steady state never asks).
 * @internal
 */
export function callSite(): string {
  const stack = new Error().stack?.split('\n').slice(1) ?? [];
  for (const frame of stack) {
    const m = /at (?:(.*?) \()?(.*?):(\d+):\d+\)?$/.exec(frame.trim());
    if (!m) continue;
    const [, fn, file, line] = m;
    if (file.startsWith('node:') || file.startsWith(OWN_DIR) || file.includes('node_modules')) {
      continue;
    }
    const where = `${relative(process.cwd(), file)}:${line}`;
    const site = fn && fn !== '<anonymous>' ? `${fn.replace(/^async /, '')} (${where})` : where;
    // A copy: the parts matched out of the stack would keep the whole stack text alive.
    return Buffer.from(site).toString();
  }
  return 'an unknown caller';
}
