// The assessor's page: one pair at a time from GET /api/next, judged on the scale the server
// sends (saved at once with POST /api/judgments); u goes back through the last judgments to
// change one (PUT).
// Texts arrive as HTML that the server escaped (query, candidate, title, sentences); everything
// else is set as text.
(function () {
  "use strict";
  var $ = function (id) { return document.getElementById(id); };
  var current = null;    // the new pair from /api/next
  var recent = [];       // the last judgments, newest first
  var back = -1;         // index in recent while changing one, else -1
  var busy = false;
  var labels = [];       // the scale, as the server sent it

  function status(text) { $("status").textContent = text; }

  function fill(id, parts) {
    var box = $(id);
    box.querySelector(".before").innerHTML = parts.before;
    box.querySelector(".main").innerHTML = parts.main;
    box.querySelector(".after").innerHTML = parts.after;
  }

  function show(task, label, mode) {
    $("task").hidden = false;
    $("empty").hidden = true;
    $("mode").textContent = mode;
    $("pair-id").textContent = task.pair_id;
    fill("query", task.query);
    $("title").innerHTML = task.unit.title;
    $("first").innerHTML = task.unit.first;
    fill("candidate", task.unit);
    $("next").innerHTML = task.unit.next;
    Array.prototype.forEach.call($("scale").children, function (b) {
      var on = Number(b.getAttribute("data-label")) === label;
      b.className = on ? "chosen" : "";
      b.setAttribute("aria-pressed", on ? "true" : "false");
    });
  }

  function renderRecent() {
    var list = $("recent");
    while (list.firstChild) { list.removeChild(list.firstChild); }
    recent.forEach(function (j, i) {
      var li = document.createElement("li");
      var b = document.createElement("button");
      b.type = "button";
      b.textContent = j.pair_id + ": " + j.label;
      b.addEventListener("click", function () { goBack(i); });
      li.appendChild(b);
      if (i === back) { li.className = "editing"; }
      list.appendChild(li);
    });
  }

  function loadRecent() {
    return cmrkit.call("GET", "/api/judgments").then(function (r) {
      if (r.status === 200) { setScale(r.data.scale); recent = r.data.judgments; renderRecent(); }
    });
  }

  function showCurrent() {
    back = -1;
    renderRecent();
    if (current) {
      show(current, null, "New pair");
      $("done").textContent = current.done.judged + " judged";
    } else {
      $("task").hidden = true;
      $("empty").hidden = false;
    }
  }

  function next() {
    return cmrkit.call("GET", "/api/next").then(function (r) {
      if (r.status === 200) { current = r.data; setScale(current.scale); status(""); }
      else if (r.status === 204) { current = null; $("empty-text").textContent = "No pair is left for you now."; }
      else if (r.status === 401) { window.location = "/login"; return; }
      else { current = null; $("empty-text").textContent = (r.data && r.data.error) || String(r.status); }
      showCurrent();
    });
  }

  function judge(label) {
    if (busy) { return; }
    if (back >= 0) {
      var j = recent[back];
      busy = true;
      cmrkit.call("PUT", "/api/judgments/" + encodeURIComponent(j.pair_id), { label: label })
        .then(function (r) {
          busy = false;
          if (r.status === 200) {
            status("Changed " + j.pair_id + " to " + label + ".");
            return loadRecent().then(showCurrent);
          }
          status((r.data && r.data.error) || ("could not change (" + r.status + ")"));
        });
      return;
    }
    if (!current) { return; }
    busy = true;
    var pid = current.pair_id;
    cmrkit.call("POST", "/api/judgments", { pair_id: pid, label: label }).then(function (r) {
      busy = false;
      if (r.status === 201) {
        status("Saved " + pid + ": " + label + (r.data.paused ? " (you are paused: see an organizer)" : "."));
        return loadRecent().then(next);
      }
      status((r.data && r.data.error) || ("not saved (" + r.status + ")"));
      if (r.status === 409 || r.status === 404) { return loadRecent().then(next); }
    }, function () { busy = false; status("The server did not answer; your judgment may not be saved. Press the key again."); });
  }

  function goBack(i) {
    if (i < 0 || i >= recent.length) { return; }
    back = i;
    renderRecent();
    show(recent[i], recent[i].label, "Changing judgment " + (i + 1) + " back");
    $("done").textContent = "";
  }

  // the buttons of the scale the server sends ([[label, "what it says"], ...]) with every pair
  // and with the last judgments; a label's key is its digit
  function setScale(scale) {
    if (!scale || JSON.stringify(scale) === JSON.stringify(labels)) { return; }
    labels = scale;
    var box = $("scale");
    while (box.firstChild) { box.removeChild(box.firstChild); }
    scale.forEach(function (item) {
      var b = document.createElement("button");
      b.type = "button";
      b.setAttribute("data-label", String(item[0]));
      b.textContent = item[0] + " " + item[1];
      b.addEventListener("click", function () { judge(item[0]); });
      box.appendChild(b);
    });
  }

  $("retry").addEventListener("click", next);
  document.addEventListener("keydown", function (e) {
    var tag = (e.target && e.target.tagName) || "";
    if (tag === "INPUT" || tag === "TEXTAREA" || e.ctrlKey || e.metaKey || e.altKey) { return; }
    var key = labels.filter(function (item) { return String(item[0]) === e.key; })[0];
    if (key) { judge(key[0]); e.preventDefault(); }
    else if (e.key === "u") { goBack(back + 1); e.preventDefault(); }
    else if (e.key === "Escape") { showCurrent(); e.preventDefault(); }
  });
  loadRecent().then(next);
}());
