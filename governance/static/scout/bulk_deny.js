// Scout admin, approval inbox: "Deny selected" without a reason is stopped in the browser, the ticks kept.
// Django's changelist form is sent with "novalidate", so the reason box's "required" alone stops nothing; the
// server refuses it too ("Nothing denied: ..."), this only spares the approver the round trip and the ticks.
(function () {
  "use strict";

  document.addEventListener("DOMContentLoaded", function () {
    var reason = document.getElementById("bulk-deny-reason");
    if (!reason || !reason.form) { return; }
    reason.form.addEventListener("submit", function (event) {
      var button = event.submitter;
      if (button && button.closest("#bulk-deny") && !reason.reportValidity()) {
        event.preventDefault();  // reportValidity() has focused the box and said what it needs
      }
    });
  });
})();
