/**
 * `npm run check:package` (and a step of .ci/run): checks what `npm publish` would ship, the way
 * users get it, from the packed tarball rather than from this repository.
 *
 * 1. `npm pack` (its `prepack` builds dist/), then the tarball's file list: what must be there,
 *    nothing else, and every source map's sources inside the package; and its README and docs:
 *    every relative link or image names a shipped file (and heading), so they work offline.
 * 2. publint and are-the-types-wrong (`attw`) on that tarball.
 * 3. Three smoke apps, each in a temporary directory with its dependencies installed from the npm
 *    registry and nest-locked from the tarball, against a redis-server started here on a free
 *    loopback port:
 *    - Nest 12 as plain Node ESM: an application context, a @Locked method, health through
 *      `@nestjs/terminus` and lock events through `@nestjs/event-emitter` (their Nest 12 majors,
 *      installed with npm's default peer checks: no --legacy-peer-deps), and a type-check
 *      of a TypeScript file under moduleResolution nodenext (without skipLibCheck, so every
 *      shipped declaration is checked too). Skipped, with a message, on a Node
 *      without require(esm) (before 20.19, or 22.0 to 22.11), where that combination cannot run.
 *    - Nest 11 on Fastify (CommonJS): one HTTP request to a @Locked route.
 *    - An app without ioredis (Nest 11, CommonJS, pg installed): its types compile without
 *      skipLibCheck, and it starts and locks on a PostgreSQL started here (the tests' harness).
 *    The first two also compile the README's quick start as pasted into one file (as ESM under nodenext,
 *    and as CommonJS) and run it: it must sell exactly the stock.
 * 4. The README itself, run as a reader follows it (`scripts/readme-blocks.ts` finds its marked
 *    blocks): in an empty directory, the quick start's files and the exact commands it gives
 *    (today's registry versions: TypeScript and Nest as `npm install` picks them), with only
 *    `nest-locked` taken from the tarball and the Redis URL ours; the output must be what the
 *    README says it prints. Then, in the same directory, the Backends section's install lines
 *    (one per backend, all run there) and its snippet, compiled by that TypeScript: a line that
 *    leaves out a driver's types (pg without @types/pg) fails it.
 *
 * Every step is bounded in time; the temporary directories and the processes started here
 * (redis-server, npm, the apps: each in its own process group) are removed or stopped on exit.
 * The apps talk to 127.0.0.1 only; npm talks to the registry to install them.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { linkProblems } from './readme-links';
import { type ReadmeBlock, readmeBlock, readmeBlocks, readmeCommands } from './readme-blocks';
import { ensureRedisServer, killAllStartedSync, type RedisProcess, startRedis } from './redis';
import { type PostgresServerHandle, startPostgres } from '../test/support/postgres-server';

const root = path.resolve(__dirname, '..');
const smokeSources = path.join(__dirname, 'package-smoke');
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
  devDependencies: Record<string, string>;
};

const PACK_TIMEOUT_MS = 5 * 60_000; // includes the build
const LINT_TIMEOUT_MS = 2 * 60_000;
const INSTALL_TIMEOUT_MS = 5 * 60_000;
const APP_TIMEOUT_MS = 60_000;

/** What the tarball must hold; anything at its top level outside these folders is a leak. */
const REQUIRED = [
  'package.json',
  'README.md',
  'LICENSE',
  'dist/index.js',
  'dist/index.d.ts',
  'dist/index.js.map',
  'dist/index.d.ts.map',
  'lib/index.ts',
  'docs/recipes.md',
];
const TOP_LEVEL = new Set(['package.json', 'README.md', 'LICENSE', 'dist', 'lib', 'docs']);

/**
 * The lock scripts, which the library reads at run time from `dist/redis/protocol/lua` (the build copies
 * them there): every `.lua` file of `lib/redis/protocol/lua`, in both places.
 */
