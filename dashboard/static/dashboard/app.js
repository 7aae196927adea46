// The dashboard's few behaviours htmx doesn't cover. Every one has a server-side fallback: without this file the
// forms still post and the pages still work.
(function () {
  "use strict";
  var counter = 1000;

  function each(root, selector, fn) {
    Array.prototype.forEach.call(root.querySelectorAll(selector), fn);
  }

  // "Add …" buttons: a copy of a <template>, with its "__N__" ids made unique, focused on its first field.
  function addRow(button) {
    var template = document.getElementById(button.getAttribute("data-add-row"));
    var into = document.getElementById(button.getAttribute("data-into"));
    if (!template || !into) return;
    counter += 1;
    var html = template.innerHTML.replace(/__N__/g, "n" + counter);
    var holder = document.createElement("div");
    holder.innerHTML = html;
    var first = null;
    while (holder.firstChild) {
      var node = holder.firstChild;
      into.appendChild(node);
      if (!first && node.querySelector) first = node.querySelector("input, textarea, select");
    }
    if (first) first.focus();
  }

  // "Use starter rules": the built-in's starter rules added to its rules (those not there yet), the grant switched
  // on, and the reasons shown. The same as the server does for the button without JavaScript.
  function useStarter(button) {
    var name = button.getAttribute("data-starter");
    var grant = document.getElementById("grant-" + name);
    var box = document.getElementById("starter-" + name);
    if (!grant || !box) return false;
    var rules = grant.querySelector("textarea");
    var enabled = grant.querySelector('input[type="checkbox"]');
    var missing = [];
    each(box, "[data-rule]", function (rule) {
      var text = rule.textContent.trim();
      if (rules.value.indexOf(text) === -1) missing.push(text);
    });
    var current = rules.value.replace(/\s+$/, "");
    rules.value = (current ? current + "\n" : "") + missing.join("\n");
    if (enabled) enabled.checked = true;
    rules.style.height = Math.max(rules.scrollHeight + 4, rules.offsetHeight) + "px";
    box.hidden = false;
    box.focus();
    return true;
  }

  document.addEventListener("click", function (event) {
    var target = event.target.closest ? event.target.closest("button") : null;
    if (!target) return;
    if (target.hasAttribute("data-add-row")) {
      event.preventDefault();
      addRow(target);
    } else if (target.hasAttribute("data-remove-row")) {
      event.preventDefault();
      var row = target.closest(".removable");
      if (row) row.remove();
    } else if (target.hasAttribute("data-starter")) {
      if (useStarter(target)) event.preventDefault();
    }
  });

  // The test panel: after a message is sent, the newest turn comes into view.
  document.addEventListener("htmx:afterSwap", function (event) {
    var target = event.detail && event.detail.target;
    if (!target || target.id !== "panel-body") return;
    var turns = document.querySelectorAll("#panel-body .turn");
    if (turns.length) turns[turns.length - 1].scrollIntoView({ block: "nearest" });
  });

  // A choice that shows only its own fields (a new knowledge source's kind): each [data-shown-when="name=value"]
  // is hidden while another value of that radio group is checked. Without this file every field shows and the
  // server uses the chosen kind's.
  function showChosen() {
    each(document, "[data-shown-when]", function (element) {
      var parts = element.getAttribute("data-shown-when").split("=");
      var checked = document.querySelector('input[type="radio"][name="' + parts[0] + '"]:checked');
      element.hidden = Boolean(checked) && checked.value !== parts[1];
    });
  }
  document.addEventListener("change", function (event) {
    if (event.target.type === "radio") showChosen();
  });
  showChosen();

  // Copy buttons next to what is shown once (keys, secrets): the text of the element `data-copy` names.
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-copy]");
    if (!button) return;
    var source = document.querySelector(button.getAttribute("data-copy"));
    if (!source) return;
    var text = source.textContent.trim();
    var done = function () {
      button.textContent = "Copied";
      button.setAttribute("aria-live", "polite");
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { selectText(source); });
    } else {
      selectText(source); // http:// on another host: the text selected, for Ctrl-C
      try { if (document.execCommand("copy")) done(); } catch (e) { /* selected: the person copies it */ }
    }
  });
  function selectText(node) {
    var range = document.createRange();
    range.selectNodeContents(node);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  // Forms that ask first (deleting, rotating).
  document.addEventListener("submit", function (event) {
    // The form's own question, or the one of the button that submitted it (one form, several actions).
    var button = event.submitter;
    var message = (button && button.getAttribute("data-confirm")) ||
      (event.target.getAttribute && event.target.getAttribute("data-confirm"));
    if (message && !window.confirm(message)) event.preventDefault();
  });

  // Live runs (a test panel turn, the runs inspector's run): an element with data-run-events follows its run's
  // events (Server-Sent Events) and asks htmx to fetch it again ("run-event") as they come, a burst at once. A
  // stream ends after run.requires_action or the run's end; the fragment fetched then follows again if the run is
  // still live. If the stream can't be opened (the server is busy), the element is fetched every 3 s instead.
  var following = {};
  var CLOSING = ["run.requires_action", "run.completed", "run.failed", "run.cancelled"];
  var PASSING = ["run.queued", "run.in_progress", "run.step.created"];

  function refresh(id) {
    var current = document.getElementById(id);
    if (current && current.hasAttribute("data-run-events") && window.htmx) window.htmx.trigger(current, "run-event");
  }

  function poll(id) {
    var timer = setInterval(function () {
      var current = document.getElementById(id);
      if (!current || !current.hasAttribute("data-run-events")) clearInterval(timer);
      else refresh(id);
    }, 3000);
  }

  function follow(element) {
    var id = element.id;
    if (!id || following[id] || typeof EventSource === "undefined") return;
    var source = new EventSource(element.getAttribute("data-run-events"));
    var pending = null;
    following[id] = source;
    function soon() {
      if (!pending) pending = setTimeout(function () { pending = null; refresh(id); }, 100);
    }
    function done() {
      source.close();
      if (following[id] === source) delete following[id];
    }
    PASSING.forEach(function (type) { source.addEventListener(type, soon); });
    // The answer as it is written: appended where the fragment shows it, without fetching the fragment again. A
    // delta the fragment was rendered with already (its data-written-until) is not appended twice.
    function writing(event, reset) {
      var current = document.getElementById(id);
      var box = current && current.querySelector("[data-writing]");
      if (!box) return;
      if (Number(event.lastEventId) <= Number(box.getAttribute("data-written-until") || 0)) return;
      var text = box.querySelector("[data-writing-text]");
      var data = {};
      try { data = JSON.parse(event.data); } catch (e) { return; }
      text.textContent = reset ? "" : text.textContent + (data.delta || "");
      box.hidden = !text.textContent;
      var pending = current.querySelector(".pending");
      if (pending) pending.hidden = !box.hidden;
    }
    source.addEventListener("run.output.delta", function (event) { writing(event, false); });
    source.addEventListener("run.output.reset", function (event) { writing(event, true); });
    CLOSING.forEach(function (type) {
      source.addEventListener(type, function () { done(); soon(); });
    });
    source.onerror = function () {
      if (source.readyState === EventSource.CLOSED) { done(); poll(id); }  // refused: no automatic reconnection
    };
  }

  // A conversation on the desk (SPEC §4 "Live handoff"): the element with data-session-events follows the
  // conversation's events (Server-Sent Events) from the last one its page was drawn with. Each new message is added
  // to the thread from the page's <template>, its words set as text (never as markup); a message the thread shows
  // already (data-message-id) is skipped. Each change of status shows on the badge, and the parts it concerns
  // ([data-when-status]: the statuses they are for) show or hide. A stream that ends is resumed by the browser with
  // Last-Event-ID; one that can't be opened (the server is busy) is opened again from the last event seen, 5 s later
  // (then 10 s, 20 s… up to a minute while it is still refused).
  var SPEAKERS = { user: "Customer", assistant: "Agent", team: "Team" };
  var STATUSES = { open: ["open", ""], handed_off: ["handed off", "warn"], closed: ["closed", "ok"] };

  function parsed(text) {
    try { return JSON.parse(text); } catch (e) { return null; }
  }

  function addMessage(conversation, message, scroll) {
    var thread = conversation.querySelector("[data-thread]");
    var template = document.getElementById("said-template");
    if (!thread || !template || !message || typeof message.id !== "string") return;
    var shown = Array.prototype.some.call(thread.querySelectorAll("[data-message-id]"), function (said) {
      return said.getAttribute("data-message-id") === message.id;
    });
    if (shown) return;
    var role = Object.prototype.hasOwnProperty.call(SPEAKERS, message.role) ? message.role : "assistant";
    var said = template.content.firstElementChild.cloneNode(true);
    said.classList.add(role);
    said.setAttribute("data-message-id", message.id);
    said.querySelector("[data-speaker]").textContent =
      role === "team" ? (message.author || SPEAKERS.team) + " (team)" : SPEAKERS[role];
    if (typeof message.created_at === "number") {
      var at = new Date(message.created_at * 1000).toISOString();
      var time = said.querySelector("[data-time]");
      time.setAttribute("datetime", at);
      time.textContent = at.slice(0, 16).replace("T", " ");  // UTC, as the page shows its times
    }
    var bubble = said.querySelector("[data-content]");
    bubble.classList.add(role);
    bubble.textContent = String(message.content || "");
    if (message.unverified_claims && message.unverified_claims.length) {
      var notice = document.createElement("p");
      notice.className = "notice";
      notice.textContent = "Unverified: " + message.unverified_claims.join(", ") +
        " (no tool result confirms it; the chat widget shows the customer a neutral reply instead)";
      said.appendChild(notice);
    }
    var atEnd = thread.scrollHeight - thread.scrollTop - thread.clientHeight < 48;
    var empty = thread.querySelector("[data-thread-empty]");
    if (empty) empty.remove();
    thread.appendChild(said);
    if (scroll || atEnd) thread.scrollTop = thread.scrollHeight;
  }

  function showStatus(conversation, status) {
    var look = STATUSES[status];
    if (!look) return;
    var badge = conversation.querySelector("[data-session-status]");
    if (badge) {
      badge.textContent = look[0];
      badge.className = "badge" + (look[1] ? " " + look[1] : "");
    }
    each(conversation, "[data-when-status]", function (part) {
      part.hidden = part.getAttribute("data-when-status").split(" ").indexOf(status) === -1;
    });
  }

  function followConversation(conversation) {
    if (conversation.kagentFollowed || typeof EventSource === "undefined") return;
    conversation.kagentFollowed = true;
    var url = conversation.getAttribute("data-session-events");
    var last = Number(conversation.getAttribute("data-last-event")) || 0;
    var thread = conversation.querySelector("[data-thread]");
    if (thread) {  // the thread scrolls in its own box, the newest at the end, the reply box right below it
      thread.classList.add("following");
      thread.scrollTop = thread.scrollHeight;
    }
    function seen(event) {
      var id = Number(event.lastEventId);
      if (id > last) last = id;
    }
    var retry = 5000;
    function open() {
      var source = new EventSource(url + "?last_event_id=" + last);
      source.onopen = function () { retry = 5000; };
      source.addEventListener("session.message.created", function (event) {
        seen(event);
        addMessage(conversation, parsed(event.data), false);
      });
      source.addEventListener("session.updated", function (event) {
        seen(event);
        var session = parsed(event.data);
        if (session) showStatus(conversation, session.status);
      });
      source.onerror = function () {
        if (source.readyState !== EventSource.CLOSED) return;  // the browser reconnects by itself
        setTimeout(open, retry);  // refused: no reconnection of its own
        retry = Math.min(retry * 2, 60000);
      };
    }
    open();
  }

  // A reply sent with htmx: the form comes back empty with the message it sent, added at once (the stream brings
  // it too, and whichever comes second is skipped).
  function replySent(root) {
    var data = root.querySelector("#reply-sent");
    var conversation = document.querySelector("[data-session-events]");
    if (!data || !conversation) return;
    var sent = parsed(data.textContent);
    data.remove();
    if (!sent) return;
    addMessage(conversation, sent.message, true);
    showStatus(conversation, sent.status);
  }

  document.addEventListener("htmx:load", function (event) {
    var root = event.detail && event.detail.elt;
    if (!root || !root.querySelectorAll) return;
    if (root.hasAttribute && root.hasAttribute("data-run-events")) follow(root);
    each(root, "[data-run-events]", follow);
    each(root, "[data-session-events]", followConversation);
    replySent(root);
  });
  each(document, "[data-session-events]", followConversation);

  // In the test panel's Message field, Enter sends and Shift+Enter starts a new line.
  document.addEventListener("keydown", function (event) {
    var field = event.target;
    if (event.key !== "Enter" || event.shiftKey || event.isComposing) return;
    if (!field.hasAttribute || !field.hasAttribute("data-submit-on-enter")) return;
    event.preventDefault();
    if (field.form && field.value.trim()) field.form.requestSubmit();
  });
})();
