// Shared by the pages: the CSRF token (the csrftoken cookie's value, also in <body data-csrf>)
// goes in X-CSRFToken on every request that changes something.
var cmrkit = (function () {
  "use strict";
  function cookie(name) {
    var found = null;
    document.cookie.split(";").forEach(function (c) {
      var kv = c.trim().split("=");
      if (kv[0] === name) { found = decodeURIComponent(kv.slice(1).join("=")); }
    });
    return found;
  }
  function token() { return cookie("csrftoken") || document.body.getAttribute("data-csrf"); }
  function call(method, url, data) {
    var opts = { method: method, credentials: "same-origin", headers: {} };
    if (method !== "GET") {
      opts.headers["X-CSRFToken"] = token();
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(data || {});
    }
    return fetch(url, opts).then(function (r) {
      if (r.status === 204) { return { status: 204, data: null }; }
      return r.json().then(function (d) { return { status: r.status, data: d }; },
        function () { return { status: r.status, data: {} }; });
    });
  }
  var out = document.getElementById("logout");
  if (out) {
    out.addEventListener("click", function () {
      call("POST", "/api/logout").then(function () { window.location = "/login"; });
    });
  }
  return { call: call };
}());
