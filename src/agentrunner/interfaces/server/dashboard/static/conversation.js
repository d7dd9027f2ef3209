// The conversation pages, with JavaScript on (without it, links and the form work as they are).
// - The stream's URL follows what it has delivered, so that if htmx has to open it again (it
//   does after an error, without the Last-Event-ID a browser's own reconnection sends), it
//   resumes after the last message shown, with no message twice.
// - A refused post shows its error in the form (htmx leaves error answers out by default).
// - The page opens at its newest message, with the box to post in under it; a message that
//   arrives is brought into view when the person was at the bottom already, or had just posted.
// - Ctrl+Enter (Cmd+Enter on a Mac) in the box sends.
(function () {
  var follow = false;  // the next message is the person's own post: show it
  function toNewest() {
    var composer = document.getElementById("composer");
    var messages = document.querySelectorAll("#messages > li");
    if (composer) composer.scrollIntoView({ block: "end" });
    else if (messages.length) messages[messages.length - 1].scrollIntoView({ block: "end" });
  }
  function atBottom() {
    var composer = document.getElementById("composer");
    return !composer || composer.getBoundingClientRect().top < window.innerHeight + 80;
  }
  document.addEventListener("DOMContentLoaded", function () {
    if (document.getElementById("conversation") || document.getElementById("thread-live")) toNewest();
  });
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Enter" || !(event.ctrlKey || event.metaKey)) return;
    if (!event.target || event.target.id !== "composer-text") return;
    event.preventDefault();
    event.target.form.requestSubmit();
  });
  var wasAtBottom = true;
  document.addEventListener("htmx:sseBeforeMessage", function () { wasAtBottom = atBottom(); });
  document.addEventListener("htmx:sseMessage", function (event) {
    if (event.detail && event.detail.type === "message" && (follow || wasAtBottom)) {
      follow = false;
      toNewest();
    }
  });
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
      if (event.detail.successful) {
        follow = true;  // a channel: the stream brings the post
        if (document.getElementById("thread-live")) toNewest();  // a thread: the answer has it
      }
      var text = document.getElementById("composer-text");
      if (text) text.focus({ preventScroll: true });
    }
  });
})();
