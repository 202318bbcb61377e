// The trace viewer: steps through a predicted execution (and the real one beside it).
// Everything the page shows comes from the JSON in #trace-data and is written with
// textContent, so program text and values never become markup.
(function () {
  "use strict";
  const D = JSON.parse(document.getElementById("trace-data").textContent);
  const P = D.pred, R = D.real;
  const sides = R ? [P, R] : [P];
  const n = Math.max(1, ...sides.map(s => s.steps.length));
  const $ = id => document.getElementById(id);
  const prog = $("program"), slider = $("slider");
  let cur = 0;

  D.code.forEach((text, i) => {
    const div = document.createElement("div");
    div.className = "ln";
    div.dataset.line = String(i + 1);
    const no = document.createElement("span");
    no.className = "no";
    no.textContent = String(i + 1);
    const src = document.createElement("span");
    src.className = "src";
    src.textContent = text;
    div.append(no, src);
    div.title = "click: jump to the next step that runs this line";
    div.addEventListener("click", () => nextVisit(i + 1));
    prog.append(div);
  });
  const lineEl = k => prog.querySelector('.ln[data-line="' + k + '"]');
  (D.injections || []).forEach(inj => {
    const el = inj.line ? lineEl(inj.line) : null;
    if (!el) return;
    el.classList.add("injected");
    el.title += "\ninjected: " + inj.use + " " + inj.name + " as " + inj.kind + (inj.value === null ? "" : " = " + inj.value);
  });

  slider.max = String(n - 1);
  if (D.first_divergence !== null && n > 1) {
    const tick = $("divtick");
    tick.style.left = (100 * D.first_divergence / (n - 1)) + "%";
    tick.style.display = "block";
    tick.title = "first divergence: step " + (D.first_divergence + 1);
  }

  function changedNames(side, i) {
    const now = side.steps[i], before = side.steps[i - 1];
    const out = new Set();
    if (!now) return out;
    for (const [k, v] of Object.entries(now.state)) {
      if (!before || !(k in before.state) || before.state[k] !== v) out.add(k);
    }
    return out;
  }

  function cell(tr, text, cls) {
    const td = document.createElement("td");
    td.className = cls;
    td.textContent = text;
    tr.append(td);
    return td;
  }

  function renderStates(i) {
    const body = $("states").querySelector("tbody");
    body.replaceChildren();
    const names = [];
    for (const s of sides) {
      const st = s.steps[i];
      if (st) for (const k of Object.keys(st.state)) if (!names.includes(k)) names.push(k);
    }
    const changed = sides.map(s => changedNames(s, i));
    for (const name of names) {
      const tr = document.createElement("tr");
      tr.dataset.name = name;
      cell(tr, name, "name");
      const vals = sides.map(s => (s.steps[i] && name in s.steps[i].state) ? s.steps[i].state[name] : null);
      vals.forEach((v, j) => {
        const td = cell(tr, v === null ? "—" : v, "v" + (v === null ? " absent" : "") + (changed[j].has(name) ? " changed" : ""));
        td.dataset.side = j === 0 ? "pred" : "real";
      });
      if (R && vals[0] !== vals[1]) tr.classList.add("differs");
      body.append(tr);
    }
    if (!names.length) {
      const tr = document.createElement("tr");
      cell(tr, "(no variables)", "absent").colSpan = sides.length + 1;
      body.append(tr);
    }
  }

  function outputSoFar(side, i) {
    return side.steps.slice(0, i + 1).map(s => s.output || "").join("");
  }

  function show(i) {
    cur = Math.max(0, Math.min(n - 1, i));
    slider.value = String(cur);
    document.body.dataset.step = String(cur);
    for (const el of prog.querySelectorAll(".cur,.cur-real,.next,.errline")) el.classList.remove("cur", "cur-real", "next", "errline");
    const p = P.steps[cur], r = R ? R.steps[cur] : null;
    if (p && lineEl(p.line)) lineEl(p.line).classList.add("cur");
    if (r && lineEl(r.line)) lineEl(r.line).classList.add("cur-real");
    const nx = P.steps[cur + 1];
    if (nx && lineEl(nx.line) && !lineEl(nx.line).classList.contains("cur")) lineEl(nx.line).classList.add("next");
    const at = (p || r) ? lineEl((p || r).line) : null;
    if (at) at.scrollIntoView({block: "nearest"});
    $("pos").textContent = (D.labels ? D.labels[cur] + ": " : "") + "step " + (cur + 1) + " of " + n +
      (p ? ", line " + p.line : ", predicted trace ended") + (R && r && (!p || r.line !== p.line) ? " (real: line " + r.line + ")" : "");
    $("frame").textContent = sides.map((s, j) => {
      const st = s.steps[cur];
      const f = st ? (D.functions[String(st.line)] || "<module>") : "—";
      return (R ? (j === 0 ? "predicted: " : "real: ") : "") + f;
    }).join("   ");
    $("diverged").style.display = (D.first_divergence === cur) ? "inline" : "none";
    renderStates(cur);
    $("out-pred").textContent = outputSoFar(P, cur);
    if (R) $("out-real").textContent = outputSoFar(R, cur);
    const errs = [];
    for (const s of sides) {
      if (s.error && cur >= s.steps.length - 1) {
        errs.push(s.label + ": " + s.error.type + (s.error.line ? " at line " + s.error.line : ""));
        if (s.error.line && lineEl(s.error.line)) lineEl(s.error.line).classList.add("errline");
      }
      if (s === P && !P.finished && cur >= P.steps.length - 1) errs.push("predicted: the trace hit the length cap here; no verdict");
    }
    $("error").textContent = errs.join("  ·  ");
    $("error").style.display = errs.length ? "block" : "none";
  }

  function nextVisit(line) {
    const steps = (P.steps.length ? P : R).steps;
    for (let k = 1; k <= steps.length; k++) {
      const j = (cur + k) % steps.length;
      if (steps[j].line === line) return show(j);
    }
  }

  $("first").onclick = () => show(0);
  $("prev").onclick = () => show(cur - 1);
  $("next").onclick = () => show(cur + 1);
  $("last").onclick = () => show(n - 1);
  $("todiv").onclick = () => { if (D.first_divergence !== null) show(D.first_divergence); };
  $("todiv").disabled = D.first_divergence === null;
  slider.addEventListener("input", () => show(Number(slider.value)));
  document.addEventListener("keydown", e => {
    if (e.target === slider && (e.key === "ArrowLeft" || e.key === "ArrowRight")) e.preventDefault();
    const act = {ArrowRight: () => show(cur + 1), ArrowLeft: () => show(cur - 1), Home: () => show(0), End: () => show(n - 1),
      d: () => $("todiv").onclick(), n: () => { const s = P.steps[cur] || (R && R.steps[cur]); if (s) nextVisit(s.line); }}[e.key];
    if (act && !e.ctrlKey && !e.metaKey && !e.altKey) { e.preventDefault(); act(); }
  });
  show(0);
})();
