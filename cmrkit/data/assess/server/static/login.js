(function () {
  "use strict";
  var form = document.getElementById("login-form");
  var status = document.getElementById("status");
  form.addEventListener("submit", function (e) {
    e.preventDefault();
    cmrkit.call("POST", "/api/login", {
      name: document.getElementById("name").value,
      password: document.getElementById("password").value
    }).then(function (r) {
      if (r.status === 200) { window.location = "/"; return; }
      status.textContent = (r.data && r.data.error) || ("login failed (" + r.status + ")");
    });
  });
}());
