// The theme toggle: light, dark or the system's, remembered in this browser. Everything else
// on these pages is htmx (and reads fine without any script).
(function () {
  var root = document.documentElement;
  var saved = localStorage.getItem("agentrunner-theme");
  if (saved === "light" || saved === "dark") root.dataset.theme = saved;
  document.addEventListener("DOMContentLoaded", function () {
    var button = document.getElementById("theme-toggle");
    if (!button) return;
    var label = function () {
      var theme = root.dataset.theme || "auto";
      button.textContent = { auto: "Theme: system", light: "Theme: light", dark: "Theme: dark" }[theme];
    };
    button.hidden = false;
    label();
    button.addEventListener("click", function () {
      var next = { auto: "light", light: "dark", dark: "auto" }[root.dataset.theme || "auto"];
      if (next === "auto") { delete root.dataset.theme; localStorage.removeItem("agentrunner-theme"); }
      else { root.dataset.theme = next; localStorage.setItem("agentrunner-theme", next); }
      label();
    });
  });
})();

// Times: the server writes each <time> in UTC (said so, for a page read without script); here
// each is written in the browser's own time zone, with the date when it is not today, in the
// page as loaded and in every part htmx swaps in later.
(function () {
  var pad = function (n) { return (n < 10 ? "0" : "") + n; };
  var day = function (d) { return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()); };
  function localTimes(root) {
    if (!root || !root.querySelectorAll) return;
    var times = root.querySelectorAll("time[datetime]:not([data-local])");
    for (var i = 0; i < times.length; i++) {
      var el = times[i];
      var when = new Date(el.getAttribute("datetime"));
      if (isNaN(when.getTime())) continue;
      var clock = pad(when.getHours()) + ":" + pad(when.getMinutes());
      el.title = el.textContent.trim();  // the UTC time, on hover
      el.textContent = day(when) === day(new Date()) ? clock + ":" + pad(when.getSeconds()) : day(when) + " " + clock;
      el.dataset.local = "";
    }
  }
  document.addEventListener("DOMContentLoaded", function () { localTimes(document.body); });
  document.addEventListener("htmx:afterSwap", function (event) { localTimes(event.detail.target); localTimes(document.body); });
  document.addEventListener("htmx:sseMessage", function (event) { localTimes(event.target); });
  document.addEventListener("htmx:oobAfterSwap", function () { localTimes(document.body); });
})();

// A form that does something that cannot be undone (data-confirm="question") asks first; without
// script it posts as it is.
document.addEventListener("submit", function (event) {
  var form = event.target;
  var question = form && form.getAttribute && form.getAttribute("data-confirm");
  if (question && !window.confirm(question)) {
    event.preventDefault();
    event.stopImmediatePropagation();
  }
}, true);

// When the server cannot be reached (a request fails, the live stream drops), say so at the top
// of the page, and clear it once it answers again. A post that failed says so in its form.
(function () {
  function notice(text) {
    var el = document.getElementById("connection");
    if (!el) return;
    if (text) { el.textContent = text; el.hidden = false; }
    else if (!el.hidden) { el.hidden = true; el.textContent = ""; }
  }
  var LOST = "Lost the connection to the server — retrying…";
  document.addEventListener("htmx:sendError", function (event) {
    notice(LOST);
    var form = event.detail.elt;
    if (form && form.id === "composer") {
      var said = document.getElementById("composer-unsent");
      if (!said) {
        said = document.createElement("p");
        said.id = "composer-unsent";
        said.className = "notice error";
        said.setAttribute("role", "alert");
        form.insertBefore(said, form.firstChild.nextSibling);
      }
      said.textContent = "Not sent: the server did not answer. Your text is kept: send it again once it is back.";
    }
  });
  document.addEventListener("htmx:responseError", function (event) {
    if (event.detail.xhr && event.detail.xhr.getResponseHeader("x-composer-error")) return;
    notice("The server answered with an error (" + event.detail.xhr.status + ") — retrying…");
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail.successful) {
      notice(null);
      var unsent = document.getElementById("composer-unsent");
      if (unsent) unsent.remove();
    }
  });
  document.addEventListener("htmx:sseError", function () { notice(LOST); });
  document.addEventListener("htmx:sseOpen", function () { notice(null); });
  // A run's or a job's stream closed by its own "end" (sse-close) is a page whose run ended, as
  // its last part says: nothing is lost, nothing to say.
})();
