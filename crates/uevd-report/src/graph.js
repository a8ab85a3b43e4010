// Zoom and pan for the timeline: redraws the visible window from the
// embedded data, merging bars narrower than a pixel exactly as the Rust
// side (graph.rs, Draw::lane) did for the first view.
(function () {
  "use strict";
  var body = document.body;
  window.addEventListener("error", function (ev) {
    body.setAttribute("data-error", String(ev.message));
  });
  var started = performance.now();
  var D = JSON.parse(document.getElementById("data").textContent);
  var parsed = performance.now();
  var svg = document.getElementById("chart");
  var gBars = document.getElementById("bars");
  var gAxis = document.getElementById("axis");
  var gMarks = document.getElementById("marks");
  var I = D.items;
  var n = I.s.length;
  var LW = D.lw, W = D.w;
  var lanes = D.lanes.map(function (l) {
    return { label: l[0], y: l[1], h: l[2], sub: l[3] === 1, from: 0, to: 0 };
  });
  // Items come grouped by lane and sorted by start; pmax[i] is the
  // latest end among the lane's items up to i, so the first item still
  // visible at a time is found by bisection.
  var pmax = new Float64Array(n);
  (function () {
    var i = 0;
    for (var li = 0; li < lanes.length; li++) {
      lanes[li].from = i;
      var m = -Infinity;
      while (i < n && I.l[i] === li) {
        if (I.e[i] > m) m = I.e[i];
        pmax[i] = m;
        i++;
      }
      lanes[li].to = i;
    }
  })();
  var critLane = {};
  lanes.forEach(function (l, i) {
    var m = /^uevd worker (\d+)$/.exec(l.label);
    if (m) critLane[m[1]] = i;
  });

  var v0 = 0, v1 = D.span;

  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c];
    });
  }
  // Same thresholds as blame::dur.
  function dur(ns) {
    if (ns >= 999999500) return (ns / 1e9).toFixed(3) + "s";
    if (ns >= 999500) return (ns / 1e6).toFixed(3) + "ms";
    return Math.floor((ns + 500) / 1000) + "us";
  }
  function secs(us) {
    return ((D.t0 / 1e3 + us) / 1e6).toFixed(6) + "s";
  }

  // Events: [id, seqnum, action, devpath node, subsystem, worker, started,
  // wait, processing, error, [step name, start after the event's, ns...]].
  function path(n) {
    var parts = [];
    while (n >= 0) {
      parts.push(D.paths[2 * n + 1]);
      n = D.paths[2 * n];
    }
    parts.reverse();
    return (n === -2 ? "" : "/") + parts.join("/");
  }
  function title(i, full) {
    var k = I.k[i], r = I.r[i], s;
    if (k === 0) {
      var e = D.ev[r], st = e[10];
      s = D.acts[e[2]] + " " + path(e[3]) + " (" + D.subs[e[4]] + ")\nworker " + e[5] + ", id " + e[0];
      if (e[1] !== null) s += ", seqnum " + e[1];
      s += "\narrived " + secs(e[6] - e[7]) + ", waited " + dur(e[7] * 1000) +
        ", processed " + dur(e[8] * 1000);
      if (full) s += "\nstarted " + secs(e[6]) + ", finished " + secs(e[6] + e[8]);
      if (e[9] !== null) s += "\nfailed: " + e[9];
      if (st.length) {
        s += full ? "\nsteps:" : "\n";
        for (var j = 0; j < st.length; j += 3) {
          if (full) s += "\n  " + D.steps[st[j]] + "  at " + secs(e[6] + st[j + 1]) + "  " + dur(st[j + 2]);
          else s += (j ? ", " : "") + D.steps[st[j]] + " " + dur(st[j + 2]);
        }
      }
      if (I.x[i]) s += "\non the critical path";
      return s;
    }
    if (k === 1) {
      var c = D.ic[r];
      s = c[0];
      if (c[1] !== null) s += " [" + c[1] + "]";
      if (c[2] !== null) s += " @ pid " + c[2];
      s += "\nat " + secs(I.s[i]);
      s += c[3] !== null ? ", took " + dur(c[4]) + ", returned " + c[3] : ", no return logged";
      return s;
    }
    if (k === 2) {
      var m = D.mods[r];
      return "module " + m[0] + "\nat " + secs(I.s[i]) + ", took " + dur(m[2]) + ", " + m[1];
    }
    if (k === 3) {
      var p = D.progs[r], ev = D.ev[p[0]], o = 3 * p[1];
      return D.steps[ev[10][o]] + " for " + path(ev[3]) + "\nat " + secs(ev[6] + ev[10][o + 1]) +
        ", took " + dur(ev[10][o + 2]);
    }
    if (k === 5) {
      var u = D.cpu[r];
      return "the machine's CPUs, " + secs(u[0]) + " to " + secs(u[1]) + "\n" +
        Math.round(u[2] / 10) + "% busy, " + Math.round(u[3] / 10) + "% idle waiting for I/O, " +
        Math.round(u[4] / 10) + "% idle";
    }
    return "initramfs unpacking\n" + secs(I.s[i]) + " to " + secs(I.e[i]) + ", " +
      dur((I.e[i] - I.s[i]) * 1000);
  }
  function label(i) {
    var k = I.k[i], r = I.r[i];
    if (k === 0) return path(D.ev[r][3]);
    if (k === 1) return D.ic[r][0];
    if (k === 2) return D.mods[r][0];
    if (k === 3) {
      var p = D.progs[r], name = D.steps[D.ev[p[0]][10][3 * p[1]]];
      var m = /^program[:=/ ]*(.+)$/.exec(name);
      return m ? m[1] : name;
    }
    if (k === 5) return Math.round(D.cpu[r][2] / 10) + "%";
    return "initramfs unpacking";
  }
  function fit(text, w, keepEnd) {
    var n = Math.floor((w - 4) / D.charW);
    var chars = Array.from(text);
    if (n < 3 || !chars.length) return null;
    if (chars.length <= n) return text;
    if (keepEnd) return "\u2026" + chars.slice(chars.length - (n - 1)).join("");
    return chars.slice(0, n - 1).join("") + "\u2026";
  }
  var CLS = ["ev", "ic", "mod", "prog", "kp", "cpu"];
  var WHAT = ["events", "initcalls", "module loads", "programs", "phases", "CPU spans"];

  function box(lane) {
    return lane.sub ? [lane.y, lane.h - 1] : [lane.y + (D.laneH - D.barH) / 2, D.barH];
  }

  function draw() {
    var drawStart = performance.now();
    var k = W / (v1 - v0);
    var out = [];
    var cnt = { rects: 0, ev: 0, merged: 0 };
    function x(t) {
      return LW + (t - v0) * k;
    }
    function single(lane, i, x0, x1) {
      var crit = I.x[i] === 1;
      var w = Math.max(x1 - x0, crit ? 2 : D.minW);
      var b = box(lane);
      out.push('<rect class="' + CLS[I.k[i]] + '" x="' + x0.toFixed(1) + '" y="' + b[0] +
        '" width="' + w.toFixed(1) + '" height="' + b[1] + '" fill="' + D.pal[I.c[i]] +
        '" data-i="' + i + '"' + (crit ? ' data-crit="1"' : "") + "><title>" +
        esc(title(i, false)) + "</title></rect>");
      if (w >= D.labelMinW && !lane.sub) {
        var l = fit(label(i), w, I.k[i] === 0);
        if (l !== null)
          out.push('<text class="bl" x="' + (x0 + 2).toFixed(1) + '" y="' +
            (b[0] + b[1] - 3.5).toFixed(1) + '">' + esc(l) + "</text>");
      }
      cnt.rects++;
      if (I.k[i] === 0) cnt.ev++;
    }
    function flush(lane, p) {
      if (!p) return;
      if (p.n === 1) return single(lane, p.first, p.x0, p.x1);
      var b = box(lane);
      var w = Math.max(p.x1 - p.x0, D.minW);
      out.push('<rect class="' + CLS[p.kind] + 's" x="' + p.x0.toFixed(1) + '" y="' + b[0] +
        '" width="' + w.toFixed(1) + '" height="' + b[1] + '" fill="' + D.pal[p.colour] +
        '" data-n="' + p.n + '"><title>' + p.n + " " + WHAT[p.kind] + ", " + secs(p.from) +
        " to " + secs(p.to) + " (zoom in for each)</title></rect>");
      cnt.rects++;
      if (p.kind === 0) cnt.merged += p.n;
    }
    lanes.forEach(function (lane) {
      var lo = lane.from, hi = lane.to;
      while (lo < hi) {
        var mid = (lo + hi) >> 1;
        if (pmax[mid] < v0) lo = mid + 1;
        else hi = mid;
      }
      var p = null, crit = [];
      for (var i = lo; i < lane.to && I.s[i] <= v1; i++) {
        if (I.e[i] < v0) continue;
        if (I.x[i] === 1) {
          crit.push(i);
          continue;
        }
        var x0 = x(I.s[i]), x1 = x(I.e[i]);
        if (x1 - x0 >= D.minW) {
          flush(lane, p);
          p = null;
          single(lane, i, x0, x1);
          continue;
        }
        if (p && x0 - p.x1 < D.minW) {
          p.x1 = Math.max(p.x1, x1);
          p.n++;
          p.to = Math.max(p.to, I.e[i]);
          if (I.e[i] - I.s[i] > p.longest) {
            p.longest = I.e[i] - I.s[i];
            p.colour = I.c[i];
          }
        } else {
          flush(lane, p);
          p = { x0: x0, x1: x1, n: 1, colour: I.c[i], longest: I.e[i] - I.s[i], first: i,
            kind: I.k[i], from: I.s[i], to: I.e[i] };
        }
      }
      flush(lane, p);
      crit.forEach(function (i) {
        single(lane, i, x(I.s[i]), x(I.e[i]));
      });
    });
    D.crit.forEach(function (c) {
      var li = critLane[c[0]];
      if (li === undefined) return;
      var y = lanes[li].y + D.laneH / 2;
      out.push('<line class="wait" x1="' + x(c[1]).toFixed(1) + '" x2="' + x(c[2]).toFixed(1) +
        '" y1="' + y + '" y2="' + y + '"/>');
    });
    gBars.innerHTML = out.join("");

    // The time axis: steps of 1, 2 or 5 so that ticks sit ~90 px apart.
    var ax = ['<rect class="axbg" x="' + LW + '" y="0" width="' + W + '" height="' + D.axisH + '"/>'];
    var min = 90 / k, pw = Math.pow(10, Math.floor(Math.log10(Math.max(min, 1e-9)))), step = 10 * pw;
    [1, 2, 5, 10].some(function (m) {
      if (m * pw >= min) { step = m * pw; return true; }
      return false;
    });
    var dec = Math.max(0, Math.ceil(-Math.log10(step / 1e6)));
    var t0us = D.t0 / 1e3;
    for (var t = Math.ceil((t0us + v0) / step) * step - t0us; t <= v1; t += step) {
      var xx = x(t);
      ax.push('<line class="tick" x1="' + xx.toFixed(1) + '" x2="' + xx.toFixed(1) + '" y1="' +
        (D.axisH - 6) + '" y2="' + D.h + '"/><text class="tl" x="' + (xx + 2).toFixed(1) +
        '" y="13">' + ((t0us + t) / 1e6).toFixed(dec) + "s</text>");
    }
    gAxis.innerHTML = ax.join("");
    var mk = [];
    D.marks.forEach(function (m, j) {
      var xm = x(m[0]), end = xm > LW + W - 70;
      mk.push('<line class="mk ' + m[2] + '" x1="' + xm.toFixed(1) + '" x2="' + xm.toFixed(1) +
        '" y1="' + (D.axisH - 14) + '" y2="' + D.h + '"/><text class="ml ' + m[2] + '" x="' +
        (end ? xm - 2 : xm + 2).toFixed(1) + '" y="' + (j % 2 === 0 ? 24 : 31) +
        '" text-anchor="' + (end ? "end" : "start") + '">' + esc(m[1]) + "</text>");
    });
    gMarks.innerHTML = mk.join("");
    svg.setAttribute("data-js-rects", cnt.rects);
    svg.setAttribute("data-js-event-rects", cnt.ev);
    svg.setAttribute("data-js-merged-events", cnt.merged);
    svg.setAttribute("data-draw-ms", (performance.now() - drawStart).toFixed(0));
    showView();
  }

  function showView() {
    document.getElementById("view").textContent =
      secs(v0) + " \u2013 " + secs(v1) + "  (\u00d7" + (D.span / (v1 - v0)).toPrecision(3) + ")";
  }

  var pending = false;
  function redraw() {
    if (pending) return;
    pending = true;
    window.requestAnimationFrame(function () {
      pending = false;
      draw();
    });
  }
  function setView(a, b) {
    var minSpan = 10;
    if (b - a < minSpan) {
      var c = (a + b) / 2;
      a = c - minSpan / 2;
      b = c + minSpan / 2;
    }
    if (b - a > D.span) {
      a = 0;
      b = D.span;
    }
    if (a < 0) { b -= a; a = 0; }
    if (b > D.span) { a -= b - D.span; b = D.span; }
    v0 = a;
    v1 = b;
  }
  function zoom(f, at) {
    var c = at === undefined ? (v0 + v1) / 2 : at;
    setView(c - (c - v0) / f, c + (v1 - c) / f);
    redraw();
  }
  function pan(dx) {
    var d = dx * (v1 - v0) / W;
    setView(v0 + d, v1 + d);
    redraw();
  }
  function timeAt(clientX) {
    var r = svg.getBoundingClientRect();
    var px = (clientX - r.left) * (svg.viewBox.baseVal.width / r.width) - LW;
    return v0 + Math.min(Math.max(px, 0), W) * (v1 - v0) / W;
  }

  document.getElementById("zin").addEventListener("click", function () { zoom(2); });
  document.getElementById("zout").addEventListener("click", function () { zoom(0.5); });
  document.getElementById("zfit").addEventListener("click", function () {
    setView(0, D.span);
    redraw();
  });
  svg.addEventListener("wheel", function (ev) {
    if (ev.ctrlKey || ev.metaKey) {
      ev.preventDefault();
      zoom(ev.deltaY < 0 ? 1.25 : 0.8, timeAt(ev.clientX));
    } else if (ev.shiftKey || Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) {
      ev.preventDefault();
      pan(ev.shiftKey ? ev.deltaY : ev.deltaX);
    }
  }, { passive: false });
  var drag = null;
  svg.addEventListener("mousedown", function (ev) {
    var r = svg.getBoundingClientRect();
    if (ev.clientY - r.top > D.axisH) return;
    drag = ev.clientX;
    ev.preventDefault();
  });
  window.addEventListener("mousemove", function (ev) {
    if (drag === null) return;
    pan(drag - ev.clientX);
    drag = ev.clientX;
  });
  window.addEventListener("mouseup", function () { drag = null; });
  window.addEventListener("keydown", function (ev) {
    if (ev.target && /INPUT|TEXTAREA/.test(ev.target.tagName)) return;
    if (ev.key === "+" || ev.key === "=") zoom(2);
    else if (ev.key === "-") zoom(0.5);
    else if (ev.key === "0") { setView(0, D.span); redraw(); }
    else if (ev.key === "ArrowLeft") pan(-W / 4);
    else if (ev.key === "ArrowRight") pan(W / 4);
  });
  svg.addEventListener("click", function (ev) {
    var t = ev.target.closest ? ev.target.closest("rect[data-i]") : null;
    if (!t) return;
    document.getElementById("detail").textContent = title(+t.getAttribute("data-i"), true);
  });

  // "#t=A,B" (seconds since boot) opens on that window; "#check" redraws
  // the whole boot on the spot, so a test can compare both renderers.
  var h = window.location.hash;
  var m = /t=([\d.]+),([\d.]+)/.exec(h);
  if (m) {
    var t0us = D.t0 / 1e3;
    setView(parseFloat(m[1]) * 1e6 - t0us, parseFloat(m[2]) * 1e6 - t0us);
    draw();
  } else if (h.indexOf("check") >= 0) {
    draw();
  } else {
    showView();
  }
  // Milliseconds since navigation: when the script began (the HTML before
  // it parsed), how long the data took to parse, when it was done.
  svg.setAttribute("data-script-start-ms", started.toFixed(0));
  svg.setAttribute("data-json-ms", (parsed - started).toFixed(0));
  svg.setAttribute("data-ready-ms", performance.now().toFixed(0));
  svg.setAttribute("data-ready", "1");
})();
