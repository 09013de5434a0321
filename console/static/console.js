// Progressive enhancement only: an opt-in auto-refresh. Every page works
// without this script.
(function () {
  "use strict";
  var slot = document.getElementById("refresh");
  if (!slot || !window.localStorage) { return; }
  var key = "cohort-console-refresh";
  var box = document.createElement("input");
  box.type = "checkbox";
  box.id = "auto-refresh";
  box.checked = localStorage.getItem(key) === "1";
  var label = document.createElement("label");
  label.appendChild(box);
  label.appendChild(document.createTextNode(" refresh every 5 s"));
  slot.appendChild(label);
  var timer = null;
  function arm() {
    if (timer) { clearTimeout(timer); timer = null; }
    if (box.checked) { timer = setTimeout(function () { location.reload(); }, 5000); }
  }
  box.addEventListener("change", function () {
    localStorage.setItem(key, box.checked ? "1" : "0");
    arm();
  });
  arm();
}());
