/**
 * What `npm run check:package` reads in the README it ships: its links and images, which must
 * work on the npm page as well as on GitHub, and its quick-start code, which must run as pasted.
 */

/** The repository every absolute link of the README points into. */
export const REPOSITORY = 'nest-locked/nest-locked';
const FILE_PREFIXES = [
  `https://github.com/${REPOSITORY}/blob/HEAD/`,
  `https://raw.githubusercontent.com/${REPOSITORY}/HEAD/`,
];

/** Markdown without fenced code blocks and inline code, where links are not links. */
function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '``');
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .replace(/`/g, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors of a Markdown document's headings, with GitHub's `-1`, `-2` for repeats. */
export function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const [, text] of markdown
    .replace(/^```[\s\S]*?^```/gm, '')
    .matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = slug(text);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    result.add(count === 0 ? base : `${base}-${count}`);
  }
  return result;
}

/**
 * Problems with the links and images of `markdown`: a relative target (npm shows the README
 * without the repository's files), a file of this repository that does not exist, or an
 * anchor that no heading has.
 *
 * @param readFile reads a file of the repository by its path, `undefined` if it does not exist
 */
export function linkProblems(
  markdown: string,
  readFile: (path: string) => string | undefined,
): string[] {
  const problems: string[] = [];
  const own = anchors(markdown);
  for (const [, target] of prose(markdown).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
    if (target.startsWith('#')) {
      if (!own.has(target.slice(1))) problems.push(`${target}: no heading has this anchor`);
      continue;
    }
    const prefix = FILE_PREFIXES.find((p) => target.startsWith(p));
    if (prefix) {
      const rest = target.slice(prefix.length);
      const file = rest.split(/[?#]/)[0];
      const hash = rest.indexOf('#');
      const fragment = hash >= 0 ? rest.slice(hash + 1) : undefined;
      const text = readFile(file);
      if (text === undefined) problems.push(`${target}: ${file} is not in the repository`);
      else if (fragment !== undefined && !anchors(text).has(fragment)) {
        problems.push(`${target}: ${file} has no heading with this anchor`);
      }
      continue;
    }
    if (!/^https?:\/\//.test(target)) {
      problems.push(`${target}: a relative link, which breaks on the npm page`);
    }
  }
  return problems;
}

/** The first TypeScript block of the README's "Quick start" section. */
export function quickStart(markdown: string): string {
  const section = markdown.split(/^## Quick start\s*$/m)[1]?.split(/^## /m)[0] ?? '';
  const code = /^```ts\n([\s\S]*?)^```/m.exec(section)?.[1];
  if (code === undefined) throw new Error('README.md has no ```ts block under "## Quick start"');
  return code;
}