function luaFiles(): string[] {
  const source = path.join(root, 'lib/redis/protocol/lua');
  return listFiles(source).flatMap((f) => [
    `lib/redis/protocol/lua/${f}`,
    `dist/redis/protocol/lua/${f}`,
  ]);
}

/** The Redis the README's quick start names, replaced by the one started here. */
const README_REDIS = "'redis://127.0.0.1:6379'";

/**
 * npm's peer checks as a user's npm applies them by default, whatever this machine's config: no
 * --legacy-peer-deps, no --force.
 */
const STRICT_PEERS = { npm_config_legacy_peer_deps: 'false', npm_config_force: 'false' };

const log = (line: string) => process.stdout.write(`check:package: ${line}\n`);

class CheckFailed extends Error {}

/** Process groups still running, killed by PID on exit. */
const running = new Set<number>();
/** The temporary directory of this run, removed on exit. */
let tmp: string | undefined;

/**
 * Runs a command in its own process group, bounded by `timeoutMs` (the whole group is killed:
 * npm and what it spawns). Resolves with its output; rejects with it on a non-zero exit.
 */
function run(
  what: string,
  command: string,
  args: string[],
  options: { cwd: string; timeoutMs: number; env?: NodeJS.ProcessEnv },
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: { ...process.env, ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const pid = child.pid;
    if (pid !== undefined) running.add(pid);
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(pid);
    }, options.timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(new CheckFailed(`${what}: ${error.message}`));
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (pid !== undefined) running.delete(pid);
      if (code === 0 && !timedOut) return resolve(output);
      const why = timedOut
        ? `did not finish within ${options.timeoutMs / 1000} s`
        : `failed (${signal ?? `exit ${code}`})`;
      reject(new CheckFailed(`${what} ${why}:\n${shorten(output.trimEnd())}`));
    });
  });
}

/** At most the first and last 20 lines of `output` (a compiler can print thousands). */
function shorten(output: string): string {
  const lines = output.split('\n');
  if (lines.length <= 50) return output;
  const cut = `... (${lines.length - 40} lines left out) ...`;
  return [...lines.slice(0, 20), cut, ...lines.slice(-20)].join('\n');
}

function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

const tool = (name: string) => path.join(root, 'node_modules', '.bin', name);

/** Packs the package into `dir` and returns the tarball's path. */
async function pack(dir: string): Promise<string> {
  await run('npm pack', 'npm', ['pack', '--pack-destination', dir, '--loglevel=error'], {
    cwd: root,
    timeoutMs: PACK_TIMEOUT_MS,
  });
  const tarball = path.join(dir, `${pkg.name}-${pkg.version}.tgz`);
  if (!fs.existsSync(tarball)) throw new CheckFailed(`npm pack wrote no ${tarball}`);
  return tarball;
}

/** Every file under `dir`, relative to it, with `/` separators. */
function listFiles(dir: string, prefix = ''): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    return e.isDirectory() ? listFiles(path.join(dir, e.name), rel) : [rel];
  });
}

/**
 * The tarball's contents: required files present, nothing else shipped, source maps whole, and
 * README links that work on the npm page. Returns the README it ships.
 */
