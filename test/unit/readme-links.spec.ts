import * as fs from 'node:fs';
import * as path from 'node:path';
import { linkProblems } from '../../scripts/readme-links';

/**
 * The README and the docs a user reads in node_modules (issue 26, items 13-15): every link
 * names a file the package ships (and a heading that exists), nothing refers to documents a
 * user cannot see, and the README says what a first-time user trips over.
 */
const root = path.resolve(__dirname, '../..');
const files = (
  JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as {
    files: string[];
  }
).files;
const inRepo = (file: string): string | undefined => {
  const full = path.join(root, file);
  return fs.existsSync(full) && fs.statSync(full).isFile()
    ? fs.readFileSync(full, 'utf8')
    : undefined;
};
/** A file of the repository that `files` puts in the package. */
const shipped = (file: string): string | undefined =>
  files.some((entry) => file === entry || file.startsWith(`${entry}/`)) ? inRepo(file) : undefined;

const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
const docs = fs
  .readdirSync(path.join(root, 'docs'))
  .filter((f) => f.endsWith('.md'))
  .map((f) => `docs/${f}`);

describe('the README and docs a user reads offline', () => {
  it.each(['README.md', ...docs])('%s: every link names a shipped file or heading', (doc) => {
    expect(linkProblems(inRepo(doc)!, shipped, doc, inRepo)).toEqual([]);
  });

  it('the README names no document a user cannot see, nor a version that never shipped', () => {
    expect(readme).not.toMatch(/PRODUCT\.md|PRODUCT section/);
    expect(readme).not.toMatch(/\bissue\b|rolling deploy|0\.1\.x|sample\//i);
  });

  it('the README says what a new user needs: tsconfig flags, TypeScript, Nest, init()', () => {
    expect(readme).toContain('"experimentalDecorators": true');
    expect(readme).toContain('"emitDecoratorMetadata": true');
    expect(readme).toMatch(/TypeScript 5\.0 or later/);
    expect(readme).toMatch(/NestJS 10 or later/);
    expect(readme).toMatch(/app\.init\(\)/);
    expect(readme).toMatch(/context manager/);
    expect(readme).toMatch(/strictNullChecks/);
  });

  it('the README has the Backends section with one capability table: a column per backend', () => {
    expect(readme).toMatch(/^## Backends$/m);
    const header = readme.split('\n').find((line) => line.startsWith('| feature '));
    const columns = header
      ?.split('|')
      .map((cell) => cell.trim())
      .filter(Boolean);
    expect(columns).toEqual([
      'feature',
      'Redis',
      'Redis quorum',
      'Redis Cluster',
      'PostgreSQL',
      'MySQL / MariaDB',
      'etcd',
      'ZooKeeper',
      'memory',
    ]);
  });

  // About 600 lines for the Redis manual (issue 26), plus the backends and the lock board
  // (issues 27-29): anything longer goes to docs/.
  it('the README stays a README: under ~700 lines', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(720);
  });
});
