// The team page's service worker: shows what the relay pushes (Web Push)
// as a notification, and opens the page a notification is about, on this
// relay's own origin only.
"use strict";

self.addEventListener("push", function (event) {
  var data = {};
  try {
    data = event.data ? event.data.json() : {};
  } catch (e) {
    data = {};
  }
  event.waitUntil(self.registration.showNotification(data.title || "crosstalk", {
    body: data.body || "",
    tag: data.tag,
    data: { url: data.url || "/" }
  }));
});

self.addEventListener("notificationclick", function (event) {
  event.notification.close();
  var given = new URL((event.notification.data && event.notification.data.url) || "/", self.location.origin);
  // Only a path of this relay's: a link is never followed elsewhere.
  var url = new URL(given.pathname + given.hash, self.location.origin).href;
  event.waitUntil(self.clients.matchAll({ type: "window" }).then(function (windows) {
    for (var i = 0; i < windows.length; i++) {
      if (windows[i].url === url && "focus" in windows[i]) return windows[i].focus();
    }
    return self.clients.openWindow(url);
  }));
});
