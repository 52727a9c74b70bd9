// Lists every piece of text the rendered page cuts off; the result goes into a pre element (id clip-check)
// so that `chromium --dump-dom` carries it out. Wide content may scroll inside its own box
// (overflow auto/scroll); the page itself must not scroll sideways.
(function () {
  const problems = [];
  const name = (el) => el.tagName.toLowerCase() + (el.className && typeof el.className === "string" ? "." + el.className : "")
    + ": " + (el.textContent || "").trim().slice(0, 80);
  const root = document.documentElement;
  if (root.scrollWidth > root.clientWidth + 1) problems.push(`page scrolls sideways: ${root.scrollWidth} > ${root.clientWidth}`);
  for (const el of document.body.querySelectorAll("*")) {
    if (el.closest("svg")) continue;
    const cs = getComputedStyle(el);
    if (cs.display === "inline" || cs.display === "none") continue;
    if (cs.textOverflow === "ellipsis") problems.push("ellipsis " + name(el));
    const scrolls = cs.overflowX === "auto" || cs.overflowX === "scroll";
    if (!scrolls && el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0) {
      problems.push(`${cs.overflowX === "visible" ? "spills out of" : "clipped in"} its box (${el.scrollWidth} > ${el.clientWidth}) ` + name(el));
    }
    if (!scrolls && el.scrollHeight > el.clientHeight + 1 && el.clientHeight > 0 && cs.overflowY !== "visible") {
      problems.push(`clipped vertically (${el.scrollHeight} > ${el.clientHeight}) ` + name(el));
    }
  }
  for (const t of document.querySelectorAll("svg text")) {
    const svg = t.ownerSVGElement, vb = svg.viewBox.baseVal, b = t.getBBox();
    if (b.x < vb.x - 1 || b.y < vb.y - 1 || b.x + b.width > vb.x + vb.width + 1 || b.y + b.height > vb.y + vb.height + 1)
      problems.push("svg text outside its drawing: " + t.textContent.slice(0, 80));
    if (t.textContent.includes("\u2026")) problems.push("svg text truncated: " + t.textContent.slice(0, 80));
    const rect = t.previousElementSibling;
    if (rect && rect.tagName === "rect") {
      const r = rect.getBBox();
      const inside = b.x >= r.x - 1 && b.x + b.width <= r.x + r.width + 1 && b.y >= r.y - 1 && b.y + b.height <= r.y + r.height + 1;
      if (!inside && (b.x < r.x + r.width && b.x + b.width > r.x && b.y < r.y + r.height && b.y + b.height > r.y))
        problems.push("svg text overflows its box: " + t.textContent.slice(0, 80));
    }
    const box = svg.parentElement, bcs = getComputedStyle(box);
    if (svg.getBoundingClientRect().width > box.clientWidth + 1 && !["auto", "scroll"].includes(bcs.overflowX))
      problems.push("svg wider than its box, which does not scroll: " + (svg.getAttribute("class") || ""));
  }
  const out = document.createElement("pre");
  out.id = "clip-check";
  out.textContent = JSON.stringify(problems);
  document.body.appendChild(out);
})();
