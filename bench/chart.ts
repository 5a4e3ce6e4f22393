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
