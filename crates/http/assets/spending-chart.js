"use strict";
/**
 * Draws the credits spent per UTC day by each model, from usage rows grouped `day,model`, into
 * `chart` (one uPlot series per model, every day from `from` to `to` included, YYYY-MM-DD).
 * Writes the models drawn to `chart.dataset.models`; with no rows, says `emptyText` in `empty`.
 * Shared by the account page and the console.
 */
function drawSpendingChart(chart, empty, emptyText, rows, from, to, width) {
  const days = [];
  for (let t = Date.parse(from); t <= Date.parse(to); t += 86400 * 1000) days.push(t / 1000);
  const models = [...new Set(rows.map((row) => row.model))].sort();
  const spent = models.map((model) => days.map((t) => {
    const row = rows.find((r) => r.model === model && Date.parse(r.day) / 1000 === t);
    return row ? row.credits_spent : 0;
  }));
  chart.replaceChildren();
  chart.dataset.models = models.join(",");
  empty.textContent = models.length ? "" : emptyText;
  if (!models.length) return;
  const palette = ["#2f6fec", "#e4572e", "#17b890", "#f3a712", "#8e44ad", "#5b6577", "#d81159"];
  new uPlot({
    width: Math.min(width, document.body.clientWidth - 80), height: 280,
    scales: { x: { time: true } },
    series: [{}, ...models.map((model, i) => ({ label: model, stroke: palette[i % palette.length], width: 2, points: { show: true } }))],
    axes: [{}, { label: "credits" }],
  }, [days, ...spent], chart);
}
