// gpufleet portal: draws the charts whose data the page carries as JSON, and keeps the
// periodic refreshes out of the way of a reader. No build step; the pages work without
// this file (each chart has its data as a table next to it).
(function () {
  "use strict";
  var palette = ["#1f4e99", "#b35900", "#2e7d32", "#8e24aa", "#c62828", "#00838f", "#5d4037"];

  function draw(canvas) {
    if (canvas.dataset.drawn || typeof window.Chart === "undefined") {
      return;
    }
    var source = document.getElementById(canvas.dataset.chart);
    if (!source) {
      return;
    }
    var spec = JSON.parse(source.textContent);
    var colours = {};
    var datasets = spec.datasets.map(function (d, i) {
      colours[d.key] = palette[i % palette.length];
      return {
        label: d.label,
        data: d.data,
        borderColor: palette[i % palette.length],
        backgroundColor: palette[i % palette.length],
        borderWidth: 2,
        // a series with gaps (telemetry: no reading) shows a lone interval as a dot
        pointRadius: spec.points ? 2 : 0,
        stepped: true
      };
    });
    spec.capacity.forEach(function (c, i) {
      datasets.push({
        label: c.label,
        data: spec.labels.map(function () { return c.value; }),
        borderColor: colours[c.key] || palette[(spec.datasets.length + i) % palette.length],
        borderDash: [6, 4],
        borderWidth: 1,
        pointRadius: 0
      });
    });
    new window.Chart(canvas, {
      type: "line",
      data: { labels: spec.labels, datasets: datasets },
      options: {
        animation: false,
        maintainAspectRatio: false,
        interaction: { mode: "index", intersect: false },
        scales: {
          y: { beginAtZero: true, title: { display: true, text: spec.y_label } },
          x: { ticks: { maxTicksLimit: 8 } }
        }
      }
    });
    canvas.dataset.drawn = "1";
  }

  function drawAll() {
    document.querySelectorAll("canvas[data-chart]").forEach(draw);
    scrollable();
  }

  // A wide table scrolls inside its box (portal.css): where it overflows, the box takes
  // keyboard focus so that it can be scrolled without a pointer; where it fits, it does not.
  function scrollable() {
    document.querySelectorAll(".table-scroll").forEach(function (box) {
      if (box.scrollWidth > box.clientWidth + 1) {
        box.setAttribute("tabindex", "0");
      } else {
        box.removeAttribute("tabindex");
      }
    });
  }

  window.addEventListener("resize", scrollable);

  // A destructive form (cancel a job, revoke a token, take a node down) says what it will
  // do and asks first. Without scripts the form posts at once, as before.
  document.addEventListener("submit", function (evt) {
    var form = evt.target;
    var question = form && form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      evt.preventDefault();
    }
  });

  document.addEventListener("DOMContentLoaded", drawAll);
  document.addEventListener("htmx:afterSettle", drawAll);

  // A periodic refresh replaces its whole region. Not while someone works in it: it
  // would take away their keyboard focus and close the details they opened. The next
  // refresh after they leave brings the region up to date.
  function inUse(region) {
    var active = document.activeElement;
    var focused = active && active !== document.body && region.contains(active);
    return focused || region.querySelector("details[open]") !== null;
  }

  document.addEventListener("htmx:beforeRequest", function (evt) {
    var region = evt.detail.elt;
    var trigger = region && region.getAttribute("hx-trigger");
    if (trigger && trigger.indexOf("every ") === 0 && inUse(region)) {
      evt.preventDefault();
    }
  });
})();
