// A dataset's file is sent with the tus resumable upload protocol (tus-js-client): in 8 MiB
// chunks, with progress, retried from the portal's offset when the connection drops, and
// resumed after a reload when the same file is chosen again. Without JavaScript the form
// posts the file whole, as before.
(() => {
  const form = document.querySelector("form[data-role=dataset-form]");
  if (!form || !window.tus || !window.tus.isSupported) return;
  const fileInput = form.querySelector("input[type=file][name=file]");
  const status = form.querySelector("[data-role=upload-status]");
  const bar = status.querySelector("progress");
  const text = status.querySelector("[data-role=upload-text]");
  const problem = form.querySelector("[data-role=upload-error]");
  const csrf = form.querySelector("input[name=csrfmiddlewaretoken]").value;
  const megabytes = (bytes) => `${(bytes / 1e6).toLocaleString(undefined, {maximumFractionDigits: 1})} MB`;
  const value = (name) => (form.elements[name] ? form.elements[name].value : "");
  const labName = () => {
    const select = form.elements.lab;
    return select && select.value ? select.options[select.selectedIndex].text : "";
  };
  const show = (message) => {
    problem.textContent = message;
    problem.hidden = !message;
  };
  const messageOf = (error) => {
    const body = error.originalResponse ? error.originalResponse.getBody() : "";
    try {
      return JSON.parse(body).error.message;
    } catch (ignored) {
      return body || "The upload failed; check the connection and choose Import again.";
    }
  };

  form.addEventListener("submit", (event) => {
    const file = fileInput.files[0];
    if (!file) return; // a URL or a shared folder: the form posts as usual
    event.preventDefault();
    show("");
    status.hidden = false;
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    const upload = new window.tus.Upload(file, {
      endpoint: form.dataset.uploadUrl,
      chunkSize: 8 * 1024 * 1024,
      retryDelays: [0, 1000, 2000, 4000, 8000, 15000, 30000],
      headers: {"X-CSRFToken": csrf},
      removeFingerprintOnSuccess: true,
      metadata: {
        filename: file.name, name: value("name"), description: value("description"),
        visibility: value("visibility"), lab: labName(),
      },
      onProgress: (sent, total) => {
        bar.max = total;
        bar.value = sent;
        text.textContent = `${megabytes(sent)} of ${megabytes(total)} sent`;
      },
      onShouldRetry: (error) => {
        const code = error.originalResponse ? error.originalResponse.getStatus() : 0;
        if (code >= 400 && code < 500 && code !== 409 && code !== 423) return false;
        text.textContent = "The connection dropped; continuing where it stopped…";
        return true;
      },
      onError: (error) => {
        button.disabled = false;
        status.hidden = true;
        show(messageOf(error));
      },
      onSuccess: async () => {
        text.textContent = "Sent; checking and checksumming it…";
        const answer = await fetch(upload.url, {credentials: "same-origin",
                                                headers: {Accept: "application/json"}});
        const body = await answer.json();
        window.location.assign(form.dataset.importUrl.replace("00000000-0000-4000-8000-000000000000", body.dataset_import));
      },
    });
    upload.findPreviousUploads().then((previous) => {
      const same = previous.find((p) => p.metadata && p.metadata.name === value("name"));
      if (same) {
        upload.resumeFromPreviousUpload(same);
        text.textContent = "Resuming an upload of this file that was cut short…";
      }
      upload.start();
    });
  });
})();
