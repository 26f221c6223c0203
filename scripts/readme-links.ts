/**
 * What `npm run check:package` reads in the README and docs it ships: their links and images,
 * which must work offline in node_modules as well as on GitHub.
 */
import * as path from 'node:path';

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
 * Problems with the links and images of `markdown`, a document of the package at `docPath`
 * (`README.md`, `docs/faults.md`). A relative target must be a file the package ships, read
 * with `readFile` (a user reads these documents offline, in node_modules, as well as on GitHub
 * and on the npm page), with the heading its anchor names. An absolute link into this
 * repository is a problem in the README (it needs the network, and may name a file the package
 * does not ship); elsewhere it must name a file that exists (`readRepoFile`).
 *
 * @param readFile reads a shipped file by its path in the package, `undefined` if it is not there
 * @param readRepoFile reads a file of the repository, for absolute links from shipped docs
 */
export function linkProblems(
  markdown: string,
  readFile: (path: string) => string | undefined,
  docPath = 'README.md',
  readRepoFile: (path: string) => string | undefined = readFile,
): string[] {
  const problems: string[] = [];
  const own = anchors(markdown);
  const dir = path.posix.dirname(docPath);
  for (const [, target] of prose(markdown).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
    if (target.startsWith('#')) {
      if (!own.has(target.slice(1))) problems.push(`${target}: no heading has this anchor`);
      continue;
    }
    const prefix = FILE_PREFIXES.find((p) => target.startsWith(p));
    if (prefix) {
      if (docPath === 'README.md') {
        problems.push(`${target}: needs the network; link a shipped file relatively (docs/...)`);
        continue;
      }
      const rest = target.slice(prefix.length);
      problems.push(...fileProblems(target, rest, readRepoFile, 'the repository'));
      continue;
    }
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto: elsewhere
    const rest = path.posix.normalize(path.posix.join(dir, target));
    if (rest.startsWith('../')) {
      problems.push(`${target}: points outside the package`);
      continue;
    }
    problems.push(...fileProblems(target, rest, readFile, 'the package'));
  }
  return problems;
}

/** A link to `rest` (`path[#anchor]`, `?query` ignored): the file exists, and the heading. */
function fileProblems(
  target: string,
  rest: string,
  read: (path: string) => string | undefined,
  where: string,
): string[] {
  const file = rest.split(/[?#]/)[0];
  const hash = rest.indexOf('#');
  const fragment = hash >= 0 ? rest.slice(hash + 1) : undefined;
  const text = read(file);
  if (text === undefined) return [`${target}: ${file} is not in ${where}`];
  if (fragment !== undefined && !anchors(text).has(fragment)) {
    return [`${target}: ${file} has no heading with this anchor`];
  }
  return [];
}
