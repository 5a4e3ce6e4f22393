// A dependency-free SVG of two bar charts: handoff p50 (ms, lower is better) and contended
// acquisitions/s (higher is better), one bar per library.

interface Bar {
  label: string;
  value: number;
}

function panel(title: string, bars: Bar[], x: number, width: number, unit: string): string {
  const top = 40;
  const rowHeight = 34;
  const labelWidth = 130;
  const max = Math.max(...bars.map((b) => b.value), 1e-9);
  const rows = bars.map((bar, i) => {
    const y = top + i * rowHeight;
    const w = Math.max(1, ((width - labelWidth - 90) * bar.value) / max);
    return [
      `<text x="${x + labelWidth - 8}" y="${y + 17}" text-anchor="end">${bar.label}</text>`,
      `<rect x="${x + labelWidth}" y="${y + 4}" width="${w.toFixed(1)}" height="20" fill="${bar.label === 'rlock' ? '#2a6fdb' : bar.label.includes('floor') ? '#9aa5b1' : '#e0863a'}"/>`,
      `<text x="${x + labelWidth + w + 6}" y="${y + 17}">${bar.value} ${unit}</text>`,
    ].join('');
  });
  return `<text x="${x}" y="22" font-weight="bold">${title}</text>${rows.join('')}`;
}

export function chart(handoffP50: Bar[], contendedRate: Bar[]): string {
  const height = 40 + 34 * Math.max(handoffP50.length, contendedRate.length) + 10;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="960" height="${height}" font-family="sans-serif" font-size="13">`,
    '<rect width="100%" height="100%" fill="white"/>',
    panel('Handoff p50, ms (lower is better)', handoffP50, 10, 470, 'ms'),
    panel('Contended acquisitions/s (higher is better)', contendedRate, 490, 470, '/s'),
    '</svg>',
  ].join('\n');
}

/** One library's acquisitions/s at each process count. */
export interface Series {
  label: string;
  points: [processes: number, acqPerSec: number][];
}

const SERIES_COLOURS: Record<string, string> = { rlock: '#2a6fdb', 'rlock fair': '#2bb673', 'redis-semaphore': '#e0863a' };

function linePanel(title: string, series: Series[], x: number, width: number, height: number): string {
  const [left, top, bottom] = [60, 58, 40];
  const plotWidth = width - left - 34;
  const plotHeight = height - top - bottom;
  const xs = [...new Set(series.flatMap((s) => s.points.map(([p]) => p)))].sort((a, b) => a - b);
  const max = Math.max(...series.flatMap((s) => s.points.map(([, v]) => v)), 1);
  const step = 10 ** Math.floor(Math.log10(max));
  const yMax = Math.ceil(max / step) * step;
  // The process counts double each step: evenly spaced, as on a log axis.
  const px = (p: number): number => x + left + (xs.length === 1 ? plotWidth / 2 : (xs.indexOf(p) * plotWidth) / (xs.length - 1));
  const py = (v: number): number => top + plotHeight - (v / yMax) * plotHeight;
  const grid = Array.from({ length: yMax / step + 1 }, (_, i) => i * step).map(
    (v) => `<line x1="${x + left}" x2="${x + left + plotWidth}" y1="${py(v).toFixed(1)}" y2="${py(v).toFixed(1)}" stroke="#ddd"/><text x="${x + left - 6}" y="${(py(v) + 4).toFixed(1)}" text-anchor="end">${v}</text>`,
  );
  const ticks = xs.map((p) => `<text x="${px(p).toFixed(1)}" y="${top + plotHeight + 18}" text-anchor="middle">${p} × ${32 / p}</text>`);
  const lines = series.map((s, i) => {
    const colour = SERIES_COLOURS[s.label] ?? '#666';
    const path = s.points.map(([p, v]) => `${px(p).toFixed(1)},${py(v).toFixed(1)}`).join(' ');
    const dots = s.points.map(([p, v]) => `<circle cx="${px(p).toFixed(1)}" cy="${py(v).toFixed(1)}" r="3" fill="${colour}"/>`).join('');
    const legend = `<rect x="${x + left + i * 130}" y="32" width="12" height="12" fill="${colour}"/><text x="${x + left + 18 + i * 130}" y="42">${s.label}</text>`;
    return `<polyline points="${path}" fill="none" stroke="${colour}" stroke-width="2"/>${dots}${legend}`;
  });
  return [
    `<text x="${x}" y="22" font-weight="bold">${title}</text>`,
    ...grid,
    ...ticks,
    `<text x="${x + left + plotWidth / 2}" y="${height - 6}" text-anchor="middle">processes × tasks each</text>`,
    ...lines,
  ].join('');
}

/** A dependency-free SVG: acquisitions/s against the number of processes, one panel per critical section. */
export function scalingChart(panels: { title: string; series: Series[] }[]): string {
  const [width, height] = [480, 300];
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width * panels.length}" height="${height}" font-family="sans-serif" font-size="13">`,
    '<rect width="100%" height="100%" fill="white"/>',
    ...panels.map((panel, i) => linePanel(panel.title, panel.series, i * width + 10, width - 10, height)),
    '</svg>',
  ].join('\n');
}
