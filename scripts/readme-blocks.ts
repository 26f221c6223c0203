/**
 * The README's code blocks that `npm run check:package` runs as a user would paste them. Each is
 * marked by an HTML comment just before its fence (invisible on GitHub and npm; prettier puts
 * a blank line between them):
 *
 *     <!-- check: quick-start/main.ts -->
 *     ```ts
 *
 * The name is `<app>/<file>`: the block is written to `<file>` in that app's directory, except
 * `<app>/commands`, the shell commands the README tells the reader to run there, in order.
 */

/** A marked block: its fence's language and its text. */
export interface ReadmeBlock {
  lang: string;
  code: string;
}

const MARKED = /^<!-- check: (\S+) -->\n\n?```(\w*)\n([\s\S]*?)^```/gm;

/** Every marked block of `markdown` by name; a name marked twice is an error. */
export function readmeBlocks(markdown: string): Map<string, ReadmeBlock> {
  const blocks = new Map<string, ReadmeBlock>();
  for (const [, name, lang, code] of markdown.matchAll(MARKED)) {
    if (blocks.has(name)) throw new Error(`README.md marks two blocks "check: ${name}"`);
    blocks.set(name, { lang, code });
  }
  return blocks;
}

/** The marked block `name`; an error naming it when the README has none. */
export function readmeBlock(blocks: Map<string, ReadmeBlock>, name: string): string {
  const block = blocks.get(name);
  if (block === undefined) {
    throw new Error(`README.md has no block marked <!-- check: ${name} --> before its fence`);
  }
  return block.code;
}

/** One line of a commands block, and the text its trailing `# prints "..."` promises. */
export interface ReadmeCommand {
  command: string;
  prints?: string;
}

/** The commands of a `commands` block: one per line; comment lines and blank lines skipped. */
export function readmeCommands(code: string): ReadmeCommand[] {
  return code
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const prints = /\s#\s*prints "([^"]+)"\s*$/.exec(line);
      return prints
        ? { command: line.slice(0, prints.index).trim(), prints: prints[1] }
        : { command: line };
    });
}
