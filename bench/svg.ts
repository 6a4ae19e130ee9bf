/**
 * The latency chart, hand-rolled SVG (no chart library): one panel per group of
 * scenarios, each with its own millisecond scale, a horizontal bar per percentile.
 */
export interface ChartGroup {
  label: string;
  values: { p50: number; p90: number; p99: number };
}

export interface ChartPanel {
  title: string;
  groups: ChartGroup[];
}

const SERIES = [
  { key: 'p50', color: '#4c78a8' },
  { key: 'p90', color: '#f2a541' },
  { key: 'p99', color: '#d1495b' },
] as const;

const WIDTH = 900;
const LEFT = 250;
const RIGHT = 70;
const BAR = 11;
const BAR_GAP = 2;
const GROUP_GAP = 14;
const PANEL_HEAD = 46;
const PANEL_FOOT = 28;

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function niceStep(max: number): number {
  const raw = max / 5;
  const mag = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 2.5, 5, 10]) if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

function label(v: number): string {
  if (!Number.isFinite(v)) return 'n/a';
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v >= 1 ? v.toFixed(2) : v.toFixed(3);
}

export function latencyChart(title: string, subtitle: string, panels: ChartPanel[]): string {
  const out: string[] = [];
  let y = 70;
  const plotWidth = WIDTH - LEFT - RIGHT;
  for (const panel of panels) {
    const max = Math.max(...panel.groups.flatMap((g) => SERIES.map((s) => g.values[s.key]).filter(Number.isFinite)), 0.001);
    const step = niceStep(max);
    const top = Math.ceil(max / step) * step;
    const x = (v: number) => LEFT + (Math.max(0, v) / top) * plotWidth;
    const groupHeight = SERIES.length * (BAR + BAR_GAP) + GROUP_GAP;
    const plotTop = y + PANEL_HEAD;
    const plotHeight = panel.groups.length * groupHeight;
    out.push(`<text x="20" y="${y + 24}" class="panel">${esc(panel.title)}</text>`);
    const digits = Math.max(0, -Math.floor(Math.log10(step) + 1e-9) + (String(step).includes('25') ? 1 : 0));
    for (let t = 0; t <= top + step / 2; t += step) {
      const tx = x(t).toFixed(1);
      out.push(`<line x1="${tx}" y1="${plotTop - 6}" x2="${tx}" y2="${plotTop + plotHeight}" class="grid"/>`);
      out.push(`<text x="${tx}" y="${plotTop + plotHeight + 16}" class="tick" text-anchor="middle">${t.toFixed(digits)}</text>`);
    }
    out.push(`<text x="${LEFT + plotWidth}" y="${plotTop + plotHeight + 16}" class="tick" text-anchor="start" dx="14">ms</text>`);
    panel.groups.forEach((g, gi) => {
      const gy = plotTop + gi * groupHeight;
      out.push(`<text x="${LEFT - 10}" y="${gy + (SERIES.length * (BAR + BAR_GAP)) / 2 + 4}" class="label" text-anchor="end">${esc(g.label)}</text>`);
      SERIES.forEach((s, si) => {
        const v = g.values[s.key];
        const by = gy + si * (BAR + BAR_GAP);
        const w = Math.max(1, x(v) - LEFT);
        out.push(`<rect x="${LEFT}" y="${by}" width="${w.toFixed(1)}" height="${BAR}" fill="${s.color}"><title>${esc(`${g.label} ${s.key}: ${label(v)} ms`)}</title></rect>`);
        out.push(`<text x="${(LEFT + w + 4).toFixed(1)}" y="${by + BAR - 1.5}" class="value">${label(v)}</text>`);
      });
    });
    y = plotTop + plotHeight + PANEL_FOOT;
  }
  const height = y + 10;
  const legend = SERIES.map(
    (s, i) => `<rect x="${WIDTH - 250 + i * 80}" y="34" width="12" height="12" fill="${s.color}"/><text x="${WIDTH - 234 + i * 80}" y="45" class="label">${s.key}</text>`,
  ).join('');
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="Helvetica, Arial, sans-serif">`,
    '<style>.title{font-size:18px;font-weight:bold;fill:#222}.sub{font-size:12px;fill:#555}.panel{font-size:14px;font-weight:bold;fill:#333}' +
      '.label{font-size:12px;fill:#333}.value{font-size:10px;fill:#333}.tick{font-size:10px;fill:#666}.grid{stroke:#e3e3e3;stroke-width:1}</style>',
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="20" y="28" class="title">${esc(title)}</text>`,
    `<text x="20" y="48" class="sub">${esc(subtitle)}</text>`,
    legend,
    ...out,
    '</svg>',
    '',
  ].join('\n');
}
