// abide serve dashboard: loads the server's chart history (/dashboard/history.json: the
// last hour, a sample every 5 s) once, then polls /dashboard/state.json, appends each answer
// to that history in the page and draws it with uPlot. Everything from the server is written with textContent (never as
// markup). Actions send the token the operator typed (sessionStorage, this tab only).
(function () {
  "use strict";

  var STATES = ["queued", "in_flight", "pending", "submitted", "deferred", "failed"];
  // Colours readable on white (contrast >= 4.5:1) and told apart by dash pattern too.
  var COLOURS = ["#1f5fbf", "#b3261e", "#1b6e35", "#8a4b00", "#6a1b9a", "#333333"];
  var DASHES = [[], [8, 4], [2, 3], [10, 3, 2, 3], [4, 4], [1, 2]];
  // Live points kept beyond those loaded from the server's history.
  var MAX_POINTS = 600;
  var maxPoints = MAX_POINTS;
  var TOKEN_KEY = "abide-token";

  var params = new URLSearchParams(location.search);
  var interval = Math.min(Math.max(Number(params.get("interval_ms")) || 1000, 250), 60000);
  var token = sessionStorage.getItem(TOKEN_KEY) || "";

  var hist = { t: [], states: {}, age: [], providers: {} };
  STATES.forEach(function (s) { hist.states[s] = []; });
  var charts = {};

  function $(id) { return document.getElementById(id); }

  function status(text) {
    var el = $("status");
    if (el.textContent !== text) el.textContent = text;
  }

  function fmt(v, digits) {
    if (v === null || v === undefined || Number.isNaN(v)) return "–";
    if (Number.isInteger(v)) return String(v);
    return v.toFixed(digits === undefined ? 2 : digits);
  }

  function authHeaders(extra) {
    var h = extra || {};
    if (token) h.Authorization = "Bearer " + token;
    return h;
  }

  function push(arr, v) {
    arr.push(v === undefined ? null : v);
    if (arr.length > maxPoints) arr.shift();
  }

  function last(a) { return a.length ? a[a.length - 1] : null; }

  // `a` as `n` points: what is missing is null (a gap on the chart).
  function column(a, n) {
    var out = (a || []).slice(0, n);
    while (out.length < n) out.push(null);
    return out;
  }

  // The server's samples (columns aligned with `t`, Unix seconds) as the start of the page's
  // history; returns how many points it holds.
  function loadHistory(h) {
    var n = (h.t || []).length;
    if (!n) return 0;
    maxPoints = n + MAX_POINTS;
    hist.t = h.t.slice();
    STATES.forEach(function (s) { hist.states[s] = column((h.counts || {})[s], n); });
    hist.age = column(h.oldest_pending_age_secs, n);
    (h.providers || []).forEach(function (p) {
      hist.providers[p.name] = {
        pace: column(p.pace_per_sec, n),
        ceiling: column(p.ceiling_per_sec, n),
        advertised: column(p.advertised_rate_per_sec, n),
        target: column(p.target_rate_per_sec, n),
        throttle: column(p.throttle_rate, n),
      };
    });
    return n;
  }

  // The server's time of a state (its `now`), so live points line up with its history.
  function serverTime(d) {
    var t = d.now ? Date.parse(d.now) / 1000 : NaN;
    return Number.isFinite(t) ? t : Date.now() / 1000;
  }

  function width(el) {
    return Math.max(300, Math.floor((el.parentElement || el).clientWidth || 600) - 8);
  }

  function makeChart(el, label, names, yLabel) {
    var series = [{ label: "time" }];
    names.forEach(function (n, i) {
      series.push({
        label: n,
        stroke: COLOURS[i % COLOURS.length],
        dash: DASHES[i % DASHES.length],
        width: 2,
        value: function (u, v) { return fmt(v); },
      });
    });
    var opts = {
      title: label,
      width: width(el),
      height: 220,
      series: series,
      axes: [{}, { label: yLabel }],
      scales: { x: { time: true } },
    };
    var data = [[]];
    names.forEach(function () { data.push([]); });
    return new uPlot(opts, data, el);
  }

  function setChart(id, data, caption) {
    var c = charts[id];
    if (!c) return;
    c.setData(data);
    var el = $(id);
    el.setAttribute("data-points", String(data[0].length));
    var cap = $(id + "-caption");
    if (cap) cap.textContent = caption;
  }

  function providerHist(name) {
    if (!hist.providers[name]) {
      var h = { pace: [], ceiling: [], advertised: [], target: [], throttle: [] };
      // Align with the points taken before this provider first appeared.
      hist.t.slice(0, -1).forEach(function () {
        Object.keys(h).forEach(function (k) { h[k].push(null); });
      });
      hist.providers[name] = h;
    }
    return hist.providers[name];
  }

  function ensureProviderChart(i, name) {
    var id = "chart-pace-" + i;
    if (charts[id]) return id;
    var fig = document.createElement("figure");
    var div = document.createElement("div");
    div.id = id;
    div.className = "chart";
    div.setAttribute("role", "img");
    div.setAttribute("data-provider", name);
    div.setAttribute("aria-label", "Pace, learned ceiling, advertised limit and target of " + name + " over time, requests per second");
    var cap = document.createElement("figcaption");
    cap.id = id + "-caption";
    fig.appendChild(div);
    fig.appendChild(cap);
    $("provider-charts").appendChild(fig);
    charts[id] = makeChart(div, name + ": pace vs limits (req/s)",
      ["pace", "learned ceiling", "advertised limit", "target"], "req/s");
    return id;
  }

  function cell(tr, text, header) {
    var td = document.createElement(header ? "th" : "td");
    if (header) td.scope = "row";
    td.textContent = text;
    tr.appendChild(td);
    return td;
  }

  function fillProviders(providers) {
    var tbody = $("providers").tBodies[0];
    tbody.replaceChildren();
    providers.forEach(function (p) {
      var tr = document.createElement("tr");
      var lp = p.last_pause || {};
      var paused = p.paused_for_secs !== null && p.paused_for_secs > 0;
      tr.setAttribute("data-provider", p.name);
      if (paused) tr.className = "paused";
      cell(tr, p.name, true);
      cell(tr, fmt(p.in_flight ? p.in_flight.on_wire : null)).className = "on-wire";
      cell(tr, fmt(p.pace_per_sec));
      cell(tr, fmt(p.ceiling_per_sec));
      cell(tr, fmt(p.advertised_rate_per_sec));
      cell(tr, paused ? fmt(p.paused_for_secs, 1) : "not paused");
      cell(tr, lp.reason || "–").className = "pause-reason";
      cell(tr, lp.retry_after_raw === undefined || lp.retry_after_raw === null ? "–" : lp.retry_after_raw).className = "retry-after";
      cell(tr, lp.at || "–");
      tbody.appendChild(tr);
    });
  }

  function fillRemote(remote) {
    var tbody = $("remote").tBodies[0];
    tbody.replaceChildren();
    Object.keys(remote || {}).sort().forEach(function (code) {
      var tr = document.createElement("tr");
      cell(tr, code, true);
      cell(tr, String(remote[code]));
      tbody.appendChild(tr);
    });
  }

  // Results of actions stay listed (newest first): the row they came from may vanish at
  // the next poll (a requeued item leaves DEFERRED).
  function logAction(text) {
    var li = document.createElement("li");
    li.textContent = new Date().toLocaleTimeString() + " " + text;
    var list = $("actions");
    list.insertBefore(li, list.firstChild);
    while (list.children.length > 20) list.removeChild(list.lastChild);
  }

  function requeue(id, button, out) {
    button.disabled = true;
    out.textContent = "requeueing…";
    fetch("/v1/requeue", {
      method: "POST",
      headers: authHeaders({ "Content-Type": "application/json" }),
      body: JSON.stringify({ ids: [id] }),
    }).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (body) {
        if (r.ok) {
          out.textContent = "requeued (" + body.requeued + ")";
          logAction("Requeued " + id + ": " + body.requeued + " item(s) back to QUEUED.");
        } else {
          out.textContent = "refused: HTTP " + r.status + (r.status === 401 ? " (enter the API token)" : "");
          logAction("Requeue of " + id + " refused: HTTP " + r.status +
            (r.status === 401 ? " (the API token is needed)." : "."));
          button.disabled = false;
        }
      });
    }).catch(function (e) {
      out.textContent = "failed: " + e.message;
      logAction("Requeue of " + id + " failed: " + e.message + ".");
      button.disabled = false;
    });
  }

  // Rows are kept while an item stays listed, so a result next to a button survives polls.
  function fillRecent(items) {
    var tbody = $("recent").tBodies[0];
    var keep = {};
    Array.prototype.forEach.call(tbody.rows, function (tr) { keep[tr.getAttribute("data-id")] = tr; });
    var rows = [];
    items.forEach(function (it) {
      var key = it.id + "|" + it.state;
      var tr = keep[it.id];
      if (tr && tr.getAttribute("data-key") === key) { rows.push(tr); return; }
      tr = document.createElement("tr");
      tr.setAttribute("data-id", it.id);
      tr.setAttribute("data-key", key);
      tr.setAttribute("data-state", it.state);
      cell(tr, it.id, true);
      cell(tr, it.provider);
      cell(tr, it.state);
      cell(tr, it.reason || "–");
      cell(tr, it.last_provider_code || "–");
      cell(tr, String(it.attempts));
      var td = document.createElement("td");
      if (it.state === "DEFERRED") {
        var b = document.createElement("button");
        b.type = "button";
        b.className = "requeue";
        b.textContent = "Requeue";
        b.setAttribute("aria-label", "Requeue item " + it.id);
        var out = document.createElement("span");
        out.className = "result";
        out.setAttribute("aria-live", "polite");
        b.addEventListener("click", function () { requeue(it.id, b, out); });
        td.appendChild(b);
        td.appendChild(document.createTextNode(" "));
        td.appendChild(out);
      } else {
        td.textContent = "–";
      }
      tr.appendChild(td);
      rows.push(tr);
    });
    // Move only what changed: a row taken out of the document loses keyboard focus, and
    // the operator may be on its Requeue button.
    rows.forEach(function (tr, i) {
      if (tbody.rows[i] !== tr) tbody.insertBefore(tr, tbody.rows[i] || null);
    });
    while (tbody.rows.length > rows.length) tbody.removeChild(tbody.rows[rows.length]);
  }

  // Appends a state to the history; uPlot needs increasing times, so a state whose time is
  // not after the last point (the server's clock stepped back) is not charted.
  function append(d) {
    var now = serverTime(d);
    if (hist.t.length && now <= last(hist.t)) return;
    push(hist.t, now);
    STATES.forEach(function (s) { push(hist.states[s], d.counts ? d.counts[s] : null); });
    push(hist.age, d.oldest_pending_age_secs);
    var seen = {};
    (d.providers || []).forEach(function (p) {
      seen[p.name] = true;
      var h = providerHist(p.name);
      push(h.pace, p.pace_per_sec);
      push(h.ceiling, p.ceiling_per_sec);
      push(h.advertised, p.advertised_rate_per_sec);
      push(h.target, p.target_rate_per_sec);
      push(h.throttle, p.throttle_rate);
    });
    Object.keys(hist.providers).forEach(function (name) {
      if (!seen[name]) {
        var h = hist.providers[name];
        Object.keys(h).forEach(function (k) { push(h[k], null); });
      }
    });
  }

  var fromServer = 0;
  function draw() {
    setChart("chart-states", [hist.t].concat(STATES.map(function (s) { return hist.states[s]; })),
      "Now: " + STATES.map(function (s) { return s + " " + fmt(last(hist.states[s])); }).join(", ") +
      " (" + hist.t.length + " points" + (fromServer ? ", " + fromServer + " loaded from the server on opening" : "") + ")");
    setChart("chart-age", [hist.t, hist.age],
      "Now: oldest waiting item " + fmt(last(hist.age), 1) + " s");

    var names = Object.keys(hist.providers);
    names.forEach(function (name, i) {
      var id = ensureProviderChart(i, name);
      var h = hist.providers[name];
      setChart(id, [hist.t, h.pace, h.ceiling, h.advertised, h.target],
        name + " now: pace " + fmt(last(h.pace)) + "/s, learned ceiling " + fmt(last(h.ceiling)) +
        "/s, advertised " + fmt(last(h.advertised)) + "/s, target " + fmt(last(h.target)) + "/s");
    });
    if (!charts["chart-throttle"] || charts["chart-throttle"].series.length !== names.length + 1) {
      if (charts["chart-throttle"]) charts["chart-throttle"].destroy();
      var el = $("chart-throttle");
      el.replaceChildren();
      charts["chart-throttle"] = makeChart(el, "Throttled fraction of responses", names, "ratio");
    }
    setChart("chart-throttle", [hist.t].concat(names.map(function (n) { return hist.providers[n].throttle; })),
      "Now: " + names.map(function (n) { return n + " " + fmt(last(hist.providers[n].throttle), 3); }).join(", "));
  }

  function update(d) {
    append(d);
    STATES.forEach(function (s) {
      var el = $("count-" + s);
      if (el) el.textContent = fmt(d.counts ? d.counts[s] : null);
    });
    $("oldest-age").textContent = fmt(d.oldest_pending_age_secs);
    draw();
    fillProviders(d.providers || []);
    fillRemote(d.remote_counts);
    fillRecent(d.recent || []);
  }

  // The JSON at `path`; null when the server needs the token first.
  function getJson(path) {
    return fetch(path, { headers: authHeaders(), cache: "no-store" }).then(function (r) {
      if (r.status === 401) {
        status("This server needs the API token to show data (--metrics-auth): enter it above.");
        return null;
      }
      if (!r.ok) throw new Error("HTTP " + r.status + " from " + path);
      return r.json();
    });
  }

  // The history once (retried with the polls until it arrives), then the state.
  var historyLoaded = false;
  function loadOnce() {
    if (historyLoaded) return Promise.resolve(true);
    return getJson("/dashboard/history.json").then(function (h) {
      if (!h) return false;
      historyLoaded = true;
      fromServer = loadHistory(h);
      document.body.setAttribute("data-history-points", String(fromServer));
      if (fromServer) draw();
      return true;
    });
  }

  var failures = 0;
  var polls = 0;
  function poll() {
    loadOnce()
      .then(function (ok) { return ok ? getJson("/dashboard/state.json") : null; })
      .then(function (d) {
        if (!d) return;
        update(d);
        failures = 0;
        status("Live: updating every " + interval / 1000 + " s.");
        polls += 1;
        document.body.setAttribute("data-updates", String(polls));
      })
      .catch(function (e) {
        failures += 1;
        status("Update failed (" + e.message + "); retrying.");
      })
      .finally(function () {
        // Back off while the server is unreachable: at most one try per 30 s.
        setTimeout(poll, Math.min(interval * Math.pow(2, Math.min(failures, 5)), 30000));
      });
  }

  $("token").value = token;
  $("token-form").addEventListener("submit", function (e) {
    e.preventDefault();
    token = $("token").value.trim();
    if (token) sessionStorage.setItem(TOKEN_KEY, token); else sessionStorage.removeItem(TOKEN_KEY);
    status(token ? "Token set for this tab." : "No token: read-only.");
  });
  $("token-clear").addEventListener("click", function () {
    token = "";
    $("token").value = "";
    sessionStorage.removeItem(TOKEN_KEY);
    status("Token forgotten: read-only.");
  });

  charts["chart-states"] = makeChart($("chart-states"), "Items per state", STATES, "items");
  charts["chart-age"] = makeChart($("chart-age"), "Oldest waiting item", ["age"], "seconds");
  window.addEventListener("resize", function () {
    Object.keys(charts).forEach(function (id) {
      var el = $(id);
      if (el) charts[id].setSize({ width: width(el), height: 220 });
    });
  });
  poll();
})();
