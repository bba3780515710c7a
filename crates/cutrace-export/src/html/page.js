// The page's script: draws each timeline from the levels of detail in #cutrace-data, zooms it
// (buttons, drag, wheel), and sorts tables on a click of a column head. No library, no network.
// The page's Content-Security-Policy runs this script by its hash and nothing else inline: every
// handler is attached here with addEventListener (never an onclick= attribute) and styles are
// set through element.style (never a style= attribute). It stores nothing (no cookies, no
// localStorage), so it works unchanged in a sandboxed iframe with an opaque origin.
(function () {
  'use strict';
  var NS = 'http://www.w3.org/2000/svg';
  var B64 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz+/';
  var KIND = ['', 'host', 'queued', 'unknown'];
  // The critical path's classes, by the path lane's second character (html/path.rs CLASSES).
  var CP = ['', 'host', 'compute', 'comm', 'copy', 'launch', 'sync', 'wait', 'unexplained'];
  var CPW = ['', 'host time in ops and calls', 'GPU compute', 'communication', 'copies and memsets',
    'launch gaps (launch to start, queued behind the stream)', 'sync returns', 'stream waits',
    'no recorded cause'];
  var data = JSON.parse(document.getElementById('cutrace-data').textContent);

  // Durations as cutrace's text prints them (three decimals, unit by size).
  function fmt(ns) {
    ns = Math.max(0, Math.round(ns));
    if (ns < 1000) return ns + ' ns';
    var u = ns < 1e6 ? [1e3, 'µs'] : ns < 1e9 ? [1e6, 'ms'] : [1e9, 's'];
    return (ns / u[0]).toFixed(3) + ' ' + u[1];
  }
  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  function Timeline(root, t) {
    var lod = t.lod, svg = root.querySelector('.tl-svg');
    var W = 1000, LABEL = 130, LANE = 22, STREAM = 12, PAD = 4;
    var span = Math.max(1, lod.span_ns), view = [0, span];
    var rangeEl = root.querySelector('.tl-range'), levelEl = root.querySelector('.tl-level');
    // A job's lanes are one per rank (`rank` set): thinner when there are many.
    var nRanks = lod.lanes.filter(function (l) { return l.rank !== undefined; }).length;
    var ranks = nRanks > 0;
    if (nRanks > 64) LANE = 10;
    var maxLevels = lod.lanes.reduce(function (m, l) { return Math.max(m, l.levels.length); }, 0);
    // Host threads (role.host) and a GPU's copies (role 'copies') draw two shares a bucket.
    var pids = {};
    lod.lanes.forEach(function (l) { if (l.role && l.role.host) pids[l.pid] = 1; });
    var onePid = Object.keys(pids).length < 2;
    var lanes = lod.lanes.map(function (l) {
      var gpu = l.stream === null && !l.role;
      var h = gpu || l.role === 'path' ? LANE : STREAM, label, full;
      if (l.rank !== undefined) label = 'rank ' + l.rank;
      else if (l.role === 'path') {
        label = 'critical path';
        full = 'the critical path: the height is the share of the bucket on it, the colour what most of it was';
      }
      else if (l.role === 'copies') label = 'GPU ' + l.device + ' copies';
      else if (l.role && l.role.host) {
        label = 'host ' + (onePid ? 'tid ' : l.pid + '/') + l.role.host.thread;
        full = 'process ' + l.pid + ', thread ' + l.role.host.thread + ': CPU ops and CUDA calls';
      } else label = gpu ? 'GPU ' + l.device : (l.pid !== null ? 'pid ' + l.pid + ' ' : '') + 'stream ' + l.stream;
      if (label.length > 22) label = label.slice(0, 21) + '…';
      return { lane: l, h: h, label: label, full: full, gpu: gpu };
    });
    // A GPU lane below other lanes gets room above it for its gap marks.
    lanes.forEach(function (L, n) { L.top = L.gpu && n > 0 ? 10 : 0; });
    var height = lanes.reduce(function (a, l) { return a + l.top + l.h + PAD; }, 14);
    svg.setAttribute('viewBox', '0 0 ' + W + ' ' + height);
    svg.style.height = height + 'px';
    var plotW = W - LABEL;
    function x(ns) { return LABEL + (ns - view[0]) / (view[1] - view[0]) * plotW; }

    function draw() {
      while (svg.firstChild) svg.removeChild(svg.firstChild);
      var y = 14, shown = view[1] - view[0], used = 0;
      lanes.forEach(function (L) {
        var l = L.lane, levels = l.levels;
        y += L.top;
        // The coarsest level with at least one bucket per unit of width, else the finest.
        var k = 0;
        while (k < levels.length - 1 && (levels[k].length / 2) * shown / span < plotW) k++;
        used = Math.max(used, k);
        // Bucket width: the finest level's, times the zoom ratio per level above it.
        var w = (l.bucket_ns || (L.gpu ? lod.gpu_bucket_ns : lod.stream_bucket_ns)) *
          Math.pow(lod.zoom, levels.length - 1 - k);
        var s = levels[k], n = s.length / 2;
        var first = Math.max(0, Math.floor(view[0] / w)), last = Math.min(n - 1, Math.ceil(view[1] / w));
        var rank = l.rank !== undefined, path = l.role === 'path', two = !!l.role && !path;
        var attrs = rank ? { 'class': 'lane', 'data-rank': l.rank } :
          { 'class': 'lane', 'data-device': l.device };
        if (l.role === 'copies' || path) attrs['data-role'] = l.role;
        else if (two) { attrs['data-role'] = 'host'; attrs['data-pid'] = l.pid; attrs['data-thread'] = l.role.host.thread; }
        var g = el('g', attrs, svg);
        var txt = el('text', { x: 2, y: y + L.h - 3 }, g);
        txt.textContent = L.label;
        if (L.full) el('title', {}, txt).textContent = L.full;
        var cls = l.role === 'copies' ? ['copy', 'memset'] : ['hostop', 'hostcall'];
        var i = first;
        while (i <= last) {
          var q = s.charAt(2 * i), kind = s.charAt(2 * i + 1), j = i + 1;
          while (j <= last && s.charAt(2 * j) === q && s.charAt(2 * j + 1) === kind) j++;
          var x0 = Math.max(LABEL, x(i * w)), x1 = Math.min(W, x(j * w));
          var busy = B64.indexOf(q) / 63, bw = Math.max(x1 - x0, 0.6);
          if (path) {
            // The share of the bucket on the path, coloured by what most of it was.
            if (busy > 0) {
              var r = el('rect', { 'class': 'cp-' + CP[+kind], x: x0, width: bw,
                y: y + L.h * (1 - busy), height: L.h * busy }, g);
              el('title', {}, r).textContent = 'critical path: ' + Math.round(busy * 100) +
                ' % of ' + fmt((j - i) * w) + ', mostly ' + CPW[+kind];
            }
            i = j;
            continue;
          }
          if (two) {
            // Both characters are shares: the second (calls, memsets) drawn over the first.
            [busy, B64.indexOf(kind) / 63].forEach(function (v, n) {
              // At least 1.5 units tall: a short copy or call in a long bucket stays in sight.
              var vh = Math.max(L.h * v, 1.5);
              if (v > 0) el('rect', { 'class': cls[n], x: x0, width: bw, y: y + L.h - vh, height: vh }, g);
            });
            i = j;
            continue;
          }
          if (busy > 0) {
            el('rect', { 'class': l.stream === null ? 'busy' : 'stream', x: x0, width: bw,
              y: y + L.h * (1 - busy), height: L.h * busy }, g);
          }
          if (rank) {
            // A rank's second character is its communication share, drawn over the busy bar.
            var comm = B64.indexOf(kind) / 63;
            if (comm > 0) {
              el('rect', { 'class': 'comm', x: x0, width: bw, y: y + L.h * (1 - comm), height: L.h * comm }, g);
            }
          } else if (kind !== '0' && busy < 1) {
            el('rect', { 'class': KIND[+kind], x: x0, width: bw, y: y, height: L.h * (1 - busy) }, g);
          }
          i = j;
        }
        if (L.gpu && !rank) {
          t.gaps.forEach(function (gp, n) {
            if (gp.device !== l.device || gp.to_ns < view[0] || gp.from_ns > view[1]) return;
            // The gap's extent (at least 3 units, to be found) and its mark both show its tooltip.
            var a = Math.max(LABEL, x(gp.from_ns)), b = Math.min(W, x(gp.to_ns));
            var hit = el('rect', { 'class': 'gaphit', x: Math.min(a, (a + b) / 2 - 1.5), y: y,
              width: Math.max(b - a, 3), height: L.h, 'data-gap': n }, g);
            var m = el('path', { 'class': 'gapmark', 'data-gap': n, d: 'M' + (x((gp.from_ns + gp.to_ns) / 2) - 4) + ' ' + (y - 9) + 'h8l-4 7z' }, g);
            [hit, m].forEach(function (e) {
              e.addEventListener('mouseenter', function (ev) { showTip(gp, ev); });
              e.addEventListener('mousemove', function (ev) { showTip(gp, ev); });
              e.addEventListener('mouseleave', hideTip);
            });
          });
        }
        y += L.h + PAD;
      });
      rangeEl.textContent = fmt(view[0]) + ' – ' + fmt(view[1]) + ' (' + fmt(shown) + ' shown)';
      rangeEl.setAttribute('data-from', String(Math.round(view[0])));
      rangeEl.setAttribute('data-to', String(Math.round(view[1])));
      levelEl.textContent = 'level ' + (used + 1) + ' of ' + maxLevels;
    }
    // A gap's tooltip: its length and reading, then what the host was doing in it.
    var tip = document.createElement('div');
    tip.className = 'tip';
    tip.hidden = true;
    root.appendChild(tip);
    function showTip(gp, ev) {
      if (tip.getAttribute('data-gap') !== String(t.gaps.indexOf(gp))) {
        while (tip.firstChild) tip.removeChild(tip.firstChild);
        [gp.reading].concat(gp.context).forEach(function (line, n) {
          var d = document.createElement('div');
          if (n === 0) d.className = 'tip-head';
          d.textContent = line;
          tip.appendChild(d);
        });
        tip.setAttribute('data-gap', String(t.gaps.indexOf(gp)));
      }
      var r = root.getBoundingClientRect();
      tip.hidden = false;
      tip.style.left = Math.min(ev.clientX - r.left + 12, Math.max(0, r.width - tip.offsetWidth - 4)) + 'px';
      tip.style.top = (ev.clientY - r.top + 16) + 'px';
    }
    function hideTip() { tip.hidden = true; }
    function zoomTo(a, b) {
      var min = Math.max(lod.gpu_bucket_ns * 4, 1000);
      if (b - a < min) { var c = (a + b) / 2; a = c - min / 2; b = c + min / 2; }
      if (a < 0) { b -= a; a = 0; }
      if (b > span) { a -= b - span; b = span; }
      view = [Math.max(0, a), Math.min(span, b)];
      draw();
    }
    function zoom(f, at) {
      var c = at === undefined ? (view[0] + view[1]) / 2 : at;
      zoomTo(c - (c - view[0]) * f, c + (view[1] - c) * f);
    }
    function nsAt(ev) {
      var r = svg.getBoundingClientRect();
      var px = (ev.clientX - r.left) / r.width * W;
      return view[0] + (Math.max(px, LABEL) - LABEL) / plotW * (view[1] - view[0]);
    }
    // Rows elsewhere on the page (the critical path's steps and segments) zoom to their span.
    root.cutraceZoom = function (a, b) {
      var pad = (b - a) * 0.05;
      zoomTo(a - pad, b + pad);
    };
    root.querySelector('.tl-in').addEventListener('click', function () { zoom(0.25); });
    root.querySelector('.tl-out').addEventListener('click', function () { zoom(4); });
    root.querySelector('.tl-reset').addEventListener('click', function () { zoomTo(0, span); });
    svg.addEventListener('wheel', function (ev) {
      ev.preventDefault();
      zoom(ev.deltaY < 0 ? 0.7 : 1 / 0.7, nsAt(ev));
    }, { passive: false });
    var drag = null, sel = null;
    svg.addEventListener('mousedown', function (ev) { drag = nsAt(ev); });
    svg.addEventListener('mousemove', function (ev) {
      if (drag === null) return;
      var a = Math.min(drag, nsAt(ev)), b = Math.max(drag, nsAt(ev));
      if (!sel) sel = el('rect', { 'class': 'sel', y: 0, height: height }, svg);
      sel.setAttribute('x', x(a)); sel.setAttribute('width', Math.max(0, x(b) - x(a)));
    });
    window.addEventListener('mouseup', function (ev) {
      if (drag === null) return;
      var a = Math.min(drag, nsAt(ev)), b = Math.max(drag, nsAt(ev));
      drag = null;
      if (sel) { sel.remove(); sel = null; }
      if (x(b) - x(a) > 4) zoomTo(a, b);
    });
    draw();
  }

  data.timelines.forEach(function (t) {
    var root = document.getElementById(t.id);
    if (root) Timeline(root, t);
  });

  // A row with data-timeline, data-from and data-to: a click (or Enter) shows that span there.
  Array.prototype.forEach.call(document.querySelectorAll('tr.zoom'), function (tr) {
    function go() {
      var root = document.getElementById(tr.getAttribute('data-timeline'));
      if (!root || !root.cutraceZoom) return;
      root.cutraceZoom(+tr.getAttribute('data-from'), +tr.getAttribute('data-to'));
      root.scrollIntoView({ block: 'nearest' });
    }
    tr.addEventListener('click', go);
    tr.addEventListener('keydown', function (ev) { if (ev.key === 'Enter') go(); });
  });

  // Sorting: numbers by each cell's data-sort, text by its content; a second click reverses.
  Array.prototype.forEach.call(document.querySelectorAll('table.sortable'), function (table) {
    var heads = table.querySelectorAll('th');
    Array.prototype.forEach.call(heads, function (th, col) {
      function sort() {
        var desc = th.getAttribute('aria-sort') !== 'descending';
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute('aria-sort'); });
        th.setAttribute('aria-sort', desc ? 'descending' : 'ascending');
        var num = th.getAttribute('data-type') === 'num';
        var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
        function key(r) {
          var c = r.cells[col];
          if (!c) return num ? -Infinity : '';
          return num ? parseFloat(c.getAttribute('data-sort') || '-Infinity') : c.textContent;
        }
        rows.sort(function (a, b) {
          var x = key(a), y = key(b), d = num ? x - y : (x < y ? -1 : x > y ? 1 : 0);
          return desc ? -d : d;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      }
      th.addEventListener('click', sort);
      th.addEventListener('keydown', function (ev) { if (ev.key === 'Enter') sort(); });
    });
  });
  // When the page became interactive, in ms since navigation began (the browser test reads it).
  document.body.setAttribute('data-ready', String(Math.round(performance.now())));
})();
