/*
 * K-Agent chat widget: one <script> tag on a business's page opens a chat with its agent.
 *
 *   <script src="https://kagent.example/widget.js" data-key="ka_pk_…" data-agent="agt_…" async></script>
 *
 * Options (data-* attributes, or KAgent.init({...}) without data-key):
 *   key (data-key)                  a publishable key (ka_pk_…) whose allowed origins list this page's origin
 *   agent (data-agent)              the agent's id
 *   apiBase (data-api-base)         the API's origin; default: where this script came from
 *   endUserToken (data-end-user-token)  a verified customer's token, signed by the business's server
 *   title (data-title), launcherLabel (data-launcher-label)
 *   clientTools ({name: async fn(args)})  answers the agent's client tools (KAgent.init only)
 *
 * Opening the chat shows the agent's greeting (GET /v1/agents/{id}/greeting), if the business wrote one.
 *
 * Sessions: POST /v1/sessions once per tab (its id is kept in sessionStorage), POST /v1/runs per message, then
 * GET /v1/runs/{id}/events read with fetch (EventSource can't send Authorization), resumed with Last-Event-ID when
 * a stream ends before the run's last event. Handoffs and ticket numbers are shown only from the steps' receipts:
 * what the tools really made, never what the model's text says. Every text goes in with textContent.
 *
 * Live handoff (SPEC §4): the conversation's own events (GET /v1/sessions/{id}/events, read the same way) bring the
 * team's replies and the session's status. While the team holds the conversation (`handed_off`: a handoff receipt,
 * session.updated, or a 409 session_handed_off from POST /v1/runs), the customer's messages go to the team with
 * POST /v1/sessions/{id}/messages (role user: no run); once it is handed back (`open`) the next message starts a run
 * again. The last event read is kept beside the session id, so a reload follows on from there.
 */
