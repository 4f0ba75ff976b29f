"""Distributed loaders: ``DistLoader`` (``loader``), which collates the
batches its batch source supplies, and its node, link and subgraph
loaders."""
