(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("tasks").textContent);
  var tasks = data.tasks;
  var storeKey = "cmrkit-assess:" + data.page_id;
  var $ = function (id) { return document.getElementById(id); };

  function keyOf(t) { return t.pair; }

  function load() {
    try {
      var s = JSON.parse(window.localStorage.getItem(storeKey) || "null");
      if (s && typeof s === "object" && s.answers) {
        return { worker: String(s.worker || ""), current: Number(s.current) || 0, answers: s.answers };
      }
    } catch (e) { /* a corrupt entry starts afresh */ }
    return { worker: "", current: 0, answers: {} };
  }
  var state = load();

  function save() {
    try { window.localStorage.setItem(storeKey, JSON.stringify(state)); } catch (e) {
      status("Could not save in this browser (" + e + "); export your answers often.", false);
    }
  }

  function status(text, ok) {
    var el = $("status");
    el.textContent = text;
    el.className = ok ? "ok" : "";
  }

  function answered() {
    var n = 0;
    tasks.forEach(function (t) { if (state.answers[keyOf(t)]) { n += 1; } });
    return n;
  }

  function words(html) {
    var el = document.createElement("span");
    el.innerHTML = html;
    var text = el.textContent.trim();
    return text ? text.split(/\s+/).length : 0;
  }

  function fill(id, parts) {
    var box = $(id);
    box.className = "unit" + (parts.before ? " cut-before" : "") + (parts.after ? " cut-after" : "");
    box.querySelector(".before").innerHTML = parts.before;
    box.querySelector(".main").innerHTML = parts.main;
    box.querySelector(".after").innerHTML = parts.after;
    var more = words(parts.before) + words(parts.after);
    var button = document.querySelector('.unfold[data-for="' + id + '"]');
    button.textContent = more ? "Show the whole text (" + more + " more words)" : "";
    button.setAttribute("data-more", button.textContent);
    box.scrollTop = 0;
  }

  function render() {
    if (state.current < 0 || state.current >= tasks.length) { state.current = 0; }
    var t = tasks[state.current];
    var u = data.units[t.u];
    $("counter").textContent = "Pair " + (state.current + 1) + " of " + tasks.length;
    $("ids").textContent = t.ids;
    fill("query", data.queries[t.q]);
    $("title").innerHTML = u.title;
    $("first").innerHTML = u.first;
    fill("candidate", u);
    $("next").innerHTML = u.next;
    var chosen = state.answers[keyOf(t)];
    Array.prototype.forEach.call($("scale").children, function (b) {
      b.className = Number(b.getAttribute("data-label")) === chosen ? "chosen" : "";
      b.setAttribute("aria-pressed", b.className === "chosen" ? "true" : "false");
    });
    var n = answered();
    $("progress").max = tasks.length;
    $("progress").value = n;
    $("progress-text").textContent = n + " of " + tasks.length + " answered";
  }

  function go(i) {
    state.current = Math.max(0, Math.min(tasks.length - 1, i));
    save();
    render();
  }

  function nextOpen() {
    for (var k = 1; k <= tasks.length; k += 1) {
      var i = (state.current + k) % tasks.length;
      if (!state.answers[keyOf(tasks[i])]) { go(i); return; }
    }
    status("All pairs are answered: export your answers.", true);
  }

  function answer(label) {
    state.answers[keyOf(tasks[state.current])] = label;
    save();
    if (state.current < tasks.length - 1) { go(state.current + 1); } else { render(); }
    if (answered() === tasks.length) { status("All pairs are answered: export your answers.", true); }
  }

  // a cell a spreadsheet would evaluate gets a leading apostrophe (cmrkit.escaping.csv_cell;
  // `cmrkit judgments aggregate` removes it again)
  function formula(v) {
    return /^[=+\-@\t\r]/.test(v) && !/^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(v);
  }

  function csvField(v) {
    v = String(v);
    if (formula(v) || (v.charAt(0) === "'" && (v.charAt(1) === "'" || formula(v.slice(1))))) {
      v = "'" + v;
    }
    return /[",\r\n]/.test(v) ? "\"" + v.replace(/"/g, "\"\"") + "\"" : v;
  }

  function csvText() {
    var worker = state.worker.trim();
    var lines = ["pair_id,worker_id,label"];
    var seen = {};
    tasks.forEach(function (t) {
      var label = state.answers[keyOf(t)];
      if (label && !seen[t.pair]) {
        seen[t.pair] = true;
        lines.push([t.pair, worker, label].map(csvField).join(","));
      }
    });
    return lines.join("\n") + "\n";
  }

  function exportCsv(download) {
    if (!state.worker.trim()) {
      status("Enter your assessor id first.", false);
      $("worker").focus();
      return;
    }
    var text = csvText();
    $("csv").value = text;
    $("csv").hidden = false;
    if (download) {
      var blob = new Blob([text], { type: "text/csv" });
      var a = document.createElement("a");
      a.href = URL.createObjectURL(blob);
      a.download = "judgments-" + state.worker.trim().replace(/[^A-Za-z0-9_.-]/g, "_") + ".csv";
      document.body.appendChild(a);
      a.click();
      document.body.removeChild(a);
    }
    status("Exported " + answered() + " answers.", true);
  }

  data.scale.forEach(function (item) {
    var b = document.createElement("button");
    b.type = "button";
    b.setAttribute("data-label", String(item[0]));
    b.textContent = item[0] + " " + item[1];
    b.addEventListener("click", function () { answer(item[0]); });
    $("scale").appendChild(b);
  });
  Array.prototype.forEach.call(document.querySelectorAll(".unfold"), function (b) {
    b.addEventListener("click", function () {
      var box = $(b.getAttribute("data-for"));
      var open = box.classList.toggle("open");
      b.textContent = open ? "Show less" : b.getAttribute("data-more");
      if (open) { box.querySelector(".main").scrollIntoView({ block: "nearest" }); }
    });
  });
  $("prev").addEventListener("click", function () { go(state.current - 1); });
  $("next-pair").addEventListener("click", function () { go(state.current + 1); });
  $("next-open").addEventListener("click", nextOpen);
  $("export").addEventListener("click", function () { exportCsv(true); });
  $("show-csv").addEventListener("click", function () { exportCsv(false); });
  $("forget").addEventListener("click", function () {
    if (window.confirm("Forget every answer stored for this page?")) {
      state = { worker: state.worker, current: 0, answers: {} };
      save();
      render();
    }
  });
  $("worker").value = state.worker;
  $("worker").addEventListener("input", function () { state.worker = $("worker").value; save(); });
  document.addEventListener("keydown", function (e) {
    var tag = (e.target && e.target.tagName) || "";
    if (tag === "INPUT" || tag === "TEXTAREA" || e.ctrlKey || e.metaKey || e.altKey) { return; }
    if (e.key >= "1" && e.key <= "5") { answer(Number(e.key)); e.preventDefault(); }
    else if (e.key === "ArrowRight") { go(state.current + 1); e.preventDefault(); }
    else if (e.key === "ArrowLeft") { go(state.current - 1); e.preventDefault(); }
    else if (e.key === "n") { nextOpen(); e.preventDefault(); }
  });
  render();
}());
