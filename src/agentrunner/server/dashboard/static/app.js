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
