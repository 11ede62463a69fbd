"""The edges of the request path (validation) and the drain from stream to raw_event."""
