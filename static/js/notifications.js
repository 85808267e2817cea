// The notification settings page: turns this browser's notifications on (a push
// subscription with the site's VAPID key, kept by the portal) and says how it went.
"use strict";

(function () {
  const panel = document.querySelector("[data-push-key]");
  if (!panel) {
    return;
  }
  const button = panel.querySelector("[data-push-on]");
  const status = panel.querySelector("[data-push-status]");
  const say = (text) => {
    status.textContent = text;
  };
  const keyBytes = (base64url) => {
    const padded = (base64url + "===".slice((base64url.length + 3) % 4))
      .replace(/-/g, "+")
      .replace(/_/g, "/");
    return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
  };
  const browserName = () => {
    const agent = navigator.userAgent;
    const match = agent.match(/(Firefox|Edg|Chrome|Safari)\/[\d.]+/);
    const system = /Android/.test(agent) ? "Android" : /iPhone|iPad/.test(agent) ? "iOS"
      : /Mac OS/.test(agent) ? "macOS" : /Windows/.test(agent) ? "Windows" : "Linux";
    return `${match ? match[1].replace("Edg", "Edge") : "Browser"} on ${system}`;
  };

  if (!("serviceWorker" in navigator) || !("PushManager" in window) || !window.isSecureContext) {
    say("This browser cannot show the portal's notifications here: it needs a recent browser, and the portal on https.");
    button.disabled = true;
    return;
  }
  const ready = navigator.serviceWorker.register(panel.dataset.worker, { scope: "/" });
  ready
    .then((registration) => registration.pushManager.getSubscription())
    .then((subscription) => {
      if (subscription && panel.dataset.endpoints.split(" ").includes(subscription.endpoint)) {
        say("This browser shows your notifications.");
        button.textContent = "Turn on again";
      }
    })
    .catch(() => {});

  button.addEventListener("click", async () => {
    button.disabled = true;
    say("Asking the browser…");
    try {
      const permission = await Notification.requestPermission();
      if (permission !== "granted") {
        say("The browser said no. Allow notifications for this site in its settings, then try again.");
        return;
      }
      const registration = await ready;
      const subscription = await registration.pushManager.subscribe({
        userVisibleOnly: true,
        applicationServerKey: keyBytes(panel.dataset.pushKey),
      });
      const response = await fetch(panel.dataset.subscribe, {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-CSRFToken": panel.dataset.csrf },
        body: JSON.stringify({ subscription: subscription.toJSON(), label: browserName() }),
        credentials: "same-origin",
      });
      const answer = await response.json().catch(() => ({}));
      if (!response.ok) {
        say(answer.error || `The portal answered ${response.status}.`);
        return;
      }
      say("This browser shows your notifications.");
      window.location.reload();
    } catch (error) {
      say(`The browser's push service did not answer (${error.message}). Try again later, or use e-mail or a webhook.`);
    } finally {
      button.disabled = false;
    }
  });
  // The page renders the button disabled: it does nothing until this script has wired it.
  button.disabled = false;
})();