async function checkContents(tarball: string, dir: string): Promise<string> {
  await run('tar', 'tar', ['-xzf', tarball, '-C', dir], { cwd: dir, timeoutMs: LINT_TIMEOUT_MS });
  const unpacked = path.join(dir, 'package');
  const files = listFiles(unpacked);
  const problems: string[] = [];
  for (const file of [...REQUIRED, ...luaFiles()]) {
    if (!files.includes(file)) problems.push(`missing ${file}`);
  }
  for (const top of new Set(files.map((f) => f.split('/')[0]))) {
    if (!TOP_LEVEL.has(top)) problems.push(`ships ${top}, which is not part of the package`);
  }
  // A map whose sources are not in the package makes stack traces and "go to definition" land
  // nowhere: every .js.map and .d.ts.map must point at a shipped lib/*.ts.
  const maps = files.filter((f) => f.endsWith('.map'));
  for (const map of maps) {
    const mapPath = path.join(unpacked, map);
    const { sources, sourceRoot = '' } = JSON.parse(fs.readFileSync(mapPath, 'utf8')) as {
      sources: string[];
      sourceRoot?: string;
    };
    for (const source of sources) {
      const target = path.resolve(path.dirname(mapPath), sourceRoot, source);
      if (!target.startsWith(unpacked + path.sep) || !fs.existsSync(target)) {
        problems.push(`${map} points at ${source}, which the package does not contain`);
      }
    }
  }
  const jsFiles = files.filter((f) => f.startsWith('dist/') && f.endsWith('.js'));
  const withoutMap = jsFiles.filter((f) => !files.includes(`${f}.map`));
  if (withoutMap.length > 0) problems.push(`no source map for ${withoutMap.join(', ')}`);
  if (problems.length > 0) throw new CheckFailed(`the tarball:\n  ${problems.join('\n  ')}`);
  log(`contents: ${files.length} files, ${maps.length} source and declaration maps, all whole`);

  const readme = fs.readFileSync(path.join(unpacked, 'README.md'), 'utf8');
  const read = (base: string) => (file: string) => {
    const full = path.join(base, file);
    return fs.existsSync(full) ? fs.readFileSync(full, 'utf8') : undefined;
  };
  // Relative links are checked against the tarball: what a user has offline in node_modules.
  const documents = [
    'README.md',
    ...files.filter((f) => f.startsWith('docs/') && f.endsWith('.md')),
  ];
  const broken = documents.flatMap((doc) =>
    linkProblems(read(unpacked)(doc) ?? '', read(unpacked), doc, read(root)).map(
      (problem) => `${doc}: ${problem}`,
    ),
  );
  if (broken.length > 0) throw new CheckFailed(`links:\n  ${broken.join('\n  ')}`);
  log(`README.md and ${documents.length - 1} docs: every link names a shipped file or heading`);
  return readme;
}

/** Node's require() of ES modules, without a flag: 20.19+, 22.12+, 23+. */
function hasRequireEsm(): boolean {
  const [major, minor] = process.versions.node.split('.').map(Number);
  return major >= 23 || (major === 22 && minor >= 12) || (major === 20 && minor >= 19);
}

interface Step {
  what: string;
  command: string;
  args: string[];
  /** A line the output must contain (shown in the log). */
  expect?: RegExp;
}

interface SmokeApp {
  name: string;
  packageJson: object;
  /** Files copied from scripts/package-smoke, as [source, name in the app]. */
  files: [string, string][];
  /** Run after install, in order; the README's quick start is in quick-start.ts. */
  steps: Step[];
  /** Packages whose installed versions the install log line names. */
  versions?: string[];
}

/** The README's quick start, compiled by this repository's TypeScript, then run. */
function quickStartSteps(tsc: string, moduleOptions: string[], files: string[]): Step[] {
  return [
    {
      what: 'tsc',
      command: process.execPath,
      args: [
        tsc,
        '--strict',
        '--target',
        'es2022',
        '--experimentalDecorators',
        '--emitDecoratorMetadata',
        '--types',
        'node',
        '--outDir',
        'out',
        ...moduleOptions,
        ...files,
      ],
    },
    {
      what: 'README quick start',
      command: process.execPath,
      args: ['out/quick-start.js'],
      // What the README's block prints when the lock works: 20 buyers, a stock of 10.
      expect: /^10 of 20 buyers got one$/m,
    },
  ];
}

