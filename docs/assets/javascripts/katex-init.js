// Renders the math that pymdownx.arithmatex (generic mode) leaves in the page, with the KaTeX
// shipped in assets/katex (no CDN: the site works offline). Material's document$ fires on every
// page load, instant navigation included.
function renderMath(root) {
  renderMathInElement(root, {
    delimiters: [
      { left: "\\(", right: "\\)", display: false },
      { left: "\\[", right: "\\]", display: true },
    ],
    throwOnError: false,
  });
}
if (typeof document$ !== "undefined") {
  document$.subscribe(({ body }) => renderMath(body));
} else {
  document.addEventListener("DOMContentLoaded", () => renderMath(document.body));
}
