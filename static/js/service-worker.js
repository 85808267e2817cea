// Nightshift's service worker: it shows the notifications the portal pushes (Web Push),
// with the tab closed too, and opens the portal's page for one when it is clicked.
"use strict";

self.addEventListener("push", (event) => {
  let data = {};
  if (event.data) {
    try {
      data = event.data.json();
    } catch (error) {
      data = { body: event.data.text() };
    }
  }
  event.waitUntil(
    self.registration.showNotification(data.title || "Nightshift", {
      body: data.body || "",
      tag: data.tag || undefined,
      icon: "/static/img/favicon.svg",
      data: { url: data.url || "/" },
    })
  );
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const wanted = (event.notification.data && event.notification.data.url) || "/";
  const url = new URL(wanted, self.location.origin);
  // Only the portal's own pages: a notification never sends anyone elsewhere.
  if (url.origin !== self.location.origin) {
    return;
  }
  event.waitUntil(
    self.clients.matchAll({ type: "window", includeUncontrolled: true }).then((open) => {
      for (const client of open) {
        if (client.url === url.href && "focus" in client) {
          return client.focus();
        }
      }
      return self.clients.openWindow(url.href);
    })
  );
});
