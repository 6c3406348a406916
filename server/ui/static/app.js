/* pattern-memory dashboard behaviour: no inline scripts (the CSP allows /ui/static only).
   - forms with data-confirm ask first; selects with data-autosubmit submit their form;
   - the graph page draws /ui/graph/data with cytoscape.js (cose layout) and opens an
     entity's panel on click; the activity page follows the change stream (EventSource). */
(function () {
  "use strict";

  function onReady(fn) {
    if (document.readyState !== "loading") fn();
    else document.addEventListener("DOMContentLoaded", fn);
  }

  function wireForms(root) {
    root.querySelectorAll("form[data-confirm]").forEach(function (form) {
      form.addEventListener("submit", function (ev) {
        if (!window.confirm(form.getAttribute("data-confirm"))) ev.preventDefault();
      });
    });
    root.querySelectorAll("select[data-autosubmit]").forEach(function (sel) {
      sel.addEventListener("change", function () { sel.form.requestSubmit(); });
    });
  }

  function entityUrl(scope, name) {
    return "/ui/graph/entity?scope=" + encodeURIComponent(scope) + "&name=" + encodeURIComponent(name);
  }

  function drawGraph(box) {
    if (typeof cytoscape !== "function") return;
    var scope = box.getAttribute("data-scope");
    fetch(box.getAttribute("data-src"), { credentials: "same-origin" })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
      .then(function (data) {
        var cy = cytoscape({
          container: box,
          elements: { nodes: data.nodes, edges: data.edges },
          wheelSensitivity: 0.3,
          style: [
            { selector: "node", style: { "label": "data(label)", "font-size": 10, "background-color": "#5b8def",
              "color": "#1d232b", "text-valign": "bottom", "text-margin-y": 3, "width": 18, "height": 18 } },
            { selector: "node.lesson", style: { "shape": "round-rectangle", "background-color": "#f59e0b" } },
            { selector: "node.focus", style: { "border-width": 3, "border-color": "#1a7f37" } },
            { selector: "node:selected", style: { "background-color": "#b42318", "width": 24, "height": 24 } },
            { selector: "edge", style: { "width": 1.5, "line-color": "#a7b2c1", "target-arrow-color": "#a7b2c1",
              "target-arrow-shape": "triangle", "curve-style": "bezier", "label": "data(label)",
              "font-size": 8, "color": "#637083", "text-rotation": "autorotate" } }
          ],
          layout: { name: "cose", animate: false, randomize: true, padding: 30, nodeRepulsion: 30000,
            nodeOverlap: 20, idealEdgeLength: 70, gravity: 1, numIter: 1500, componentSpacing: 60,
            nodeDimensionsIncludeLabels: true }
        });
        window.pmGraph = cy; // the browser tests click nodes at their rendered positions
        function open(name) {
          cy.$(":selected").unselect();
          var node = cy.getElementById(name);
          if (node.nonempty()) node.select();
          htmx.ajax("GET", entityUrl(scope, name), { target: "#entity" });
        }
        cy.on("tap", "node", function (ev) { open(ev.target.id()); });
        document.body.addEventListener("htmx:afterSwap", function (ev) {
          var d = ev.detail.target.querySelector("[data-entity]");
          if (!d) return;
          cy.$(":selected").unselect();
          var n = cy.getElementById(d.getAttribute("data-entity"));
          if (n.nonempty()) n.select();
        });
        box.setAttribute("data-ready", "yes");
      })
      .catch(function (err) { box.textContent = "The graph could not be loaded (" + err.message + ")."; });
  }

  function cell(text, cls) {
    var td = document.createElement("td");
    if (cls) { var span = document.createElement("span"); span.className = cls; span.textContent = text; td.appendChild(span); }
    else td.textContent = text;
    return td;
  }

  function followActivity(table) {
    var live = document.getElementById("live");
    var body = table.tBodies[0];
    var es = new EventSource(table.getAttribute("data-stream"));
    es.onopen = function () { live.textContent = "live"; live.classList.add("on"); };
    es.onerror = function () { live.textContent = "reconnecting…"; live.classList.remove("on"); };
    es.addEventListener("end", function () { es.close(); live.textContent = "signed out"; });
    es.addEventListener("change", function (ev) {
      var r = JSON.parse(ev.data);
      var empty = body.querySelector("tr.empty-row");
      if (empty) empty.remove();
      var tr = document.createElement("tr");
      tr.setAttribute("data-seq", r.seq);
      tr.className = "fresh";
      [String(r.seq), r.at].forEach(function (t) { tr.appendChild(cell(t)); });
      tr.appendChild(cell(r.op, "tag op-" + r.op));
      [r.kind, r.scope].forEach(function (t) { tr.appendChild(cell(t)); });
      var agent = document.createElement("td"); var code = document.createElement("code");
      code.textContent = r.agent; agent.appendChild(code); tr.appendChild(agent);
      tr.appendChild(cell(String(r.revision)));
      var rec = document.createElement("td");
      if (r.present) { var a = document.createElement("a"); a.href = "/ui/memory/" + encodeURIComponent(r.id); a.textContent = r.text; rec.appendChild(a); }
      else { var c = document.createElement("code"); c.textContent = r.id; rec.appendChild(c); }
      tr.appendChild(rec);
      body.insertBefore(tr, body.firstChild);
    });
  }

  onReady(function () {
    wireForms(document);
    var box = document.getElementById("cy");
    if (box) drawGraph(box);
    var act = document.getElementById("activity");
    if (act && act.getAttribute("data-stream")) followActivity(act);
  });
  document.addEventListener("htmx:afterSwap", function (ev) { wireForms(ev.detail.target); });
})();
