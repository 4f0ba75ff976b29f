"""Distributed data: this process's partition and the partition books
(``dataset``), its topology (``graph``), the feature rows of the whole graph,
local or fetched from their partitions (``feature``), and the partitioner
that writes partitions from several processes at once
(``random_partitioner``)."""
