// The workflows list's time range: the custom bounds show only when "Custom range" is chosen (without
// this script they show after a search with it).
(function () {
  "use strict";
  const range = document.getElementById("range");
  const custom = document.querySelector(".custom-range");
  if (!range || !custom) return;
  range.addEventListener("change", function () {
    if (range.value === "custom") {
      custom.removeAttribute("data-hidden");
      document.getElementById("range-from").focus();
    } else {
      custom.setAttribute("data-hidden", "");
    }
  });
})();
