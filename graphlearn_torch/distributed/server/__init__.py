"""Server-client mode: the server that holds a partition and samples for its
clients (``server``), and the client's PyG stores over the servers
(``remote_store``)."""
