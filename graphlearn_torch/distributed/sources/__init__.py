"""Where a distributed loader's batches are sampled: the ``BatchSource``
interface (``base``), its collocated, multiprocess and remote sources, the
server's producer (``server``), and the worker options that pick one
(``options``)."""
