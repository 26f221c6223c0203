/**
 * Hand-written SVG for `npm run demo`: a chart of the figures per mode, and a picture of the
 * printed summary (for the README). No dependencies.
 */

export interface ModeFigures {
  readonly mode: string;
  readonly requests: number;
  readonly stock: number;
  readonly sold: number;
  readonly finalStock: number;
  readonly oversold: number;
  /** Requests per second over the burst. */
  readonly throughput: number;
  readonly p50: number;
  readonly p99: number;
}

const esc = (s: string): string =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

const FONT = "font-family='ui-sans-serif, system-ui, -apple-system, Segoe UI, Helvetica, Arial'";
const MONO = "font-family='ui-monospace, SFMono-Regular, Menlo, Consolas, monospace'";
const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');

/** Two panels of horizontal bars: units sold against the stock, and throughput with latency. */
export function renderChart(rows: readonly ModeFigures[], subtitle: string): string {
  const barH = 26;
  const gap = 18;
  const top = 78;
  const labelW = 92;
  const panelW = 340;
  /** Room right of the longest bar for its label. */
  const labelRoom = 180;
  const left1 = labelW + 16;
  const left2 = left1 + panelW + labelW + 40;
  const width = left2 + panelW + 40;
  const height = top + rows.length * (barH + gap) + 30;
  const maxSold = Math.max(1, ...rows.map((r) => Math.max(r.sold, r.stock)));
  const maxTput = Math.max(1, ...rows.map((r) => r.throughput));
  const soldScale = (panelW - labelRoom) / maxSold;
  const tputScale = (panelW - labelRoom) / maxTput;
  const out: string[] = [];
  const text = (x: number, y: number, s: string, extra = '') =>
    out.push(
      `<text x='${x}' y='${y}' ${FONT} ${/font-size/.test(extra) ? '' : "font-size='13' "}` +
        `${extra}>${esc(s)}</text>`,
    );

  out.push(
    `<svg xmlns='http://www.w3.org/2000/svg' width='${width}' height='${height}' ` +
      `viewBox='0 0 ${width} ${height}'>`,
    `<rect width='100%' height='100%' fill='#ffffff'/>`,
  );
  text(
    16,
    28,
    'nest-locked demo: a flash sale, one product, concurrent buyers',
    "font-size='17' font-weight='600' fill='#111'",
  );
  text(16, 48, subtitle, "fill='#555'");
  text(
    left1,
    top - 12,
    'units sold (green: within stock, red: oversold)',
    "fill='#333' font-weight='600'",
  );
  text(
    left2,
    top - 12,
    'throughput, requests/s (p50 / p99 latency)',
    "fill='#333' font-weight='600'",
  );

  rows.forEach((r, i) => {
    const y = top + i * (barH + gap);
    const mid = y + barH / 2 + 5;
    text(left1 - 10, mid, r.mode, "text-anchor='end' font-weight='600' fill='#111'");
    text(left2 - 10, mid, r.mode, "text-anchor='end' font-weight='600' fill='#111'");
    const ok = Math.min(r.sold, r.stock);
    const okW = ok * soldScale;
    const overW = Math.max(0, r.sold - ok) * soldScale;
    out.push(`<rect x='${left1}' y='${y}' width='${okW}' height='${barH}' fill='#2e9e5b'/>`);
    if (overW > 0) {
      out.push(
        `<rect x='${left1 + okW}' y='${y}' width='${overW}' height='${barH}' fill='#d6453d'/>`,
      );
    }
    const stockX = left1 + r.stock * soldScale;
    out.push(
      `<line x1='${stockX}' y1='${y - 4}' x2='${stockX}' y2='${y + barH + 4}' stroke='#111' ` +
        `stroke-width='2' stroke-dasharray='4 3'/>`,
    );
    const soldLabel =
      r.oversold > 0 ? `${fmt(r.sold)} sold, ${fmt(r.oversold)} oversold` : `${fmt(r.sold)} sold`;
    text(Math.max(left1 + okW + overW, stockX) + 8, mid, soldLabel, "fill='#111'");
    const tW = Math.max(2, r.throughput * tputScale);
    out.push(`<rect x='${left2}' y='${y}' width='${tW}' height='${barH}' fill='#3b6fd8'/>`);
    const tLabel = `${fmt(r.throughput)} req/s (${fmt(r.p50)} / ${fmt(r.p99)} ms)`;
    text(left2 + tW + 8, mid, tLabel, "fill='#111'");
  });
  const stock = rows[0]?.stock;
  if (stock !== undefined) {
    text(
      left1,
      height - 22,
      `dashed line: the stock (${fmt(stock)} units)`,
      "fill='#555' font-size='12'",
    );
  }
  out.push('</svg>');
  return out.join('\n') + '\n';
}

export type Tone = 'plain' | 'prompt' | 'bad' | 'good' | 'dim';
export interface TerminalLine {
  readonly text: string;
  readonly tone?: Tone;
}
const TONES: Record<Tone, string> = {
  plain: '#e6e6e6',
  prompt: '#8fd18f',
  bad: '#ff8a80',
  good: '#8fd18f',
  dim: '#9a9a9a',
};

/** Lines of a terminal, drawn as a terminal window (monospace, dark). */
export function renderTerminal(lines: readonly TerminalLine[], title = 'npm run demo'): string {
  const charW = 7.85;
  const lineH = 18;
  const pad = 16;
  const bar = 28;
  const cols = Math.max(40, ...lines.map((l) => l.text.length));
  const width = Math.ceil(cols * charW + pad * 2);
  const height = bar + pad + lines.length * lineH + pad;
  const out = [
    `<svg xmlns='http://www.w3.org/2000/svg' width='${width}' height='${height}' ` +
      `viewBox='0 0 ${width} ${height}'>`,
    `<rect width='100%' height='100%' rx='8' fill='#1e1f24'/>`,
    `<rect width='100%' height='${bar}' rx='8' fill='#2c2d33'/>`,
    `<rect y='${bar - 8}' width='100%' height='8' fill='#2c2d33'/>`,
    ...['#ff5f57', '#febc2e', '#28c840'].map(
      (c, i) => `<circle cx='${18 + i * 20}' cy='${bar / 2}' r='6' fill='${c}'/>`,
    ),
    `<text x='${width / 2}' y='${bar / 2 + 5}' text-anchor='middle' ${FONT} font-size='13' ` +
      `fill='#aaa'>${esc(title)}</text>`,
  ];
  lines.forEach((line, i) => {
    const y = bar + pad + (i + 1) * lineH - 5;
    out.push(
      `<text x='${pad}' y='${y}' ${MONO} font-size='13' fill='${TONES[line.tone ?? 'plain']}' ` +
        `xml:space='preserve'>${esc(line.text)}</text>`,
    );
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}
