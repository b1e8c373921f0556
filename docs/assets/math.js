// Renders the math of a page with the KaTeX files shipped beside this script (docs/assets/katex):
// pymdownx.arithmatex (generic mode) leaves \( ... \) inline and \[ ... \] display math in elements of
// class "arithmatex". Material's instant loading publishes each new page on document$; without it
// (or before the theme's bundle), the DOMContentLoaded event renders the page once.
(function () {
  function render(root) {
    if (typeof renderMathInElement !== "function") return;
    root.querySelectorAll(".arithmatex").forEach(function (el) {
      renderMathInElement(el, {
        delimiters: [
          { left: "\\(", right: "\\)", display: false },
          { left: "\\[", right: "\\]", display: true }
        ],
        throwOnError: false
      });
    });
  }
  if (typeof document$ !== "undefined") {
    document$.subscribe(function () { render(document.body); });
  } else {
    document.addEventListener("DOMContentLoaded", function () { render(document.body); });
  }
})();
