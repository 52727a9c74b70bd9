// What each flow's section of report.html draws, measured in the rendered page: its path picture (arrows,
// NAT labels and the member box each sits in, the cross and the member box nearest it, its scale) and
// its sequence diagram (its box's scroll width, the lane the cross is on). The result goes into a pre
// element (id path-check) so that `chromium --dump-dom` carries it out.
(function () {
  const box = (el) => { const b = el.getBBox(); return { x: b.x, y: b.y, w: b.width, h: b.height }; };
  const centre = (b) => ({ x: b.x + b.w / 2, y: b.y + b.h / 2 });
  const distance = (p, b) => Math.hypot(Math.max(b.x - p.x, 0, p.x - b.x - b.w), Math.max(b.y - p.y, 0, p.y - b.y - b.h));
  const inside = (i, o) => i.x >= o.x - 1 && i.y >= o.y - 1 && i.x + i.w <= o.x + o.w + 1 && i.y + i.h <= o.y + o.h + 1;
  const nearest = (svg, p) => {
    // the member box nearest the point (0 inside it); of boxes it is inside, the smallest
    const ranked = [...svg.querySelectorAll("rect.member")].map((r) => { const b = box(r); return [distance(p, b), b.w * b.h, r.dataset.member]; })
      .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    return ranked.length ? ranked[0][2] : null;
  };
  const flows = {};
  for (const sec of document.querySelectorAll("section[id^='flow-']")) {
    const r = {};
    const pic = sec.querySelector("svg.path-picture");
    r.picture = !!pic;
    if (pic) {
      const table = sec.querySelector("table.hops");
      r.picture_before_table = !!table && !!(pic.compareDocumentPosition(table) & Node.DOCUMENT_POSITION_FOLLOWING);
      r.request = pic.querySelectorAll("line.path-request").length;
      r.reply = pic.querySelectorAll("line.path-reply").length;
      r.sightings = pic.querySelectorAll("circle.sighting").length;
      r.nat = [...pic.querySelectorAll("text.nat")].map((t) => {
        const member = pic.querySelector(`rect.member[data-member="${t.dataset.member}"]`);
        return { member: t.dataset.member, inside: !!member && inside(box(t), box(member)), text: t.textContent };
      });
      r.scale = pic.getBoundingClientRect().width / pic.viewBox.baseVal.width;
      const cross = pic.querySelector("g.died");
      if (cross) r.cross = { point: cross.dataset.point, nearest: nearest(pic, centre(box(cross))) };
    }
    const seq = sec.querySelector("svg.sequence");
    if (seq) {
      const holder = seq.parentElement;
      r.diagram = { scrollWidth: holder.scrollWidth, clientWidth: holder.clientWidth, width: seq.getBoundingClientRect().width };
      const died = seq.querySelector("text.died");
      if (died) {
        const c = centre(box(died));
        const lanes = [...seq.querySelectorAll("rect.lane")].map((l) => { const b = box(l); return [Math.abs(b.x + b.w / 2 - c.x), l.dataset.point]; })
          .sort((a, b) => a[0] - b[0]);
        r.seq_cross = { point: died.dataset.point, lane: lanes.length ? lanes[0][1] : null };
      }
    }
    flows[sec.id.slice(5)] = r;
  }
  const out = document.createElement("pre");
  out.id = "path-check";
  out.textContent = JSON.stringify(flows);
  document.body.appendChild(out);
})();
