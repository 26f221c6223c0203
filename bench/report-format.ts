/**
 * How the bench writes figures and peers: number and PASS/FAIL cells, command lists, the peers'
 * labels and chart colours, shared by the report files (report.ts, report-shared-holds.ts,
 * report-scale.ts) and the orchestrator's progress lines.
 */
import type { PeerName } from './protocol';

/** `n` with `d` decimals and thousands separators; '-' when missing or not finite. */
export const fmt = (n: number | undefined, d = 0): string =>
  n === undefined || !Number.isFinite(n)
    ? '-'
    : n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });

/** A target's verdict cell: '-' when it could not be judged. */
export const pf = (ok: boolean | undefined): string =>
  ok === undefined ? '-' : ok ? 'PASS' : '**FAIL**';

/** The median, with min–max over the runs when they differ. */
export const range = (r: { median: number; min: number; max: number }, d = 0): string =>
  r.min === r.max || !Number.isFinite(r.min)
    ? fmt(r.median, d)
    : `${fmt(r.median, d)} (${fmt(r.min, d)}–${fmt(r.max, d)})`;

/** The `n` most used commands per section, most first ('-' when none reaches 0.005). */
export const topCommands = (by: Record<string, number>, n: number): string =>
  Object.entries(by)
    .filter(([, v]) => v >= 0.005)
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, v]) => `${k} ${fmt(v, 2)}`)
    .join(', ') || '-';

/** The first line of a message, at most 300 characters. */
export const oneLine = (s: string | undefined): string => (s ?? '').split('\n')[0].slice(0, 300);

/** Text escaped for SVG. */
export const esc = (s: string): string =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** Every peer's label in the tables (markdown: ours in bold). */
export const PEER_LABEL: Record<PeerName, string> = {
  timer: 'timer only (no lock)',
  floor: 'raw ioredis floor (SET NX PX + EVALSHA)',
  redlock: 'redlock 5 defaults',
  'redlock-tuned': 'redlock 5 tuned (10/10/-1)',
  mutex: 'redis-semaphore Mutex',
  'nest-redlock': '@anchan828/nest-redlock @Redlock',
  'ours-locked': '**ours: @Locked**',
  'ours-locked-order-off': "**ours: @Locked lockOrder: 'off'**",
  'ours-using': '**ours: LockService.using**',
  'ours-locked-seg10': '**ours: @Locked segments: 10**',
  'floor-wait1': 'raw floor + WAIT 1 1000 after the SET',
  'ours-locked-acks1': '**ours: @Locked replicaAcks: 1**',
  'ours-rw': "**ours: @Locked mode: 'read' / 'write'**",
  'ours-permits5': '**ours: @Locked permits: 5**',
  semaphore5: 'redis-semaphore Semaphore(5)',
  'floor-pubsub': 'raw pub/sub pass (no lock: one PUBLISH hands the turn over)',
};

/** Every peer's colour in the charts. */
export const PEER_COLOR: Record<PeerName, string> = {
  timer: '#999999',
  floor: '#666666',
  redlock: '#c9a227',
  'redlock-tuned': '#e07b39',
  mutex: '#7a8fb8',
  'nest-redlock': '#a77bbf',
  'ours-locked': '#1b7f3b',
  'ours-locked-order-off': '#3f9f5e',
  'ours-using': '#52b069',
  'ours-locked-seg10': '#0b4f22',
  'floor-wait1': '#333333',
  'ours-locked-acks1': '#8fd19e',
  'ours-rw': '#2e9e57',
  'ours-permits5': '#146b33',
  semaphore5: '#5a6f98',
  'floor-pubsub': '#444444',
};

/**
 * The head of a report section with one table: a blank line, the `## title`, the text that
 * explains it, and the table's header and separator rows.
 */
export const tableSection = (title: string, text: string, columns: readonly string[]): string[] => [
  '',
  `## ${title}`,
  '',
  text,
  '',
  `| ${columns.join(' | ')} |`,
  `|${'---|'.repeat(columns.length)}`,
];
