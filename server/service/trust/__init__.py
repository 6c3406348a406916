"""Trust: what the service screens in every text it stores, and how it frames what it recalls.

- :mod:`.policy`: the write policy, the one point every write passes (secrets, then injection);
- :mod:`.secrets`: the secret scanner, with its rule tables (:mod:`.secret_rules`) and value
  checks (:mod:`.secret_checks`);
- :mod:`.injection`: the instruction-injection detector, with its rule tables
  (:mod:`.injection_rules`, :mod:`.injection_intent`, :mod:`.injection_escape`) and its second line, a linear model over the text's embedding
  (:mod:`.injection_model`, weights in ``injection_model.npz``);
- :mod:`.framing`: recalled text quoted as evidence, with its provenance, never as instructions.
"""
