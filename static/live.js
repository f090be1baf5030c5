// The team page's script. The page works without it; with it:
// - times read "3 min ago", with the exact local time on hover;
// - a conversation follows new messages live, and the tab's title counts
//   what arrived while it was hidden;
// - where an addressed message stands (waiting, shown to their agent,
//   read, answered, acked) changes live;
// - forms send in place and show a refusal without losing the text;
// - a message to the viewer that arrives while the tab is in the
//   background shows a browser notification (once they allowed them);
// - the service worker (sw.js) is registered, so the page can be
//   installed and shows what Web Push brings;
// - "Notify me on this device" subscribes the browser to Web Push;
// - on the OAuth consent page (and there nothing else runs), Allow is held
//   until the page has been in view for a second without a break.
// Message text is never parsed here as markup: new messages arrive as
// fragments the server rendered and escaped, parsed inert by DOMParser.
(function () {
  "use strict";

  // The consent page: a click meant for another page, landing on Allow as
  // this one opens (a pop-up timed to a double-click) or comes back into
  // view, finds it disabled. The relay refuses an Allow sooner than a
  // second after it rendered the page too; Deny is never held.
  var consent = document.querySelector("form.consent-answer");
  if (consent) {
    var allow = consent.querySelector("button[value=allow]");
    var held = null;
    var hold = function () {
      allow.disabled = true;
      clearTimeout(held);
      held = document.hidden ? null : setTimeout(function () { allow.disabled = false; }, 1000);
    };
    document.addEventListener("visibilitychange", hold);
    window.addEventListener("focus", hold);
    hold();
    return;
  }

  function relative(date) {
    var seconds = (Date.now() - date.getTime()) / 1000;
    if (seconds < 45) return "just now";
    var minutes = Math.round(seconds / 60);
    if (minutes < 60) return minutes + " min ago";
    var hours = Math.round(minutes / 60);
    if (hours < 24) return hours + (hours === 1 ? " hour ago" : " hours ago");
    var days = Math.round(hours / 24);
    if (days < 7) return days === 1 ? "yesterday" : days + " days ago";
    return date.toLocaleDateString(undefined, { month: "short", day: "numeric", year: "numeric" });
  }

  function showTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (time) {
      var date = new Date(time.getAttribute("datetime"));
      if (isNaN(date.getTime())) return;
      time.textContent = relative(date);
      time.title = date.toLocaleString(undefined, { dateStyle: "full", timeStyle: "long" });
    });
  }

  showTimes(document);
  setInterval(function () { showTimes(document); }, 30000);

  // On a phone the sidebar starts folded away.
  var menu = document.querySelector("details.menu");
  if (menu && window.matchMedia("(max-width: 760px)").matches) menu.removeAttribute("open");

  var conversation = document.querySelector(".conversation[data-stream]");
  var list = document.getElementById("messages");
  var baseTitle = document.title;
  var unseen = 0;
  var lastId = conversation ? Number(conversation.dataset.lastId) || 0 : 0;
  var fetching = Promise.resolve();

  document.addEventListener("visibilitychange", function () {
    if (!document.hidden) { unseen = 0; document.title = baseTitle; }
  });

  // Fetches what came after the last message shown, as the server renders
  // it, and puts it in place; one fetch at a time.
  function catchUp() {
    fetching = fetching.then(function () {
      return fetch(conversation.dataset.fragments + "?after=" + lastId, { credentials: "same-origin" })
        .then(function (response) { return response.ok ? response.text() : ""; })
        .then(function (html) {
          if (!html) return;
          var parsed = new DOMParser().parseFromString("<ol>" + html + "</ol>", "text/html");
          parsed.querySelectorAll("li.message").forEach(function (item) {
            var id = Number(item.id.slice(1));
            if (document.getElementById(item.id)) return;
            var node = document.adoptNode(item);
            showTimes(node);
            list.appendChild(node);
            if (id > lastId) lastId = id;
            if (document.hidden) {
              unseen += 1;
              document.title = "(" + unseen + ") " + baseTitle;
            }
          });
        })
        .catch(function () {});
    });
    return fetching;
  }

  // Worded as the server words them (web/views.rs, DeliveryLine).
  function deliveryLabel(delivery, to) {
    var owed = "";
    if (delivery.expects && !delivery.ack && !delivery.answered_at) {
      owed = " · " + delivery.expects + (delivery.overdue_at ? " overdue" : " expected");
    }
    return stateLabel(delivery, to) + owed;
  }

  function stateLabel(delivery, to) {
    if (delivery.state === "pushed" && delivery.pushes_stopped) {
      return "shown to " + to + "'s agent " + delivery.offers +
        " times, not taken up: waits for its inbox check";
    }
    var how = {
      channel: " as a channel event", wake: " by its hook",
      hook: " with their prompt", stream: " on its stream"
    };
    if (delivery.state === "pushed") return "shown to " + to + "'s agent" + (how[delivery.via] || "");
    if (delivery.state === "acked" && delivery.ack) {
      return "acked: " + delivery.ack.result + (delivery.ack.note ? " — " + delivery.ack.note : "");
    }
    return delivery.state;
  }

  if (conversation && window.EventSource) {
    var source = new EventSource(conversation.dataset.stream + "?since_id=" + lastId);
    source.addEventListener("message", function (event) {
      var id = Number(event.lastEventId);
      if (id > lastId) catchUp();
    });
    source.addEventListener("delivery", function (event) {
      var update;
      try { update = JSON.parse(event.data); } catch (e) { return; }
      var item = document.getElementById("m" + Number(update.id));
      var shown = item && item.querySelector(".delivery");
      if (!shown || !update.delivery) return;
      shown.className = "delivery delivery-" + update.delivery.state;
      shown.textContent = deliveryLabel(update.delivery, shown.dataset.to);
    });
  }

  // Registered on every page: an installed page has it before anyone
  // subscribes, and it shows pushes for every subscribed device.
  var worker = "serviceWorker" in navigator
    ? navigator.serviceWorker.register("/sw.js", { scope: "/" })
    : null;
  if (worker) worker.catch(function () {});

  // What arrives for the viewer, wherever they are on the page: a
  // notification while the tab is hidden. Nothing is claimed by this.
  if (window.EventSource && "Notification" in window) {
    var arrivals = new EventSource("/api/me/stream");
    arrivals.addEventListener("arrived", function (event) {
      if (!document.hidden || Notification.permission !== "granted") return;
      var arrived;
      try { arrived = JSON.parse(event.data); } catch (e) { return; }
      var shown = new Notification(arrived.from + " wrote to you", {
        body: arrived.first_line,
        tag: "crosstalk-" + arrived.id
      });
      shown.onclick = function () {
        window.focus();
        window.location.assign(arrived.url);
      };
    });
  }

  // "Notify me on this device": asks the browser's permission, registers
  // the service worker, subscribes with the relay's key, and hands the
  // subscription to the relay.
  var device = document.getElementById("device-subscribe");
  if (device && worker && "PushManager" in window && "Notification" in window) {
    var deviceError = document.getElementById("device-error");
    device.hidden = false;
    device.addEventListener("click", function () {
      device.disabled = true;
      deviceError.hidden = true;
      Notification.requestPermission().then(function (permission) {
        if (permission !== "granted") throw new Error("This browser blocks notifications from this page.");
        return worker;
      }).then(function () {
        return navigator.serviceWorker.ready;
      }).then(function (registration) {
        return registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: device.dataset.key });
      }).then(function (subscription) {
        var json = subscription.toJSON();
        return fetch("/settings/devices", {
          method: "POST",
          body: new URLSearchParams({ csrf: device.dataset.csrf, endpoint: json.endpoint, p256dh: json.keys.p256dh, auth: json.keys.auth }),
          headers: { "X-Requested-With": "fetch" },
          credentials: "same-origin"
        });
      }).then(function (response) {
        if (response.status === 201) { window.location.reload(); return; }
        return response.json().then(function (answer) {
          throw new Error((answer.refused || answer.error).message);
        });
      }).catch(function (error) {
        deviceError.textContent = error.message || "This browser could not be subscribed.";
        deviceError.hidden = false;
        device.disabled = false;
      });
    });
  }

  document.querySelectorAll("form.compose").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var error = form.querySelector(".error");
      var button = form.querySelector("button[type=submit]");
      button.disabled = true;
      fetch(form.action, {
        method: "POST",
        body: new URLSearchParams(new FormData(form)),
        headers: { "X-Requested-With": "fetch" },
        credentials: "same-origin"
      }).then(function (response) {
        if (response.status === 201) {
          error.hidden = true;
          var location = response.headers.get("Location") || "";
          var here = conversation && conversation.dataset.fragments.replace(/\/messages$/, "");
          if (here && location.split("#")[0] === here) {
            form.querySelector("textarea").value = "";
            return catchUp();
          }
          window.location.assign(location);
          return;
        }
        return response.text().then(function (text) {
          var reason = "";
          try {
            var answer = JSON.parse(text);
            reason = (answer.refused || answer.error).message;
          } catch (e) { reason = ""; }
          error.textContent = reason || "The relay refused this message (" + response.status + ").";
          error.hidden = false;
        });
      }).catch(function () {
        error.textContent = "The relay could not be reached; your text is still here.";
        error.hidden = false;
      }).then(function () { button.disabled = false; });
    });
  });
})();
