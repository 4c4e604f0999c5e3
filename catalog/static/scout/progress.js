// Scout admin: refresh a running job's progress panel (templates/admin/progress/panel.html) by polling
// its JSON endpoint until the job ends. No dependencies; text only (textContent), never HTML.
(function () {
  "use strict";

  function seconds(value) {
    if (value === null || value === undefined) return "";
    if (value < 90) return Math.round(value) + " s";
    if (value < 5400) return Math.round(value / 60) + " min";
    return (value / 3600).toFixed(1) + " h";
  }

  function describe(s) {
    // A sync queued for a worker: no stage or estimate yet, only how long it has waited.
    if (s.status === "queued") return s.stage + " (queued " + seconds(s.elapsed_seconds) + " ago)";
    if (s.running) {
      var text = s.stage;
      if (s.total > 0) {
        text += ": " + s.done.toLocaleString() + " of " + s.total.toLocaleString() + " " + s.unit;
        if (s.percent !== null) text += " (" + s.percent + "%)";
      }
      text += s.eta_seconds !== null ? ", about " + seconds(s.eta_seconds) + " left" : ", estimating time left";
      return text + " (running " + seconds(s.elapsed_seconds) + ")";
    }
    if (s.status === "failed") return "failed after " + seconds(s.elapsed_seconds) + ": " + s.error;
    return s.status + " in " + (s.duration_seconds === null ? "?" : seconds(s.duration_seconds));
  }

  function render(panel, s) {
    var bar = panel.querySelector(".scout-progress-bar");
    var text = panel.querySelector(".scout-progress-text");
    bar.hidden = !s.running;
    if (s.percent === null) bar.removeAttribute("value");
    else bar.value = s.percent;
    text.textContent = describe(s);
    panel.dataset.status = s.status;
    panel.dataset.running = s.running ? "1" : "0";
  }

  function poll(panel, every) {
    fetch(panel.dataset.scoutProgress, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json();
      })
      .then(function (s) {
        render(panel, s);
        if (s.running) setTimeout(function () { poll(panel, every); }, every);
      })
      .catch(function () {
        setTimeout(function () { poll(panel, every); }, every * 5); // a restart or a blip: try again, slower
      });
  }

  function start() {
    document.querySelectorAll("[data-scout-progress]").forEach(function (panel) {
      if (panel.dataset.started) return;
      panel.dataset.started = "1";
      var every = parseInt(panel.dataset.pollMs, 10) || 1000;
      var first = JSON.parse(panel.dataset.snapshot);
      render(panel, first);
      if (first.running) setTimeout(function () { poll(panel, every); }, every);
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
