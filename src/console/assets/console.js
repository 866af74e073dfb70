// svc console's one script: keyboard shortcuts and the application page's charts (uPlot). Every
// page works without it.
(() => {
  // g f / g a / g e go to Fleet, Applications, Events; / focuses the filter.
  let awaitingPage = false;
  document.addEventListener('keydown', (event) => {
    const target = event.target;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement) return;
    if (event.key === '/') {
      const filter = document.querySelector('form.filter input');
      if (filter) {
        event.preventDefault();
        filter.focus();
        filter.select();
      }
      return;
    }
    if (awaitingPage) {
      awaitingPage = false;
      const link = document.querySelector(`header nav a[data-key="${event.key}"]`);
      if (link) {
        event.preventDefault();
        link.click();
      }
      return;
    }
    if (event.key === 'g') awaitingPage = true;
  });

  // The filter narrows the table as one types; the form's submit does the same on the server.
  document.addEventListener('input', (event) => {
    const input = event.target;
    if (!(input instanceof HTMLInputElement) || !input.dataset.filter) return;
    const wanted = input.value.trim().toLowerCase();
    const table = document.querySelector(input.dataset.filter);
    if (!table) return;
    // Rows come in groups (src/console/pages.ts rowGroups); a group left with no row is hidden
    // too, so an unrendered one does not keep the height it was guessed at.
    for (const group of table.querySelectorAll('.grid-body')) {
      let shown = 0;
      for (const row of group.querySelectorAll(':scope > [role="row"]')) {
        row.hidden = wanted !== '' && !row.textContent.toLowerCase().includes(wanted);
        if (!row.hidden) shown++;
      }
      group.hidden = shown === 0 && wanted !== '';
    }
  });

  function color(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  function drawCharts() {
    const block = document.getElementById('series');
    if (!block || typeof window.uPlot !== 'function') return;
    const series = JSON.parse(block.textContent);
    const axis = {
      stroke: color('--muted'),
      grid: { stroke: color('--line'), width: 1 },
      ticks: { stroke: color('--line') },
    };
    const charts = {
      requests: [
        {
          label: 'requests',
          values: series.requests,
          stroke: color('--chart-1'),
          fill: `${color('--chart-1')}33`,
        },
      ],
      errors: [{ label: '5xx %', values: series.errorRate, stroke: color('--chart-2') }],
      latency: [
        { label: 'p50 ms', values: series.p50, stroke: color('--chart-1') },
        { label: 'p99 ms', values: series.p99, stroke: color('--chart-2') },
      ],
    };
    for (const element of document.querySelectorAll('[data-chart]')) {
      const lines = charts[element.dataset.chart];
      if (!lines) continue;
      const width = Math.max(280, element.clientWidth);
      const options = {
        width,
        height: 200,
        axes: [axis, axis],
        series: [
          {},
          ...lines.map((l) => ({
            label: l.label,
            stroke: l.stroke,
            fill: l.fill,
            width: 2,
            spanGaps: false,
            // A step with requests between empty ones is a lone value: drawn as a point.
            points: { show: true, size: 6 },
          })),
        ],
        scales: { x: { time: true } },
      };
      new window.uPlot(options, [series.times, ...lines.map((l) => l.values)], element);
      element.dataset.drawn = 'true';
    }
  }
  document.addEventListener('DOMContentLoaded', drawCharts);
})();
