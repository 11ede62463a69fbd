"""The kernel every layer may use: settings, errors, logs, Redis key names, redaction."""
