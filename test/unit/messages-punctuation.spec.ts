import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * Every message of the library ends each sentence once: a driver's text that already ends with a
 * period or a question mark ("... is the server there?") is not followed by another period.
 */
const LIB = path.resolve(__dirname, '../../lib');

/** Every `*.messages.ts` under lib/. */
function messageFiles(dir = LIB): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) return messageFiles(file);
    return entry.name.endsWith('.messages.ts') ? [file] : [];
  });
}

/** Parameters that carry another system's text (a driver's error, a reason), which may end a sentence. */
const CAUSE = /reason|cause|detail|problem|message|error|why/i;
const CAUSES = ['connect ECONNREFUSED 127.0.0.1:1.', 'is the server there?', 'no answer!'];

/** The parameter names of `fn`, read from its source. */
function parameterNames(fn: (...args: unknown[]) => unknown): string[] {
  const source = fn.toString();
  const list = source.startsWith('(')
    ? source.slice(1, source.indexOf(')'))
    : source.split('=>')[0];
  return list
    .split(',')
    .map((p) => p.replace(/[=:].*$/s, '').trim())
    .filter(Boolean);
}

/** A sentence's end followed by a period that is not part of an ellipsis or a path. */
const DOUBLED = /(?<!\.)[.?!]\.(?![.\w/])/;

describe('messages', () => {
  const files = messageFiles();

  it('finds the message files', () => {
    expect(files.length).toBeGreaterThan(10);
  });

  it.each(files.map((f) => [path.relative(LIB, f)]))('%s: no sentence ends twice', (file) => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const exported = require(path.join(LIB, file)) as Record<string, unknown>;
    const doubled: string[] = [];
    for (const [name, value] of Object.entries(exported)) {
      if (typeof value === 'string' && DOUBLED.test(value)) doubled.push(`${name}: ${value}`);
      if (typeof value !== 'function') continue;
      const fn = value as (...args: unknown[]) => unknown;
      const names = parameterNames(fn);
      for (const cause of CAUSES) {
        const args = names.map((n, i) => (CAUSE.test(n) ? cause : i % 2 ? 'x' : 'y'));
        let text: unknown;
        try {
          text = fn(...args);
        } catch {
          continue; // a factory that needs other shapes of arguments: not a text builder
        }
        if (typeof text === 'string' && DOUBLED.test(text)) doubled.push(`${name}: ${text}`);
      }
    }
    expect(doubled).toEqual([]);
  });
});
