// ohsync's local page: overview, conflicts side by side, activity, memory.
// Talks only to its own origin (/api/...); live through server-sent events.
// Every text from the daemon is put into the page as text (never as HTML).
"use strict";
(function () {
  var main = document.getElementById("main");
  var liveBadge = document.getElementById("live");
  var state = null;          // the last /api/state answer
  var busy = false;          // an action is waiting for the server
  var reloadTimer = null;
  var flash = "";            // the last action's answer, kept across redraws of the overview

  // ------------------------------------------------------------------ helpers

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      var v = attrs[k];
      if (v === null || v === undefined || v === false) { return; }
      if (k === "text") { node.textContent = v; }
      else if (k === "onclick") { node.addEventListener("click", v); }
      else if (k === "onsubmit") { node.addEventListener("submit", v); }
      else { node.setAttribute(k, v === true ? "" : v); }
    });
    (children || []).forEach(function (c) {
      if (c === null || c === undefined) { return; }
      node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return node;
  }

  function session() {
    // kept by the login page: with the cookie it makes the session (daemon/panel/auth.py)
    return localStorage.getItem("ohsync-session") || "";
  }

  function api(path, options) {
    options = options || {};
    var init = {credentials: "same-origin", cache: "no-store", headers: {"X-Ohsync-Session": session()}};
    if (options.body !== undefined) {
      init.method = "POST";
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(options.body);
    }
    return fetch(path, init).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (data) {
        if (!r.ok) {
          var err = new Error((data && data.error) || ("HTTP " + r.status));
          err.status = r.status;
          throw err;
        }
        return data;
      });
    });
  }

  function when(iso) {
    if (!iso) { return "never"; }
    var d = new Date(iso);
    return isNaN(d.getTime()) ? String(iso) : d.toLocaleString();
  }

  function size(n) {
    if (n === undefined || n === null) { return ""; }
    var units = ["bytes", "KiB", "MiB", "GiB"], i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
    return (i ? n.toFixed(1) : String(n)) + " " + units[i];
  }

  function sentence(text) {
    text = String(text || "").trim();
    if (!text) { return ""; }
    text = text.charAt(0).toUpperCase() + text.slice(1);
    return /[.!?]$/.test(text) ? text : text + ".";
  }

  // who made the other version: the origin in the archived copy's name (…__<origin>__<UTC time>…)
  // The status names the commands to use from a terminal; on this page the
  // conflicts are listed right below, so that part of the sentence says so.
  function forPage(message) {
    return String(message || "").replace(/, or compare both versions in `ohsync panel`\)/g,
                                         "; compare both versions below)");
  }

  function origin(archived) {
    var m = /__([A-Za-z0-9_-]{1,32})__\d{8}T\d{6}Z/.exec(String(archived || ""));
    if (!m) { return ""; }
    return m[1] === "remote" ? " (from the server)" : " (from " + m[1] + ")";
  }

  function conflictHref(c) {
    var q = "#/conflict/" + encodeURIComponent(c.archived);
    return c.mirror ? q + "?mirror=" + encodeURIComponent(c.mirror) : q;
  }

  // what has the keyboard focus inside the view, to give it back after a redraw
  function focusKey() {
    var a = document.activeElement;
    if (!a || !main.contains(a) || a === main) { return null; }
    if (a.id) { return {id: a.id}; }
    if (a.getAttribute("href")) { return {href: a.getAttribute("href")}; }
    return null;
  }

  function restoreFocus(key) {
    if (!key) { return; }
    var target = key.id ? document.getElementById(key.id) : Array.prototype.find.call(
      main.querySelectorAll("a[href]"), function (a) { return a.getAttribute("href") === key.href; });
    if (target) { target.focus(); }
  }

  function show(nodes, title) {
    var key = focusKey();
    main.replaceChildren.apply(main, nodes);
    document.title = title ? title + " — ohsync" : "ohsync";
    restoreFocus(key);
  }

  function section(title, id, children) {
    return el("section", {"aria-labelledby": id, "class": "card"},
      [el("h2", {id: id, text: title})].concat(children));
  }

  function problem(err) {
    if (err && err.status === 403) {
      return el("p", {"class": "error", role: "alert",
        text: "This page is locked: open it again with `ohsync panel` (or the tray's “Open ohsync…”)."});
    }
    return el("p", {"class": "error", role: "alert", text: String((err && err.message) || err)});
  }

  function setNav(name) {
    ["overview", "activity", "memory"].forEach(function (n) {
      var a = document.getElementById("nav-" + n);
      if (n === name) { a.setAttribute("aria-current", "page"); } else { a.removeAttribute("aria-current"); }
    });
  }

  // ------------------------------------------------------------------ overview

  function renderOverview() {
    setNav("overview");
    if (!state) { return; }
    var st = state.status || {};
    var conflicts = state.conflicts || [];
    var nodes = [];
    if (flash) { nodes.push(el("p", {"class": "done", id: "flash", role: "status", text: flash})); }
    nodes.push(el("p", {"class": "state state-" + (st.state || "unknown"), id: "overall"}, [
      el("strong", {text: (st.state || "unknown").replace("_", " ")}), " — " + forPage(st.message)]));

    var list = conflicts.length ? el("ul", {"class": "items", id: "conflict-list"}, conflicts.map(function (c) {
      return el("li", {}, [
        el("a", {href: conflictHref(c), "class": "path", text: c.path}),
        el("span", {"class": "meta", text: " — " + when(c.time) + "; yours stays in place, the other version" +
          origin(c.archived) + " is in " + c.archived + (c.mirror ? " (" + c.mirror + ")" : "")})]);
    })) : el("p", {id: "no-conflicts", text: "No conflicts."});
    nodes.push(section("Conflicts (" + conflicts.length + ")", "h-conflicts", [list]));

    var mirrors = (st.mirrors || []).map(function (m) {
      return el("div", {"class": "mirror"}, [
        el("h3", {text: m.name + " ↔ " + m.local}),
        el("dl", {}, [
          el("dt", {text: "State"}), el("dd", {"class": "state-" + m.state, text: m.state + " — " + forPage(m.message)}),
          el("dt", {text: "Last sync"}), el("dd", {text: when(m.last_sync)}),
          el("dt", {text: "Waiting to go up"}), el("dd", {text: String(m.pending_up || 0)}),
          el("dt", {text: "Waiting to come down"}), el("dd", {text: String(m.pending_down || 0)}),
          el("dt", {text: "Changes from the server"}),
          el("dd", {text: st.notifications === "push" ? "pushed at once" : "polled"}),
          el("dt", {text: "Transfer"}),
          el("dd", {text: m.transfer ? (m.transfer.direction + " " + m.transfer.path + " " +
            size(m.transfer.done) + " of " + size(m.transfer.total)) : "none"})])]);
    });
    nodes.push(section("Mirrors", "h-mirrors", mirrors));

    var held = state.held_deletes || [];
    if (held.length) {
      var confirmBtn = el("button", {type: "button", id: "confirm-deletes", onclick: function () {
        act(confirmBtn, "/api/confirm-deletes", {}, "held-result");
      }, text: "Confirm these deletions"});
      var restoreBtn = el("button", {type: "button", id: "restore-deletes", "class": "secondary", onclick: function () {
        act(restoreBtn, "/api/restore-deletes", {}, "held-result");
      }, text: "Restore these files"});
      nodes.push(section("Held deletions (" + held.length + ")", "h-held", [
        el("p", {text: "More files were deleted than the safety limit allows, so these deletions wait for you. " +
          "Confirm them, or restore the files: each comes back on the side it was deleted on."}),
        el("ul", {"class": "items"}, held.map(function (h) {
          return el("li", {}, [el("span", {"class": "path", text: h.path}),
            el("span", {"class": "meta", text: h.side === "remote" ? " — deleted here; would be deleted on the server"
              : " — deleted on the server; would be deleted here"})]);
        })), el("div", {"class": "actions"}, [confirmBtn, restoreBtn]),
        el("p", {id: "held-result", role: "status", "aria-live": "polite"})]));
    }
    var damaged = state.damaged || [];
    if (damaged.length) {
      nodes.push(section("Damaged memory files (" + damaged.length + ")", "h-damaged", [
        el("p", {text: "These files do not parse; they still sync line by line. Fix the line named, then save."}),
        el("ul", {"class": "items"}, damaged.map(function (d) {
          return el("li", {}, [el("span", {"class": "path", text: d.path}), el("span", {"class": "meta", text: " — " + d.reason})]);
        }))]));
    }
    var skipped = state.skipped || [];
    if (skipped.length) {
      nodes.push(section("Names that cannot sync (" + skipped.length + ")", "h-skipped", [
        el("ul", {"class": "items"}, skipped.map(function (s) {
          return el("li", {}, [el("span", {"class": "path", text: s.path}), el("span", {"class": "meta", text: " — " + s.reason})]);
        }))]));
    }
    var failures = st.failures || [];
    if (failures.length) {
      nodes.push(section("Failures (" + failures.length + ")", "h-failures", [
        el("ul", {"class": "items"}, failures.map(function (f) {
          return el("li", {}, [el("span", {"class": "path", text: f.path}),
            el("span", {"class": "meta", text: " — " + (f.title ? f.title + ": " : "") + f.reason +
              (f.permanent ? " (waits for you)" : " (retried automatically)")})]);
        }))]));
    }
    show(nodes, "Overview");
  }

  var shownState = "";   // the state the overview was last drawn from

  function loadState() {
    return api("/api/state").then(function (data) { state = data; return data; });
  }

  function redrawOverview() {
    var now = JSON.stringify(state);
    if (now === shownState && document.getElementById("overall")) { return; }
    shownState = now;
    renderOverview();
  }

  // ------------------------------------------------------------------ one conflict

  function versionBlock(label, v, side, q) {
    var rows = [el("h3", {text: label}), el("p", {"class": "path", text: v.path})];
    if (!v.exists) {
      rows.push(el("p", {"class": "meta", text: v.error || "This version is not in the mirror (any more)."}));
      return el("div", {"class": "version"}, rows);
    }
    rows.push(el("p", {"class": "meta", text: size(v.size) + ", changed " + when(new Date(v.mtime * 1000).toISOString())}));
    rows.push(el("p", {"class": "meta hash", text: "SHA-256 " + v.sha256}));
    if (v.image) {
      rows.push(el("img", {"class": "thumb", alt: label + " (" + v.path + ")",
        src: "/api/file?path=" + encodeURIComponent(q.path) + "&side=" + side +
          (q.mirror ? "&mirror=" + encodeURIComponent(q.mirror) : "") +
          "&session=" + encodeURIComponent(session())}));
    }
    return el("div", {"class": "version"}, rows);
  }

  function diffTable(diff) {
    var body = el("tbody", {}, diff.rows.map(function (r) {
      if (r.kind === "skip") {
        return el("tr", {"class": "skip"}, [el("td", {colspan: "4", text: "… " + r.count + " equal lines …"})]);
      }
      var mark = {equal: "", change: "changed", "delete": "only in the live version", insert: "only in the other version"}[r.kind];
      return el("tr", {"class": "row-" + r.kind, title: mark || null}, [
        el("td", {"class": "no", text: r.left_no === null ? "" : String(r.left_no)}),
        el("td", {"class": "line left" + (r.left === null ? " none" : ""), text: r.left === null ? "" : r.left}),
        el("td", {"class": "no", text: r.right_no === null ? "" : String(r.right_no)}),
        el("td", {"class": "line right" + (r.right === null ? " none" : ""), text: r.right === null ? "" : r.right})]);
    }));
    return el("div", {"class": "diff-wrap"}, [el("table", {"class": "diff", id: "diff"}, [
      el("caption", {text: diff.changes + " difference(s)" + (diff.truncated ? " (long files: compared in part)" : "")}),
      el("thead", {}, [el("tr", {}, [el("th", {scope: "col", "class": "no", text: "#"}),
        el("th", {scope: "col", text: "Live version"}), el("th", {scope: "col", "class": "no", text: "#"}),
        el("th", {scope: "col", text: "Other version"})])]), body])]);
  }

  function act(button, path, body, resultId) {
    if (busy) { return; }
    busy = true;
    var out = document.getElementById(resultId);
    var buttons = main.querySelectorAll("button");
    buttons.forEach(function (b) { b.disabled = true; });
    out.className = "working";
    out.textContent = "Working… waiting until the server holds the result.";
    return api(path, {body: body}).then(function (res) {
      out.className = "done";
      out.textContent = res.message || (res.confirmed !== undefined ? res.confirmed + " deletion(s) confirmed." :
        res.restored !== undefined ? res.restored.length + " file(s) restored" + (res.left && res.left.length ?
          "; not restored: " + res.left.map(function (l) { return l.path + " (" + l.reason + ")"; }).join(", ") : "") + "." :
        "Done.");
      busy = false;
      flash = out.textContent;
      return loadState().then(function () {
        if (document.getElementById("overall")) { redrawOverview(); return; }  // the overview: draw what is left
        var back = document.getElementById("back");
        if (back) { back.focus(); }
      });
    }).catch(function (err) {
      busy = false;
      buttons.forEach(function (b) { b.disabled = false; });
      out.className = "error";
      out.textContent = "Not done: " + err.message;
    });
  }

  function renderConflict(archived, mirror) {
    setNav("");
    var q = {path: archived, mirror: mirror};
    show([el("p", {text: "Loading the two versions…"})], "Conflict");
    api("/api/conflict?path=" + encodeURIComponent(archived) + (mirror ? "&mirror=" + encodeURIComponent(mirror) : ""))
      .then(function (data) {
        var c = data.conflict, live = data.live, other = data.other;
        var body = {path: c.archived, expected: {live: live.exists ? live.sha256 : null,
          other: other.exists ? other.sha256 : null}};
        if (mirror) { body.mirror = mirror; }
        var nodes = [
          el("p", {}, [el("a", {href: "#/", id: "back", text: "← All conflicts"})]),
          el("h2", {"class": "path", id: "conflict-title", text: c.path}),
          el("p", {"class": "meta", text: "Conflict of " + when(c.time) + ". " + sentence(c.reason) +
            (c.fields && c.fields.length ? " Did not merge: " + c.fields.join(", ") + "." : "")}),
          el("div", {"class": "versions"}, [versionBlock("Live version (in place)", live, "live", q),
            versionBlock("Other version (archived" + origin(c.archived).replace(" (", ", ").replace(")", "") + ")",
              other, "other", q)])];
        if (data.diff) { nodes.push(diffTable(data.diff)); }
        else if (live.exists && other.exists && live.sha256 === other.sha256) {
          nodes.push(el("p", {text: "Both versions hold the same bytes."}));
        } else {
          nodes.push(el("p", {"class": "meta", text: "Not text: compare them by size, time and hash."}));
        }
        var resultId = "action-result";
        var keepLive = el("button", {type: "button", id: "keep-live", onclick: function () {
          act(keepLive, "/api/resolve", Object.assign({keep: "live"}, body), resultId);
        }, text: "Keep the live version"});
        var takeOther = el("button", {type: "button", id: "take-other", disabled: !other.exists, onclick: function () {
          act(takeOther, "/api/resolve", Object.assign({keep: "other"}, body), resultId);
        }, text: "Take the other version"});
        var actions = [keepLive, takeOther];
        var editorArea = el("div", {id: "editor-area"});
        if (data.prefill !== undefined && data.prefill !== null) {
          var mergeBtn = el("button", {type: "button", id: "merge", "aria-expanded": "false", onclick: function () {
            mergeBtn.setAttribute("aria-expanded", "true");
            var text = el("textarea", {id: "editor", rows: "14", spellcheck: "false", "aria-describedby": "editor-help"});
            text.value = data.prefill;
            var save = el("button", {type: "submit", id: "save-merge", text: "Save the merged version"});
            editorArea.replaceChildren(el("form", {onsubmit: function (ev) {
              ev.preventDefault();
              if (/^(<<<<<<< live|>>>>>>> other)/m.test(text.value)) {
                var out = document.getElementById(resultId);
                out.className = "error";
                out.textContent = "The text still holds <<<<<<< / >>>>>>> markers: keep what you need, remove them, then save.";
                text.focus();
                return;
              }
              act(save, "/api/resolve", Object.assign({keep: "merged", content: text.value}, body), resultId);
            }}, [el("label", {"for": "editor", text: "Merged text"}),
              el("p", {id: "editor-help", "class": "meta", text: "Both versions are in the editor; where they differ, " +
                "the lines between the <<<<<<< and >>>>>>> markers show each. Keep what you need, remove the markers, save."}),
              text, save]));
            text.focus();
          }, text: "Merge by hand…"});
          actions.push(mergeBtn);
        }
        nodes.push(el("div", {"class": "actions", role: "group", "aria-label": "Resolve"}, actions));
        nodes.push(el("p", {"class": "meta", text: "Keep the live version: the other version goes to .trash/. " +
          "Take the other version or merge by hand: the live version it replaces goes to .trash/."}));
        nodes.push(editorArea);
        nodes.push(el("p", {id: resultId, role: "status", "aria-live": "polite"}));
        show(nodes, c.path);
        document.getElementById("conflict-title").setAttribute("tabindex", "-1");
        document.getElementById("conflict-title").focus();
      }).catch(function (err) { show([el("p", {}, [el("a", {href: "#/", id: "back", text: "← All conflicts"})]),
        problem(err)], "Conflict"); });
  }

  // ------------------------------------------------------------------ activity

  function renderActivity(filters) {
    setNav("activity");
    var params = "?limit=200" + (filters.mirror ? "&mirror=" + encodeURIComponent(filters.mirror) : "") +
      (filters.kind ? "&kind=" + encodeURIComponent(filters.kind) : "");
    api("/api/activity" + params).then(function (items) {
      var mirrors = ((state && state.status && state.status.mirrors) || []).map(function (m) { return m.name; });
      var mirrorSel = el("select", {id: "filter-mirror"}, [el("option", {value: "", text: "all mirrors"})].concat(
        mirrors.map(function (n) { return el("option", {value: n, selected: n === filters.mirror, text: n}); })));
      var kindSel = el("select", {id: "filter-kind"}, ["", "ok", "conflict", "error", "upload", "download", "merge",
        "delete", "resolve"].map(function (k) {
        return el("option", {value: k, selected: k === (filters.kind || ""), text: k || "every kind"});
      }));
      var apply = function () {
        location.hash = "#/activity?mirror=" + encodeURIComponent(mirrorSel.value) + "&kind=" + encodeURIComponent(kindSel.value);
      };
      mirrorSel.addEventListener("change", apply);
      kindSel.addEventListener("change", apply);
      show([section("Recent activity", "h-activity", [
        el("div", {"class": "filters"}, [el("label", {"for": "filter-mirror", text: "Mirror "}), mirrorSel,
          el("label", {"for": "filter-kind", text: " Kind "}), kindSel]),
        items.length ? el("ul", {"class": "items", id: "activity-list"}, items.map(function (a) {
          // a conflict's action is where the other version went (as `ohsync activity` shows it)
          var conflict = a.result === "conflict";
          var notes = [conflict ? "other version kept as " + a.action : null, a.message || null].filter(Boolean);
          return el("li", {}, [el("span", {"class": "meta", text: when(a.time) + " "}),
            el("strong", {text: (conflict ? "conflict" : a.action) + " "}),
            conflict ? null : el("span", {text: a.result + " "}),
            el("span", {"class": "path", text: a.path}),
            notes.length ? el("span", {"class": "meta", text: " — " + notes.join("; ")}) : null]);
        })) : el("p", {text: "No activity yet."})])], "Activity");
    }).catch(function (err) { show([problem(err)], "Activity"); });
  }

  // ------------------------------------------------------------------ memory

  function renderMemory(query, permalink) {
    setNav("memory");
    var input = el("input", {type: "search", id: "memory-q", name: "q", value: query || "", autocomplete: "off"});
    var results = el("div", {id: "memory-results"});
    var form = el("form", {role: "search", onsubmit: function (ev) {
      ev.preventDefault();
      location.hash = "#/memory?q=" + encodeURIComponent(input.value);
    }}, [el("label", {"for": "memory-q", text: "Search memory "}), input, el("button", {type: "submit", text: "Search"})]);
    show([section("Memory", "h-memory", [form, results])], "Memory");
    if (permalink) {
      api("/api/memory/read?permalink=" + encodeURIComponent(permalink)).then(function (e) {
        results.replaceChildren(el("article", {"class": "entity"}, [el("h3", {text: e.title || permalink}),
          el("p", {"class": "meta path", text: e.path || ""}), el("pre", {"class": "body", text: e.content || e.text || JSON.stringify(e, null, 2)})]));
      }).catch(function (err) { results.replaceChildren(problem(err)); });
    } else if (query) {
      api("/api/memory/search?q=" + encodeURIComponent(query)).then(function (res) {
        var items = Array.isArray(res) ? res : (res.results || []);
        results.replaceChildren(items.length ? el("ul", {"class": "items"}, items.map(function (r) {
          return el("li", {}, [el("a", {href: "#/memory?q=" + encodeURIComponent(query) + "&read=" + encodeURIComponent(r.permalink),
            text: r.title || r.permalink}), el("span", {"class": "meta", text: " — " + (r.path || "") + (r.snippet ? ": " + r.snippet : "")})]);
        })) : el("p", {text: "Nothing found."}));
      }).catch(function (err) { results.replaceChildren(problem(err)); });
    }
  }

  // ------------------------------------------------------------------ routing and live updates

  function parseHash() {
    var h = location.hash.replace(/^#/, "") || "/";
    var qi = h.indexOf("?");
    var path = qi < 0 ? h : h.slice(0, qi);
    var query = {};
    (qi < 0 ? "" : h.slice(qi + 1)).split("&").forEach(function (kv) {
      if (!kv) { return; }
      var i = kv.indexOf("=");
      query[decodeURIComponent(i < 0 ? kv : kv.slice(0, i))] = i < 0 ? "" : decodeURIComponent(kv.slice(i + 1));
    });
    return {path: path, query: query};
  }

  function route() {
    var r = parseHash();
    if (r.path !== "/") { flash = ""; }
    if (r.path.indexOf("/conflict/") === 0) {
      renderConflict(decodeURIComponent(r.path.slice("/conflict/".length)), r.query.mirror || "");
    } else if (r.path === "/activity") {
      renderActivity(r.query);
    } else if (r.path === "/memory") {
      renderMemory(r.query.q || "", r.query.read || "");
    } else {
      loadState().then(function () { shownState = JSON.stringify(state); renderOverview(); })
        .catch(function (err) { show([problem(err)], "Overview"); });
    }
  }

  function onChange() {
    // coalesce a burst of events into one reload
    if (reloadTimer) { return; }
    reloadTimer = setTimeout(function () {
      reloadTimer = null;
      var r = parseHash();
      loadState().then(function () {
        if (r.path === "/" && !busy) { redrawOverview(); }
        else if (r.path === "/activity") { renderActivity(r.query); }
      }).catch(function () {});
    }, 150);
  }

  function connect() {
    var source = new EventSource("/api/events?session=" + encodeURIComponent(session()));
    source.addEventListener("open", function () { liveBadge.textContent = "live"; liveBadge.className = "live on"; });
    source.addEventListener("error", function () {
      liveBadge.textContent = "reconnecting…"; liveBadge.className = "live off";
      if (source.readyState === EventSource.CLOSED) {
        // refused, e.g. after the page was opened again in another tab (a new session): the browser
        // gives up on a refused stream, so open it again with the token kept now
        setTimeout(connect, 3000);
      }
    });
    // every daemon event ({"type": "status"|"conflict"|"synced"|"error"|"filed", …}) is a "message"
    source.addEventListener("message", function () {
      liveBadge.textContent = "live"; liveBadge.className = "live on";
      onChange();
    });
  }

  window.addEventListener("hashchange", function () { route(); main.focus(); });
  route();
  connect();
})();
