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

  // Forms that ask first (deleting, rotating).
  document.addEventListener("submit", function (event) {
    var message = event.target.getAttribute && event.target.getAttribute("data-confirm");
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

  document.addEventListener("htmx:load", function (event) {
    var root = event.detail && event.detail.elt;
    if (!root || !root.querySelectorAll) return;
    if (root.hasAttribute && root.hasAttribute("data-run-events")) follow(root);
    each(root, "[data-run-events]", follow);
  });

  // In the test panel's Message field, Enter sends and Shift+Enter starts a new line.
  document.addEventListener("keydown", function (event) {
    var field = event.target;
    if (event.key !== "Enter" || event.shiftKey || event.isComposing) return;
    if (!field.hasAttribute || !field.hasAttribute("data-submit-on-enter")) return;
    event.preventDefault();
    if (field.form && field.value.trim()) field.form.requestSubmit();
  });
})();
