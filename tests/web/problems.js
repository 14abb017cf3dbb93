() => {
  // Runs in a page under test (tests/web/test_screens.py): returns what is wrong with it, [] when nothing is.
  const out = [];
  const de = document.documentElement;
  if (de.scrollWidth > innerWidth) out.push(`horizontal overflow: ${de.scrollWidth} > ${innerWidth}`);
  const rgb = (c) => (c.match(/[\d.]+/g) || []).slice(0, 3).map(Number);
  const lum = (c) => { const v = rgb(c).map((x) => { x /= 255; return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4; });
                       return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2]; };
  const contrast = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const bgOf = (el) => { for (let e = el; e; e = e.parentElement) { const b = getComputedStyle(e).backgroundColor;
                         if (b && !b.startsWith("rgba(0, 0, 0, 0)") && b !== "transparent") return b; } return "rgb(255, 255, 255)"; };
  const tiles = [...document.querySelectorAll(".card, a.rack, .legend .level, .pill, .reason, .badge, .chart-title")];
  tiles.forEach((t, i) => {
    const name = (t.className || t.tagName) + " '" + t.textContent.trim().slice(0, 30) + "'";
    if (t.scrollWidth > t.clientWidth + 1 || t.scrollHeight > t.clientHeight + 1) out.push("clipped text in " + name);
    for (const el of [t, ...t.querySelectorAll("*")]) {
      if (!el.childNodes.length || ![...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
      const r = el.getBoundingClientRect(), tr = t.getBoundingClientRect();
      if (r.right > tr.right + 1 || r.left < tr.left - 1) out.push("text outside its tile in " + name);
      const c = contrast(getComputedStyle(el).color, bgOf(el));
      if (c < 4.5) out.push(`contrast ${c.toFixed(2)} < 4.5 in ${name}`);
    }
  });
  const boxes = [...document.querySelectorAll(".card, a.rack")].map((t) => t.getBoundingClientRect());
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i], b = boxes[j];
    if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1) out.push(`tiles ${i} and ${j} overlap`);
  }
  for (const el of document.querySelectorAll("[data-chart]")) {
    if (el.classList.contains("chart-empty")) continue;
    const cv = el.querySelector("canvas");
    if (!cv || cv.width < 10 || cv.height < 10) { out.push("chart not drawn: " + el.getAttribute("aria-label")); continue; }
    const r = el.getBoundingClientRect();
    if (r.right > innerWidth + 1) out.push("chart wider than the window: " + el.getAttribute("aria-label"));
    const px = cv.getContext("2d").getImageData(0, 0, cv.width, cv.height).data;
    let ink = 0;
    for (let k = 3; k < px.length; k += 4 * 7) if (px[k] > 0) ink++;
    if (ink < 20) out.push("blank chart canvas: " + el.getAttribute("aria-label"));
  }
  return out;
}