(function () {
  "use strict";
  if (window.KAgent && window.KAgent.version) return; // loaded twice: the first one stays

  var CLOSING = { "run.completed": 1, "run.failed": 1, "run.cancelled": 1, "run.requires_action": 1 };
  var MAX_RECONNECTS = 8; // failed attempts in a row
  var MAX_QUIET_MS = 5 * 60 * 1000; // a run that says nothing for this long: the customer is told
  var APPROVAL_WAIT = "A person of our team is checking this request before it is done. The reply follows here once " +
    "they have decided.";
  var MAX_SESSION_WAIT_MS = 30 * 1000; // the longest pause between two attempts to follow the conversation
  var UNCONFIRMED = "I couldn't confirm that with our systems, so I won't say it was done. Please ask again, or ask " +
    "to talk to a person.";
  // What the customer reads as the conversation changes hands (SPEC §4 "Live handoff").
  var TO_TEAM = "You're being transferred to a person from the team. They'll continue here.";
  var WITH_TEAM = "A person from the team will continue this conversation here.";
  var TEAM_ANSWERS = "A person from the team will answer here.";
  var BACK_TO_AGENT = "You're back with our assistant. It will answer your next message.";
  var CLOSED = "The team closed this conversation. Write again any time to continue.";
  var script = document.currentScript;
  var scriptUrl = script && script.src ? script.src : "";
  var instance = null;

  function originOf(url) {
    try { return new URL(url, location.href).origin; } catch (e) { return location.origin; }
  }

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) { node.setAttribute(name, attrs[name]); });
    if (text != null) node.textContent = String(text);
    return node;
  }

  function sleep(ms) { return new Promise(function (resolve) { setTimeout(resolve, ms); }); }

  function Problem(code, status, retryAfter) {
    this.code = code; this.status = status || 0; this.retryAfter = retryAfter;
  }

  // What a customer reads for each problem: kind, with nothing of ours in it.
  function kindly(problem) {
    var code = problem && problem.code;
    if (code === "rate_limited") {
      var seconds = parseInt(problem.retryAfter, 10);
      return "You're sending messages faster than we can answer. Please wait " +
        (seconds > 0 ? seconds + (seconds === 1 ? " second" : " seconds") : "a moment") + " and try again.";
    }
    if (code === "network") return "We can't reach the chat right now. Check your connection and try again.";
    if (code === "invalid_end_user_token") return "Your sign-in has expired. Please reload the page to continue.";
    if (code === "timeout") return "This is taking longer than usual. Please try again in a moment.";
    if (code === "run_failed") return "Sorry, we couldn't answer that. Please try again.";
    if (code === "invalid_api_key" || code === "api_key_revoked" || code === "origin_not_allowed" ||
        code === "publishable_key_not_allowed" || code === "not_published" || code === "not_found") {
      return "The chat isn't available on this page right now.";
    }
    return "Something went wrong on our side. Please try again.";
  }

  function Widget(options) {
    this.key = String(options.key || "");
    this.agent = String(options.agent || "");
    this.apiBase = originOf(options.apiBase || scriptUrl || location.href);
    this.endUserToken = options.endUserToken ? String(options.endUserToken) : null;
    this.title = String(options.title || "Chat");
    this.launcherLabel = String(options.launcherLabel || "Chat with us");
    this.clientTools = options.clientTools || {};
    this.storageKey = "kagent:session:" + this.agent + ":" + this.key.slice(-8);
    this.followKey = "kagent:following:" + this.agent + ":" + this.key.slice(-8); // {session, last, status}
    this.busy = false;
    this.replying = false; // busy with a run of ours: "The assistant is replying…"
    this.loaded = false;
    this.sessionStatus = "open"; // open | handed_off | closed, as the API says
    this.handedOffAt = 0; // the session's handed_off_at as last heard: a session.updated from before it is old news
    this.shown = {}; // message ids in the thread
    this.newestAt = 0; // the newest created_at of the thread as reloaded: older events replayed are in it already
    this.ours = {}; // runs this tab started: their answers come through their own events
    this.watch = null; // the conversation's event stream being followed
    this.greeted = false; // the greeting is asked for once, when the chat is first opened
    this.build();
    // A customer waiting for the team who moves to another page of the site: the thread is followed at once, so
    // the team's reply shows on the launcher even before the chat is opened again.
    var following = this.following();
    if (following && following.status === "handed_off") {
      this.loaded = true;
      this.restore();
    }
  }

  // --- the page ---------------------------------------------------------------------------------------------------

  Widget.prototype.build = function () {
    var self = this;
    var host = el("div", { "data-kagent-widget": "" });
    var root = host.attachShadow ? host.attachShadow({ mode: "open" }) : host; // styles kept apart from the page's
    var sheet = el("link", { rel: "stylesheet", href: new URL("widget.css", scriptUrl || this.apiBase + "/").href });
    host.style.display = "none"; // shown once styled: no flash of a bare button on the page
    sheet.addEventListener("load", function () { host.style.display = ""; });
    sheet.addEventListener("error", function () { host.style.display = ""; });
    root.appendChild(sheet);

    this.launcher = el("button", { type: "button", class: "launcher", "aria-expanded": "false",
      "aria-controls": "kagent-panel" }, this.launcherLabel);
    this.badge = el("span", { class: "badge", hidden: "" }, "New reply");
    this.launcher.appendChild(this.badge);
    this.panel = el("section", { class: "panel", id: "kagent-panel", role: "dialog", "aria-modal": "false",
      "aria-labelledby": "kagent-title", hidden: "" });
    var header = el("header");
    header.appendChild(el("h2", { id: "kagent-title" }, this.title));
    this.closeButton = el("button", { type: "button", class: "close", "aria-label": "Close chat" }, "\u00d7");
    header.appendChild(this.closeButton);
    this.log = el("div", { class: "log", role: "log", "aria-live": "polite", "aria-label": "Conversation",
      tabindex: "0" });
    this.status = el("p", { class: "status", role: "status" });
    this.error = el("p", { class: "error", role: "alert" });
    this.form = el("form", { class: "compose" });
    var label = el("label", { for: "kagent-input" }, "Message");
    this.input = el("textarea", { id: "kagent-input", rows: "2", maxlength: "4000", dir: "auto",
      autocomplete: "off", placeholder: "Type your message" });
    this.send = el("button", { type: "submit", class: "send" }, "Send");
    this.form.appendChild(label);
    this.form.appendChild(this.input);
    this.form.appendChild(this.send);
    [header, this.log, this.status, this.error, this.form].forEach(function (part) { self.panel.appendChild(part); });
    root.appendChild(this.launcher);
    root.appendChild(this.panel);
    document.body.appendChild(host);

    this.launcher.addEventListener("click", function () { self.open(); });
    this.closeButton.addEventListener("click", function () { self.close(); });
    this.panel.addEventListener("keydown", function (event) {
      if (event.key === "Escape") { event.preventDefault(); self.close(); }
      if (event.key === "Tab" && self.fullScreen()) self.keepFocusInside(event);
    });
    this.input.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        self.submit();
      }
    });
    this.form.addEventListener("submit", function (event) { event.preventDefault(); self.submit(); });
  };

  // Under 480 px the chat covers the page, so it acts as a modal dialog there: focus stays inside.
  Widget.prototype.fullScreen = function () {
    return !!(window.matchMedia && window.matchMedia("(max-width: 480px)").matches);
  };

  Widget.prototype.keepFocusInside = function (event) {
    var stops = [this.closeButton, this.log, this.input, this.send].filter(function (node) { return !node.disabled; });
    var root = this.panel.getRootNode();
    var index = stops.indexOf(root.activeElement);
    var next = event.shiftKey ? (index <= 0 ? stops.length - 1 : index - 1) : (index + 1) % stops.length;
    event.preventDefault();
    stops[next].focus();
  };

  Widget.prototype.open = function () {
    this.panel.setAttribute("aria-modal", this.fullScreen() ? "true" : "false");
    this.panel.hidden = false;
    this.badge.hidden = true;
    this.launcher.setAttribute("aria-expanded", "true");
    this.launcher.hidden = true;
    this.log.scrollTop = this.log.scrollHeight; // what came while it was closed
    this.input.focus();
    if (!this.greeted) {
      this.greeted = true;
      this.greet();
    }
    if (!this.loaded) {
      this.loaded = true;
      this.restore();
    }
  };

  // The business's greeting for this agent (GET /v1/agents/{id}/greeting), first in the chat once it is opened: the
  // published words, in the assistant's place, never sent to the model. No greeting, or none to be had: nothing.
  Widget.prototype.greet = function () {
    var self = this;
    var path = "/v1/agents/" + encodeURIComponent(this.agent) + "/greeting";
    return this.call("GET", path).then(function (answer) {
      if (!answer || typeof answer.greeting !== "string" || !answer.greeting) return;
      var row = el("div", { class: "message assistant greeting" });
      row.appendChild(el("span", { class: "visually-hidden" }, "Assistant said:"));
      row.appendChild(el("p", { dir: "auto" }, answer.greeting));
      self.log.insertBefore(row, self.log.firstChild); // before the conversation, however fast it came back
    }).catch(function () { /* the chat works without it */ });
  };

  Widget.prototype.close = function () {
    this.panel.hidden = true;
    this.launcher.hidden = false;
    this.launcher.setAttribute("aria-expanded", "false");
    this.launcher.focus();
  };

  Widget.prototype.say = function (who, text, into) {
    var row = el("div", { class: "message " + who });
    row.appendChild(el("span", { class: "visually-hidden" }, who === "user" ? "You said:" : "Assistant said:"));
    row.appendChild(el("p", { dir: "auto" }, text));
    return this.add(row, into);
  };

  // A person of the business: their name as they sign (`author`), and "Team", apart from the agent's answers.
  Widget.prototype.sayForTeam = function (author, text, into) {
    var row = el("div", { class: "message team" });
    row.appendChild(el("span", { class: "visually-hidden" }, (author || "A person") + " from the team said:"));
    row.appendChild(el("span", { class: "author", dir: "auto", "aria-hidden": "true" },
      author ? author + " \u00b7 Team" : "Team"));
    row.appendChild(el("p", { dir: "auto" }, text));
    return this.add(row, into);
  };

  // A message of the conversation as the API renders it (a reload, the conversation's events), once.
  Widget.prototype.show = function (message, into) {
    if (this.shown[message.id]) return null;
    this.shown[message.id] = true;
    if (message.role === "user") return this.say("user", message.content, into);
    if (message.role === "team") return this.sayForTeam(message.author, message.content, into);
    // As when it arrived: an answer with claims no tool result confirmed is not shown (see settle).
    var unverified = message.unverified_claims && message.unverified_claims.length;
    return this.say("assistant", unverified ? UNCONFIRMED : message.content, into);
  };

  Widget.prototype.notice = function (kind, text, into) {
    return this.add(el("div", { class: "notice " + kind }, text), into);
  };

  Widget.prototype.add = function (row, into) {
    (into || this.log).appendChild(row);
    this.log.scrollTop = this.log.scrollHeight;
    return row;
  };

  Widget.prototype.showError = function (problem) {
    this.error.textContent = problem ? kindly(problem) : "";
    if (problem && problem.code === "network") {
      // For the page's developer: a refused origin looks like a network failure to a page.
      console.warn("K-Agent widget: no answer from " + this.apiBase + ". If the API is up, add " + location.origin +
        " to the publishable key's allowed origins (dashboard: Settings \u203a API keys).");
    } else if (problem && problem.code && problem.code !== "rate_limited") {
      console.warn("K-Agent widget: " + problem.code + " (HTTP " + problem.status + ")");
    }
  };

  // `replying`: a run of ours is answering. A message to the team only holds the Send button while it goes.
  Widget.prototype.setBusy = function (busy, replying) {
    this.busy = busy;
    this.replying = !!(busy && replying);
    this.send.disabled = busy;
    this.log.setAttribute("aria-busy", this.replying ? "true" : "false");
    this.showStatus();
  };

  Widget.prototype.showStatus = function () {
    var text = this.replying ? "The assistant is replying\u2026" : "";
    if (!this.replying && this.sessionStatus === "handed_off") text = TEAM_ANSWERS;
    if (this.status.textContent !== text) this.status.textContent = text;
  };

  // The conversation changed hands (a handoff receipt, session.updated, a 409, a reload): `tell` says so in the
  // thread, once per change.
  Widget.prototype.setSessionStatus = function (status, tell) {
    var was = this.sessionStatus;
    if (status !== "open" && status !== "handed_off" && status !== "closed") return;
    this.sessionStatus = status;
    if (status !== was) {
      if (tell && status === "handed_off") this.notice("handoff", TO_TEAM);
      else if (tell && status === "closed") this.notice("info", CLOSED);
      else if (tell && was === "handed_off") this.notice("info", BACK_TO_AGENT);
      this.keep();
    }
    this.showStatus();
  };

  Widget.prototype.unread = function () {
    if (this.panel.hidden) this.badge.hidden = false;
  };

  // --- the API ------------------------------------------------------------------------------------------------------

  Widget.prototype.request = function (method, path, body, extraHeaders, signal) {
    var headers = { Authorization: "Bearer " + this.key };
    if (body) headers["Content-Type"] = "application/json";
    if (this.endUserToken && method === "GET") headers["X-End-User-Token"] = this.endUserToken;
    Object.keys(extraHeaders || {}).forEach(function (name) { headers[name] = extraHeaders[name]; });
    return fetch(this.apiBase + path, {
      method: method, headers: headers, body: body ? JSON.stringify(body) : undefined,
      mode: "cors", credentials: "omit", cache: "no-store", signal: signal,
    }).catch(function () { throw new Problem("network"); });
  };

  Widget.prototype.call = function (method, path, body, extraHeaders) {
    return this.request(method, path, body, extraHeaders).then(function (response) {
      if (response.ok) return response.json();
      return response.json().catch(function () { return {}; }).then(function (answer) {
        var code = answer && answer.error && answer.error.code;
        throw new Problem(code || "http_" + response.status, response.status, response.headers.get("Retry-After"));
      });
    });
  };

  Widget.prototype.withToken = function (body) {
    if (this.endUserToken) body.end_user_token = this.endUserToken;
    return body;
  };

  Widget.prototype.session = function () {
    var self = this;
    var stored = null;
    try { stored = sessionStorage.getItem(this.storageKey); } catch (e) { /* storage blocked: one per page */ }
    if (stored || this.sessionId) {
      this.sessionId = stored || this.sessionId;
      this.followSession();
      return Promise.resolve(this.sessionId);
    }
    return this.call("POST", "/v1/sessions", this.withToken({ agent: this.agent })).then(function (made) {
      self.remember(made.id);
      self.setSessionStatus(made.status, false);
      self.followSession();
      return made.id;
    });
  };

  Widget.prototype.remember = function (sessionId) {
    if (this.sessionId && this.sessionId !== sessionId) { // another conversation from now on
      this.unfollowSession();
      this.sessionStatus = "open";
      this.handedOffAt = 0;
      this.newestAt = 0;
      this.showStatus();
    }
    this.sessionId = sessionId;
    try {
      if (sessionId) sessionStorage.setItem(this.storageKey, sessionId);
      else sessionStorage.removeItem(this.storageKey);
    } catch (e) { /* storage blocked */ }
    this.keep();
  };

  // Where this tab is in the conversation's events, and who holds it, beside the session id: a reload follows on
  // from there.
  Widget.prototype.keep = function () {
    try {
      if (!this.sessionId) return sessionStorage.removeItem(this.followKey);
      var last = this.watch && this.watch.sessionId === this.sessionId ? this.watch.lastId : 0;
      var kept = this.following();
      if (!last && kept) last = kept.last; // not following (yet): what was kept stays
      sessionStorage.setItem(this.followKey,
        JSON.stringify({ session: this.sessionId, last: last, status: this.sessionStatus }));
    } catch (e) { /* storage blocked: a reload follows from the start */ }
  };

  Widget.prototype.following = function () {
    try {
      var kept = JSON.parse(sessionStorage.getItem(this.followKey) || "null");
      var session = this.sessionId || sessionStorage.getItem(this.storageKey);
      if (kept && kept.session && kept.session === session) return kept;
    } catch (e) { /* storage blocked, or not ours */ }
    return null;
  };

  // The conversation so far, when this tab already had one (a reload, another page of the site).
  Widget.prototype.restore = function () {
    var self = this;
    var stored = null;
    try { stored = sessionStorage.getItem(this.storageKey); } catch (e) { return; }
    if (!stored) return;
    this.sessionId = stored;
    this.log.setAttribute("aria-busy", "true"); // the earlier messages are not read out again one by one
    Promise.all([
      this.call("GET", "/v1/sessions/" + encodeURIComponent(stored)),
      this.call("GET", "/v1/sessions/" + encodeURIComponent(stored) + "/messages?limit=100"),
    ]).then(function (answers) {
      var session = answers[0];
      var earlier = document.createDocumentFragment(); // before anything sent meanwhile
      answers[1].data.slice().reverse().forEach(function (message) {
        self.show(message, earlier);
        self.newestAt = Math.max(self.newestAt, message.created_at || 0);
      });
      self.handedOffAt = Math.max(self.handedOffAt, session.handed_off_at || 0);
      if (session.status === "handed_off" && self.sessionStatus !== "handed_off") {
        self.notice("handoff", WITH_TEAM, earlier);
      }
      self.setSessionStatus(session.status, false);
      var first = self.log.firstChild; // after the greeting, before anything sent meanwhile
      if (first && first.classList && first.classList.contains("greeting")) first = first.nextSibling;
      self.log.insertBefore(earlier, first);
      self.log.scrollTop = self.log.scrollHeight;
      self.followSession();
    }).catch(function (problem) {
      if (problem && problem.status === 404) self.remember(null); // gone, or another customer's: start afresh
    }).then(function () {
      if (!self.replying) self.log.setAttribute("aria-busy", "false");
    });
  };

  Widget.prototype.submit = function () {
    var self = this;
    var text = this.input.value.trim();
    if (!text || this.busy) return;
    this.showError(null);
    var bubble = this.say("user", text);
    this.input.value = "";
    var sent = false;
    function delivered() { sent = true; }
    this.deliver(text, true, delivered).catch(function (problem) {
      if (!sent) { // nothing was sent: give the message back to send again
        bubble.remove();
        if (!self.input.value) self.input.value = text;
      }
      self.showError(problem instanceof Problem ? problem : new Problem("internal"));
    }).then(function () {
      self.setBusy(false);
      self.input.focus();
    });
  };

  // The customer's message to whoever holds the conversation: the agent (a run, followed to its answer) or, while
  // it is handed off, the team (a message, no run). `delivered` is called once the API has it.
  Widget.prototype.deliver = function (text, retry, delivered) {
    var self = this;
    if (this.sessionStatus === "handed_off") {
      this.setBusy(true, false);
      return this.writeToTeam(text).then(delivered, function (problem) {
        // The kept session is gone (or was another customer's): a new conversation, with the agent, once.
        if (retry && problem instanceof Problem && problem.status === 404 && self.sessionId) {
          self.remember(null);
          return self.deliver(text, false, delivered);
        }
        throw problem;
      });
    }
    this.setBusy(true, true);
    return this.startRun(text, retry).then(function (run) {
      delivered();
      self.ours[run.id] = true;
      return self.follow(run.id);
    }, function (problem) {
      if (problem instanceof Problem && problem.code === "session_handed_off") {
        // The team took the conversation before this tab heard of it: the message is for them.
        self.setSessionStatus("handed_off", true);
        return self.deliver(text, false, delivered);
      }
      throw problem;
    });
  };

  Widget.prototype.startRun = function (text, retry) {
    var self = this;
    return this.session().then(function (sessionId) {
      return self.call("POST", "/v1/runs", self.withToken({ agent: self.agent, session: sessionId, input: text }));
    }).catch(function (problem) {
      // The kept session is gone (or was another customer's): one new session, once.
      if (retry && problem instanceof Problem && problem.status === 404 && self.sessionId) {
        self.remember(null);
        return self.startRun(text, false);
      }
      throw problem;
    });
  };

  // A message for the team: written into the conversation as the customer's (a verified customer's token in its
  // header: the body is the message alone).
  Widget.prototype.writeToTeam = function (text) {
    var self = this;
    var headers = this.endUserToken ? { "X-End-User-Token": this.endUserToken } : null;
    return this.session().then(function (sessionId) {
      var path = "/v1/sessions/" + encodeURIComponent(sessionId) + "/messages";
      return self.call("POST", path, { role: "user", content: text }, headers);
    }).then(function (message) {
      self.shown[message.id] = true;
      return message;
    });
  };

  // --- event streams ------------------------------------------------------------------------------------------------

  // Reads a stream of Server-Sent Events with fetch (an EventSource can't send the key), from after
  // `state.lastId`; `handle(type, data)` gets each event and returns true to stop reading. Resolves when the stream
  // ended (or was stopped), with 204 when the server had nothing more to send.
  Widget.prototype.events = function (path, state, handle) {
    var headers = { Accept: "text/event-stream" };
    if (state.lastId) headers["Last-Event-ID"] = String(state.lastId);
    var controller = typeof AbortController === "function" ? new AbortController() : null;
    state.controller = controller;
    return this.request("GET", path, null, headers, controller ? controller.signal : undefined)
      .then(function (response) {
        if (response.status === 204) return 204;
        if (!response.ok) {
          throw new Problem(response.status === 429 ? "rate_limited" : "http_" + response.status, response.status,
            response.headers.get("Retry-After"));
        }
        var reader = response.body.getReader();
        var decoder = new TextDecoder();
        var buffer = "";
        var fields = { data: [] };
        var stop = false;
        function dispatch() {
          var type = fields.event || "message";
          if (fields.id != null && /^\d+$/.test(fields.id)) state.lastId = parseInt(fields.id, 10);
          if (fields.data.length) {
            var data = null;
            try { data = JSON.parse(fields.data.join("\n")); } catch (e) { data = null; }
            stop = !!handle(type, data);
          }
          fields = { data: [] };
        }
        function line(text) {
          if (text === "") return dispatch();
          if (text.charAt(0) === ":") return; // keep-alive
          var colon = text.indexOf(":");
          var name = colon < 0 ? text : text.slice(0, colon);
          var value = colon < 0 ? "" : text.slice(colon + 1).replace(/^ /, "");
          if (name === "data") fields.data.push(value);
          else if (name === "event") fields.event = value;
          else if (name === "id") fields.id = value;
          else if (name === "retry" && /^\d+$/.test(value)) state.retryMs = parseInt(value, 10);
        }
        function pump() {
          return reader.read().then(function (chunk) {
            if (chunk.done) return;
            buffer += decoder.decode(chunk.value, { stream: true });
            var lines = buffer.split(/\r\n|\r|\n/);
            buffer = lines.pop();
            for (var i = 0; i < lines.length; i += 1) {
              line(lines[i]);
              if (stop) { reader.cancel().catch(function () {}); return; }
            }
            return pump();
          });
        }
        return pump().catch(function () { throw new Problem("network"); });
      });
  };

  // --- run events ---------------------------------------------------------------------------------------------------

  // Follows a run until its last event; a stream that ends without one (a proxy's timeout, a server's limit, the
  // network) is opened again with Last-Event-ID, so nothing is missed and nothing is shown twice.
  // `quietUntil`: a time (ms) before which a run that says nothing is not given up on (one waiting for a person).
  Widget.prototype.follow = function (runId, afterId, quietUntil) {
    var self = this;
    var state = { lastId: afterId || 0, retryMs: 2000, failures: 0, closing: null, heardAt: Date.now(),
      quietUntil: quietUntil || 0 };
    function round() {
      var before = state.lastId;
      return self.stream(runId, state).then(function () {
        if (state.closing) return self.settle(runId, state.closing, state.lastId);
        state.failures = 0;
        if (state.lastId > before) { // ended early (a server's or a proxy's limit): on at once, from where it was
          state.heardAt = Date.now();
          return round();
        }
        if (Date.now() - state.heardAt > MAX_QUIET_MS && Date.now() > state.quietUntil) throw new Problem("timeout");
        return sleep(state.retryMs).then(round);
      }, function (problem) {
        if (problem.status && problem.status !== 429 && problem.status < 500) throw problem;
        if (state.lastId > before) state.failures = 0;
        state.failures += 1;
        if (state.failures > MAX_RECONNECTS) throw problem;
        var wait = Math.min(state.retryMs * state.failures, 15000);
        if (problem.retryAfter) wait = Math.max(wait, (parseInt(problem.retryAfter, 10) || 0) * 1000);
        return sleep(wait).then(round);
      });
    }
    return round();
  };

  Widget.prototype.stream = function (runId, state) {
    var self = this;
    var path = "/v1/runs/" + encodeURIComponent(runId) + "/events";
    return this.events(path, state, function (type, data) {
      if (data) self.onEvent(type, data);
      if (!CLOSING[type]) return false;
      state.closing = { type: type, data: data };
      return true;
    }).then(function (answer) {
      if (answer !== 204) return;
      // The run ended and every event was read: its end is the run as it is now.
      return self.call("GET", "/v1/runs/" + encodeURIComponent(runId)).then(function (run) {
        state.closing = { type: "run." + run.status, data: run };
      });
    });
  };

  // The answer as it is written: whole sentences the truthfulness guard passed (run.output.delta), taken back when
  // they turn out not to be the answer (run.output.reset). Set with textContent, as every text here.
  Widget.prototype.writing = function (delta) {
    if (!this.live) {
      this.live = this.say("assistant", "");
      this.live.classList.add("writing");
    }
    var text = this.live.querySelector("p");
    text.textContent += delta;
    this.log.scrollTop = this.log.scrollHeight;
  };

  Widget.prototype.takeBack = function () {
    if (this.live) this.live.remove();
    this.live = null;
  };

  Widget.prototype.onEvent = function (type, data) {
    if (type === "run.output.delta" && typeof data.delta === "string") return this.writing(data.delta);
    if (type === "run.output.reset") return this.takeBack();
    if (type !== "run.step.created" || !data.tool_call) return;
    var receipt = data.tool_call.receipt;
    if (!receipt) return;
    if (receipt.handoff) this.setSessionStatus("handed_off", true); // said once, whichever stream tells it first
    if (receipt.ticket && receipt.ticket.number) {
      this.notice("ticket", "Ticket " + receipt.ticket.number + " is open. Keep this number for reference.");
    }
  };

  Widget.prototype.settle = function (runId, closing, lastId) {
    var self = this;
    var run = closing.data || {};
    if (closing.type === "run.completed") {
      var output = run.output || {};
      // An answer the truthfulness guard couldn't match to a tool result (a ticket, a handoff no tool made) is not
      // shown to the customer: a neutral reply stands in for it.
      var unverified = output.unverified_claims && output.unverified_claims.length;
      var answer = unverified ? UNCONFIRMED : output.text || "";
      if (this.live) { // shown as it was written: the run's own text is the last word
        this.live.querySelector("p").textContent = answer;
        this.live.classList.remove("writing");
        this.live = null;
      } else {
        this.say("assistant", answer);
      }
      return null;
    }
    this.takeBack();
    if (closing.type === "run.cancelled") {
      // Superseded: a person of the team took the conversation meanwhile, and says so in it.
      if (run.cancellation_reason !== "superseded") this.notice("info", "This reply was stopped.");
      return null;
    }
    var action = run.required_action || {};
    if (closing.type === "run.requires_action" && action.type === "approve_tool_calls") {
      // A person of the business signs the action off first: the customer hears that it is being checked, and the
      // run goes on once they decide (or their time runs out), so it is followed until then.
      this.notice("info", APPROVAL_WAIT);
      return this.follow(runId, lastId, (action.expires_at || 0) * 1000 + MAX_QUIET_MS);
    }
    // A pause read after it was answered (a replay: the run as it is now) has nothing left to answer.
    if (closing.type === "run.requires_action" && !run.required_action) return this.follow(runId, lastId);
    if (closing.type === "run.requires_action") return this.answerTools(runId, run).then(function () {
      return self.follow(runId, lastId); // the run goes on after its pause: from the events after it
    });
    throw new Problem("run_failed");
  };

  // Client tools the business's page answers itself (KAgent.init({clientTools: {...}})); without one, an error.
  Widget.prototype.answerTools = function (runId, run) {
    var self = this;
    var calls = (run.required_action && run.required_action.tool_calls) || [];
    return Promise.all(calls.map(function (call) {
      var tool = self.clientTools[call.name];
      var answer = typeof tool === "function"
        ? Promise.resolve().then(function () { return tool(call.arguments || {}); })
        : Promise.reject(new Error("no client tool " + call.name));
      return answer.then(function (output) {
        return { call_id: call.call_id, output: output === undefined ? null : output };
      }, function (error) {
        return { call_id: call.call_id, output: { error: String(error && error.message || error) }, is_error: true };
      });
    })).then(function (outputs) {
      return self.call("POST", "/v1/runs/" + encodeURIComponent(runId) + "/submit_tool_outputs",
        self.withToken({ tool_outputs: outputs }));
    });
  };

  // --- the conversation's events (live handoff) ---------------------------------------------------------------------

  // Follows the session's events for as long as the page is open: the stream ends at the server's time limit and is
  // opened again from the last event read; a failure waits longer each time, up to MAX_SESSION_WAIT_MS. A stream
  // the API refuses for good (the session gone, the key revoked) is left.
  Widget.prototype.followSession = function () {
    var self = this;
    if (!this.sessionId || (this.watch && this.watch.sessionId === this.sessionId)) return;
    this.unfollowSession();
    var kept = this.following();
    var watch = { sessionId: this.sessionId, lastId: kept ? kept.last || 0 : 0, retryMs: 2000, failures: 0,
      stopped: false, controller: null };
    this.watch = watch;
    var path = "/v1/sessions/" + encodeURIComponent(watch.sessionId) + "/events";
    function round() {
      if (watch.stopped) return null;
      var before = watch.lastId;
      var openedAt = Date.now();
      return self.events(path, watch, function (type, data) {
        if (watch.stopped) return true;
        if (data) self.onSessionEvent(type, data);
        self.keep();
        return false;
      }).then(function () {
        watch.failures = 0;
        // At its time limit: on at once; a stream that ended as soon as it began waits a moment first.
        return sleep(Date.now() - openedAt > 10000 ? 0 : watch.retryMs).then(round);
      }, function (problem) {
        if (watch.stopped) return null;
        if (problem.status && problem.status !== 429 && problem.status < 500) {
          watch.stopped = true;
          return null;
        }
        if (watch.lastId > before) watch.failures = 0;
        watch.failures += 1;
        var wait = Math.min(watch.retryMs * Math.pow(2, Math.min(watch.failures - 1, 5)), MAX_SESSION_WAIT_MS);
        if (problem.retryAfter) wait = Math.max(wait, (parseInt(problem.retryAfter, 10) || 0) * 1000);
        return sleep(wait).then(round);
      });
    }
    round();
  };

  Widget.prototype.unfollowSession = function () {
    if (!this.watch) return;
    this.watch.stopped = true;
    if (this.watch.controller) this.watch.controller.abort();
    this.watch = null;
  };

  Widget.prototype.onSessionEvent = function (type, data) {
    if (type === "session.updated") {
      // A session.updated from before the session's last handoff this tab knows of is old news (a replay).
      var at = data.handed_off_at || 0;
      if (at < this.handedOffAt) return;
      this.handedOffAt = at;
      return this.setSessionStatus(data.status, true);
    }
    if (type !== "session.message.created" || !data.id || this.shown[data.id]) return;
    // The customer's own words are in the thread as they were sent; messages older than the thread as it was
    // reloaded are in it already (a replay); a run this tab follows brings its own answer.
    if (data.role === "user" || (data.created_at || 0) < this.newestAt) return;
    if (data.role === "assistant" && (this.replying || this.ours[data.run])) return;
    this.show(data);
    if (data.role === "team") this.unread();
  };

  // --- starting ---------------------------------------------------------------------------------------------------

  function init(options) {
    if (instance) return instance;
    options = options || {};
    var key = String(options.key || "");
    if (key.indexOf("ka_sk_") === 0) {
      console.error("K-Agent widget: that is a secret key. Never put it in a web page: revoke it, and use a " +
        "publishable key (ka_pk_…).");
      return null;
    }
    if (key.indexOf("ka_pk_") !== 0 || !options.agent) {
      console.error("K-Agent widget: a publishable key (data-key=\"ka_pk_…\") and an agent (data-agent) are needed.");
      return null;
    }
    function start() { instance = new Widget(options); }
    if (document.body) start();
    else document.addEventListener("DOMContentLoaded", start);
    return true;
  }

  window.KAgent = {
    version: "1",
    init: init,
    open: function () { if (instance) instance.open(); },
    close: function () { if (instance) instance.close(); },
  };

  if (script && script.dataset && script.dataset.key) {
    init({
      key: script.dataset.key,
      agent: script.dataset.agent,
      apiBase: script.dataset.apiBase,
      endUserToken: script.dataset.endUserToken,
      title: script.dataset.title,
      launcherLabel: script.dataset.launcherLabel,
    });
  }
})();