function smokeApps(tarball: string): SmokeApp[] {
  // The versions this repository tests with, so the smoke apps install what CI knows works.
  const dev = pkg.devDependencies;
  const common = {
    'nest-locked': `file:${tarball}`,
    ioredis: dev.ioredis,
    'reflect-metadata': dev['reflect-metadata'],
    rxjs: dev.rxjs,
  };
  const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  const types = { '@types/node': dev['@types/node'] };
  const apps: SmokeApp[] = [];
  if (hasRequireEsm()) {
    apps.push({
      name: 'nest12-esm',
      packageJson: {
        private: true,
        type: 'module',
        dependencies: {
          ...common,
          ...types,
          '@nestjs/common': '^12.0.0',
          '@nestjs/core': '^12.0.0',
          // The optional peers in their Nest 12 majors: npm must accept them beside nest-locked
          // with its default (strict) peer resolution, no --legacy-peer-deps or --force.
          '@nestjs/terminus': '^12.0.0',
          '@nestjs/event-emitter': '^12.0.0',
        },
      },
      versions: ['@nestjs/core', '@nestjs/terminus', '@nestjs/event-emitter'],
      files: [
        ['nest12-esm.mjs', 'app.mjs'],
        ['nest12-types.mts', 'types.mts'],
      ],
      steps: [
        { what: 'app', command: process.execPath, args: ['app.mjs'], expect: /^OK.*$/m },
        // tsc also type-checks types.mts: what an editor shows an app under nodenext.
        ...quickStartSteps(
          tsc,
          ['--module', 'nodenext', '--moduleResolution', 'nodenext'],
          ['quick-start.ts', 'types.mts'],
        ),
      ],
    });
  } else {
    log(
      `SKIPPED the Nest 12 ESM app: Node ${process.versions.node} cannot require() ES modules ` +
        `without a flag, and nest-locked (CommonJS) loads Nest 12 (ESM only) with require(). ` +
        `Nest 12 needs Node ^20.19.0 or >= 22.12.0.`,
    );
  }
  apps.push({
    name: 'no-ioredis',
    packageJson: {
      private: true,
      dependencies: {
        'nest-locked': common['nest-locked'],
        'reflect-metadata': common['reflect-metadata'],
        rxjs: common.rxjs,
        ...types,
        '@nestjs/common': '^11.0.0',
        '@nestjs/core': '^11.0.0',
        pg: dev.pg,
        '@types/pg': dev['@types/pg'],
      },
    },
    files: [['no-ioredis.ts', 'no-ioredis.ts']],
    steps: [
      {
        // No skipLibCheck: every .d.ts the app reaches must compile without ioredis.
        what: 'tsc without ioredis',
        command: process.execPath,
        args: [
          tsc,
          ...['--strict', '--target', 'es2022', '--esModuleInterop'],
          ...['--experimentalDecorators', '--emitDecoratorMetadata', '--types', 'node'],
          ...['--module', 'commonjs', '--moduleResolution', 'node10', '--outDir', 'out'],
          'no-ioredis.ts',
        ],
      },
      {
        what: 'app',
        command: process.execPath,
        args: ['out/no-ioredis.js'],
        expect: /^OK without ioredis.*$/m,
      },
    ],
  });
  apps.push({
    name: 'nest11-fastify',
    packageJson: {
      private: true,
      dependencies: {
        ...common,
        ...types,
        '@nestjs/common': '^11.0.0',
        '@nestjs/core': '^11.0.0',
        '@nestjs/platform-fastify': '^11.0.0',
      },
    },
    files: [['nest11-fastify.cjs', 'app.cjs']],
    steps: [
      { what: 'app', command: process.execPath, args: ['app.cjs'], expect: /^OK.*$/m },
      ...quickStartSteps(
        tsc,
        ['--module', 'commonjs', '--moduleResolution', 'node10'],
        ['quick-start.ts'],
      ),
    ],
  });
  return apps;
}

/** The version of `name` installed in the app at `dir`. */
function installedVersion(dir: string, name: string): string {
  const manifest = path.join(dir, 'node_modules', name, 'package.json');
  return (JSON.parse(fs.readFileSync(manifest, 'utf8')) as { version: string }).version;
}

