// Scout admin, server form: show only the chosen transport's fields (progressive enhancement). Without this
// script every field shows and the form refuses a value in another transport's field; with it, those fields
// are hidden and emptied when the form is sent, so a value left behind by a change of transport is not refused.
(function () {
  "use strict";

  function setUp(select) {
    var byTransport = JSON.parse(select.getAttribute("data-transport-fields"));
    var form = select.form;
    var all = [];
    Object.keys(byTransport).forEach(function (key) { all = all.concat(byTransport[key]); });

    function row(name) { return form.querySelector(".form-row.field-" + name); }

    function otherRows() {
      var own = byTransport[select.value] || [];
      return all.filter(function (name) { return own.indexOf(name) < 0; }).map(row).filter(Boolean);
    }

    function show() {
      all.map(row).filter(Boolean).forEach(function (r) { r.hidden = false; });
      otherRows().forEach(function (r) { r.hidden = true; });
      // A section whose every field is hidden (the OpenAPI service for stdio) is hidden with them.
      form.querySelectorAll("fieldset.module").forEach(function (fieldset) {
        var rows = fieldset.querySelectorAll(".form-row");
        if (!rows.length) return;
        fieldset.hidden = Array.prototype.every.call(rows, function (r) { return r.hidden; });
      });
    }

    select.addEventListener("change", show);
    form.addEventListener("submit", function () {
      otherRows().forEach(function (r) {
        r.querySelectorAll("input, textarea").forEach(function (input) { input.value = ""; });
      });
    });
    show();
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("select[data-transport-fields]").forEach(setUp);
  });
})();
