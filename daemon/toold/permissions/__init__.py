"""The permission guard: modes, rules, the dangerous-command detector and the audit log."""
