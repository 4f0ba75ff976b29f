"""Distributed sampling: this process's partition served to its peers and its
own samplers (``partition_service``), the partitions of this host mapped in
place (``host_peers``), and the multi-hop sampler over them
(``neighbor_sampler``)."""
