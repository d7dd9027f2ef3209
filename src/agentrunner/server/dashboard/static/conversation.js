// The conversation pages, with JavaScript on (without it, links and the form work as they are).
// - The stream's URL follows what it has delivered, so that if htmx has to open it again (it
//   does after an error, without the Last-Event-ID a browser's own reconnection sends), it
//   resumes after the last message shown, with no message twice.
// - A refused post shows its error in the form (htmx leaves error answers out by default).
(function () {
  document.addEventListener("htmx:sseMessage", function (event) {
    var source = event.target.closest("[sse-connect]");
    var id = event.detail && event.detail.lastEventId;
    if (!source || !id) return;
    var url = new URL(source.getAttribute("sse-connect"), window.location.href);
    url.searchParams.set("after", id);
    source.setAttribute("sse-connect", url.pathname + url.search);
    if (event.detail.type === "message") {
      var empty = document.getElementById("no-messages");
      if (empty) empty.remove();
    }
  });
  document.addEventListener("htmx:beforeSwap", function (event) {
    var xhr = event.detail.xhr;
    if (xhr.status >= 400 && xhr.getResponseHeader("x-composer-error")) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail.elt && event.detail.elt.id === "composer") {
      var text = document.getElementById("composer-text");
      if (text) text.focus();
    }
  });
})();