/** Writes an app into `dir` and installs its dependencies. */
async function install(app: SmokeApp, dir: string): Promise<void> {
  fs.mkdirSync(dir);
  const manifest = { name: `smoke-${app.name}`, version: '0.0.0', ...app.packageJson };
  fs.writeFileSync(path.join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  for (const [source, name] of app.files) {
    fs.copyFileSync(path.join(smokeSources, source), path.join(dir, name));
  }

  const started = Date.now();
  await run(
    `${app.name}: npm install`,
    'npm',
    ['install', '--no-audit', '--no-fund', '--loglevel=error'],
    { cwd: dir, timeoutMs: INSTALL_TIMEOUT_MS, env: STRICT_PEERS },
  );
  const versions = (app.versions ?? []).map((name) => `${name} ${installedVersion(dir, name)}`);
  log(
    `${app.name}: installed in ${((Date.now() - started) / 1000).toFixed(1)} s, ` +
      `no --legacy-peer-deps or --force${versions.length > 0 ? `: ${versions.join(', ')}` : ''}`,
  );
}

async function runApp(
  app: SmokeApp,
  dir: string,
  servers: { redis: RedisProcess; postgres: PostgresServerHandle },
  pasted: string,
): Promise<void> {
  const { redis, postgres } = servers;
  // The README's block as a user pastes it; only the Redis it names is ours.
  fs.writeFileSync(
    path.join(dir, 'quick-start.ts'),
    pasted.replace(README_REDIS, `'${redis.url}'`),
  );
  for (const step of app.steps) {
    const output = await run(`${app.name}: ${step.what}`, step.command, step.args, {
      cwd: dir,
      timeoutMs: APP_TIMEOUT_MS,
      env: { REDIS_URL: redis.url, PG_URL: postgres.url },
    });
    const line = step.expect ? step.expect.exec(output)?.[0] : 'passed';
    if (line === undefined) {
      throw new CheckFailed(
        `${app.name}: ${step.what} printed no line like ${step.expect}:\n${output}`,
      );
    }
    log(`${app.name}: ${step.what}: ${line}`);
  }
}

/**
 * Follows the README in an empty directory `dir`, as a reader would: writes the quick start's
 * files, runs its commands and checks what they print; then the Backends section's install lines
 * and snippet, compiled with the quick start's tsconfig. The packages come from the registry at
 * their current versions (what a reader gets today), except nest-locked, from `tarball`.
 */
async function followReadme(
  blocks: Map<string, ReadmeBlock>,
  tarball: string,
  dir: string,
  redis: RedisProcess,
): Promise<void> {
  if (!hasRequireEsm()) {
    log(`readme: SKIPPED on Node ${process.versions.node}: today's Nest (12) needs require(esm)`);
    return;
  }
  fs.mkdirSync(dir);
  const commands = (app: string) => {
    const lines = readmeCommands(readmeBlock(blocks, `${app}/commands`));
    // What the reader installs as `nest-locked` is the tarball under test, never the registry's.
    return lines.map(({ command, prints }) => {
      const local = command.replace(/(?<=^npm (?:install|i)\b.*\s)nest-locked(?=\s|$)/, tarball);
      return { shown: command, command: local, prints };
    });
  };
  const files = (app: string) => {
    for (const [name, { code }] of blocks) {
      const file = name.slice(app.length + 1);
      if (!name.startsWith(`${app}/`) || file === 'commands') continue;
      // The Redis the README names is the one started here.
      fs.writeFileSync(path.join(dir, file), code.replace(README_REDIS, `'${redis.url}'`));
    }
  };
  const follow = async (app: string, steps: ReturnType<typeof commands>) => {
    for (const step of steps) {
      const output = await run(`readme: ${app}: \`${step.shown}\``, 'bash', ['-c', step.command], {
        cwd: dir,
        timeoutMs: INSTALL_TIMEOUT_MS,
        env: STRICT_PEERS,
      });
      if (step.prints !== undefined && !output.split('\n').includes(step.prints)) {
        throw new CheckFailed(
          `readme: ${app}: \`${step.shown}\` did not print "${step.prints}":\n${shorten(output)}`,
        );
      }
      log(`readme: ${app}: \`${step.shown}\`${step.prints ? `: ${step.prints}` : ''}`);
    }
  };
  files('quick-start');
  await follow('quick-start', commands('quick-start'));
  const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as {
    dependencies?: Record<string, string>;
  };
  if (!manifest.dependencies?.['nest-locked']?.startsWith('file:')) {
    throw new CheckFailed(`readme: the quick start's commands did not install nest-locked`);
  }
  log(
    `readme: quick start followed with TypeScript ${installedVersion(dir, 'typescript')}, ` +
      `Nest ${installedVersion(dir, '@nestjs/core')}, Node ${process.versions.node}`,
  );

  files('backends');
  await follow('backends', [
    ...commands('backends'),
    { shown: 'npx tsc', command: 'npx tsc', prints: undefined },
  ]);
  log(`readme: the Backends snippet compiles after its install lines`);
}

async function main(): Promise<void> {
  const started = Date.now();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nest-locked-package-'));
  tmp = dir;
  let redis: RedisProcess | undefined;
  let postgres: PostgresServerHandle | undefined;
  try {
    log(`packing (builds dist/) into ${dir}`);
    const tarball = await pack(dir);
    const readme = await checkContents(tarball, dir);
    const blocks = readmeBlocks(readme);
    const pasted = readmeBlock(blocks, 'quick-start/main.ts');
    if (!pasted.includes(README_REDIS)) {
      throw new CheckFailed(`the README's quick start no longer names ${README_REDIS}`);
    }

    await run('publint', tool('publint'), ['run', tarball, '--strict'], {
      cwd: root,
      timeoutMs: LINT_TIMEOUT_MS,
    });
    log('publint: no problems');
    // --no-definitely-typed: compare against no @types package (none exists; it would be a
    // registry lookup).
    await run('attw', tool('attw'), [tarball, '--no-definitely-typed', '--format', 'ascii'], {
      cwd: root,
      timeoutMs: LINT_TIMEOUT_MS,
    });
    log('are-the-types-wrong: no problems (node10, node16 from CJS and ESM, bundler)');

    const apps = smokeApps(tarball);
    const dirs = new Map(apps.map((app) => [app, path.join(dir, app.name)]));
    redis = await startRedis(ensureRedisServer(log));
    log(`redis-server ${redis.url} (pid ${redis.pid})`);
    postgres = await startPostgres();
    log(`postgres on port ${postgres.port} (pid ${postgres.pid})`);
    // Every install ends before a failure is reported: the temporary directory is removed then.
    const installs = await Promise.allSettled([
      ...apps.map((app) => install(app, dirs.get(app)!)),
      followReadme(blocks, tarball, path.join(dir, 'readme'), redis),
    ]);
    for (const result of installs) if (result.status === 'rejected') throw result.reason;
    for (const app of apps) await runApp(app, dirs.get(app)!, { redis, postgres }, pasted);

    log(`passed in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  } finally {
    await redis?.stop();
    await postgres?.stop();
    removeTmp();
  }
}

function removeTmp(): void {
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  tmp = undefined;
}

function cleanUpSync(): void {
  for (const pid of running) killGroup(pid);
  running.clear();
  killAllStartedSync();
  removeTmp();
}

process.on('exit', cleanUpSync);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    cleanUpSync();
    process.exit(130);
  });
}

main().catch((error: unknown) => {
  const message = error instanceof CheckFailed ? error.message : String((error as Error)?.stack);
  process.stderr.write(`check:package: FAILED: ${message}\n`);
  process.exitCode = 1;
});
