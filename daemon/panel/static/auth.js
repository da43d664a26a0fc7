// The login step of the local page: the secret arrives in the address's
// fragment (never sent to the server), is posted once for a session cookie,
// and is dropped from the address before anything else happens.
"use strict";
(function () {
  var secret = decodeURIComponent((location.hash || "").replace(/^#/, ""));
  history.replaceState(null, "", "/auth");
  var say = function (text) { document.getElementById("auth-message").textContent = text; };
  if (!secret) {
    say("This address has no key. Open the page with `ohsync panel`, or the tray's “Open ohsync…”.");
    return;
  }
  fetch("/api/session", {
    method: "POST", credentials: "same-origin", cache: "no-store",
    headers: {"Content-Type": "application/json"}, body: JSON.stringify({secret: secret})
  }).then(function (r) {
    if (r.ok) {
      // the session's second half: this origin's storage, which no page on another port can read
      return r.json().then(function (d) {
        try { localStorage.setItem("ohsync-session", d.token || ""); } catch (e) {
          say("This browser keeps no site data for this page, which it needs: allow site data for 127.0.0.1, then open it again with `ohsync panel`.");
          return;
        }
        location.replace("/");
      });
    }
    say("That key is not valid any more (ohsync restarted?). Open the page again with `ohsync panel`.");
  }).catch(function () { say("ohsync does not answer. Is it running? Try `ohsync status`."); });
})();
