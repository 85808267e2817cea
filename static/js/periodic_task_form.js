// The periodic task admin form: a crontab's help says what the chosen schedule means
// (django-celery-beat's behaviour, moved out of an inline script).
(function () {
  "use strict";
  const $ = django.jQuery;
  const readableCrontabs = JSON.parse(document.getElementById("readable-crontabs").textContent);
  const originalHelp = JSON.parse(document.getElementById("crontab-help").textContent);
  $(".field-crontab_translation").hide();
  $(".field-crontab").change(function () {
    const help = $(".field-crontab .help");
    help.text(originalHelp);
    const meaning = readableCrontabs[$("#id_crontab").val()];
    if (meaning) help.append(document.createElement("br"), document.createTextNode("Translation: " + meaning));
  });
})();
