"""The Redis side: the event stream, group appender, leases, hit counters, the embedded server."""
