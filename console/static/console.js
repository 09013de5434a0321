// Progressive enhancement only: an opt-in auto-refresh. Every page works
// without this script.
(function () {
  "use strict";
  var slot = document.getElementById("refresh");
  if (!slot || !window.localStorage) { return; }
  var key = "cohort-console-refresh";
  var every = 5000;
  var box = document.createElement("input");
  box.type = "checkbox";
  box.id = "auto-refresh";
  box.checked = localStorage.getItem(key) === "1";
  var label = document.createElement("label");
  label.appendChild(box);
  label.appendChild(document.createTextNode(" refresh every 5 s"));
  var paused = document.createElement("span");
  paused.id = "refresh-paused";
  paused.textContent = " (paused while you use the page)";
  paused.hidden = true;
  label.appendChild(paused);
  var down = document.createElement("span");
  down.id = "refresh-down";
  down.className = "error";
  down.hidden = true;
  label.appendChild(down);
  slot.appendChild(label);
  // The groups page's filter form as served: a reload would throw away
  // a choice made in it and not applied yet.
  var form = document.querySelector("form.filter");
  function formState() { return form ? new URLSearchParams(new FormData(form)).toString() : ""; }
  var served = formState();
  // busy: reloading now would undo what the operator is doing (a filter
  // chosen and not applied, keyboard focus, selected text), or no one
  // sees the page (a hidden tab is not reloaded, so that it does not
  // ask the node for the page every 5 s while no one looks).
  function busy() {
    if (document.hidden) { return true; }
    var a = document.activeElement;
    if (a && a !== document.body && a !== document.documentElement && a !== box) { return true; }
    var s = window.getSelection ? window.getSelection() : null;
    if (s && !s.isCollapsed) { return true; }
    return formState() !== served;
  }
  var timer = null;
  var due = false;
  // reload asks first whether the HTTP listener answers at all (the
  // stylesheet: no login, nothing asked of the node): a reload while the
  // node restarts would leave the console for the browser's error page,
  // where no script refreshes it again. Until it answers, the page stays,
  // says since when, and is tried again every 5 s.
  var downSince = null;
  function reload() {
    if (!window.fetch) { location.reload(); return; }
    fetch("/console/static/console.css", { method: "HEAD", cache: "no-store" }).then(function () {
      location.reload();
    }, function () {
      if (!downSince) { downSince = new Date(); }
      down.textContent = " — the node has not answered since " + downSince.toISOString().slice(11, 19) + " UTC; what is shown is from before";
      down.hidden = false;
      if (!timer) { timer = setTimeout(tick, every); }
    });
  }
  function tick() {
    timer = null;
    due = true;
    if (!box.checked) { return; }
    if (!busy()) { paused.hidden = true; reload(); return; }
    paused.hidden = document.hidden;
    timer = setTimeout(tick, every);
  }
  function arm() {
    if (timer) { clearTimeout(timer); timer = null; }
    due = false;
    paused.hidden = true;
    if (box.checked) { timer = setTimeout(tick, every); }
  }
  box.addEventListener("change", function () {
    localStorage.setItem(key, box.checked ? "1" : "0");
    arm();
  });
  // A tab shown again after its refresh fell due is reloaded at once.
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && due && box.checked) { tick(); }
  });
  arm();
}());
