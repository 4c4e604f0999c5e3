// Draws the operations dashboard from the figures the page embeds (json_script), with Chart.js.
(function () {
  "use strict";
  const figures = JSON.parse(document.getElementById("dashboard-figures").textContent);
  const colors = ["#417690", "#e07a5f", "#81b29a", "#f2cc8f", "#3d405b", "#9c6644", "#6d597a", "#b56576"];
  const drawn = {};
  function draw(id, config) {
    const canvas = document.getElementById(id);
    if (!canvas) return;  // nothing in this window: the page says so instead of drawing empty axes
    config.options = Object.assign({animation: false, responsive: true, maintainAspectRatio: false}, config.options || {});
    drawn[id] = new Chart(canvas, config);
  }
  draw("chart-traffic", {
    type: "line",
    data: {
      // The server's ticks: the admin's time zone and 24-hour clock, as every other time in the admin.
      labels: figures.ticks,
      datasets: [
        {label: "searches", data: figures.searches, borderColor: colors[0], tension: 0.2},
        {label: "executions", data: figures.executions, borderColor: colors[2], tension: 0.2},
        {label: "failed executions", data: figures.execution_failures, borderColor: colors[1], tension: 0.2},
      ],
    },
    options: {scales: {
      x: {title: {display: true, text: "time (" + figures.time_zone + ")"}},
      y: {beginAtZero: true, ticks: {precision: 0}},
    }},
  });
  const pct = ["p50", "p95", "p99"];
  draw("chart-latency", {
    type: "bar",
    data: {
      labels: pct,
      datasets: [
        {label: "tool_search", data: pct.map((p) => figures.search_latency_ms[p]), backgroundColor: colors[0]},
        {label: "execute_tool", data: pct.map((p) => figures.execute_latency_ms[p]), backgroundColor: colors[2]},
      ],
    },
    // On a logarithmic axis: a search takes tens of milliseconds and a call to a stdio server seconds, and on a linear
    // one the searches' bars were a line along the axis, unreadable beside the calls' (the demo: 100 ms to 4,000 ms).
    options: {scales: {y: {type: "logarithmic", title: {display: true, text: "ms (logarithmic)"}}}},
  });
  // The count axis names its unit and period: it read 0..1 with nothing to say what was counted.
  const bars = (id, pairs, color, unit) => draw(id, {
    type: "bar",
    data: {labels: pairs.map((p) => p[0]), datasets: [{label: "calls", data: pairs.map((p) => p[1]), backgroundColor: color}]},
    options: {indexAxis: "y", plugins: {legend: {display: false}}, scales: {x: {
      beginAtZero: true, ticks: {precision: 0}, title: {display: true, text: unit + " in the " + figures.window_label},
    }}},
  });
  bars("chart-tools", figures.top_tools, colors[2], "successful calls");
  bars("chart-failures", figures.failures_by_server, colors[1], "failed calls");
  // A bar leads where the link under the chart does (the same order): those calls in the audit trail.
  const failureLinks = document.querySelectorAll("#chart-failures-links a");
  if (drawn["chart-failures"] && failureLinks.length) {
    drawn["chart-failures"].options.onClick = (event, bars) => {
      if (bars.length && failureLinks[bars[0].index]) window.location.href = failureLinks[bars[0].index].href;
    };
    drawn["chart-failures"].options.onHover = (event, bars) => {
      event.native.target.style.cursor = bars.length ? "pointer" : "default";
    };
  }
  // A status in the colour and name of its badge (admin.css): green succeeded/active, red failed/unavailable. The
  // palette's order drew "failed" blue and "success" orange.
  const names = JSON.parse(document.getElementById("dashboard-status-names").textContent);
  const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  const statusColors = {
    active: css("--scout-ok"), success: css("--scout-ok"), degraded: css("--scout-warn"), partial: css("--scout-warn"),
    unavailable: css("--scout-bad"), failed: css("--scout-bad"), running: css("--scout-info"),
    disabled: css("--scout-muted"), archived: "#a8adb5", skipped: "#a8adb5",
  };
  const doughnut = (id, counts) => draw(id, {
    type: "doughnut",
    data: {
      labels: Object.keys(counts).map((status) => names[status] || status),
      datasets: [{data: Object.values(counts), backgroundColor: Object.keys(counts).map((status) => statusColors[status] || css("--scout-muted"))}],
    },
  });
  doughnut("chart-syncs", figures.syncs);
  doughnut("chart-servers", figures.servers);
  window.scoutDashboardCharts = drawn;  // for tests and the curious
})();
