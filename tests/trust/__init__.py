"""Trust: the write policy, secrets, instruction injection, framing, linear-time regular expressions."""
