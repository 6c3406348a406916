"""Trust: what the service screens in every text it stores, and how it frames what it recalls.

- :mod:`.policy`: the write policy, the one point every write passes (secrets, then injection);
- :mod:`.secret_scan.secrets`: the secret scanner, with its rule tables (:mod:`.secret_scan.secret_rules`), value
  checks (:mod:`.secret_scan.secret_checks`) and assignments (:mod:`.secret_scan.secret_assignments`);
- :mod:`.injection_scan.injection`: the instruction-injection detector (`injection_scan/`), with its rule tables
  (:mod:`.injection_rules`, :mod:`.injection_addressed`, :mod:`.injection_intent`,
  :mod:`.injection_escape`, :mod:`.injection_markup`), the text they read
  (:mod:`.injection_fold`), what makes a match a mention (:mod:`.injection_mention`), and its
  second line, a linear model over the text's embedding (:mod:`.injection_model`, weights in
  ``injection_model.npz``);
- how the rules are searched in linear time, only where they can match: a rule
  (:mod:`.injection_rule`), its search (:mod:`.rule_search`), the facts read from its pattern
  (:mod:`.pattern_facts`), the text under scan (:mod:`.scan_text`);
- :mod:`.framing`: recalled text quoted as evidence, with its provenance, never as instructions;
- :mod:`.escapes`: control characters of stored text escaped, on one line (a provenance
  field) or for a terminal (what the shell commands print).

May import: `server.service`, `graph`, `ingest`, `retrieval`; never a face, never `mcp` (tests/runtime/test_layers.py).
"""
