"""The runtime: the coordinator loop, outbox dispatch and the local all-in-one runner."""
