"""DGL's machine id from ``$DGL_BENCH_MACHINE_ID``, for DGL machines that
share one network namespace.

DGL tells its machines apart by address: a client is on the machine whose
address in the ip_config is one of its interfaces'
(``dgl.distributed.rpc_client.get_local_machine_id``), so two DGL machines
on loopback would both be machine 0. bench_multihost.py puts this directory
on the ``PYTHONPATH`` of its loopback DGL job, so that every process of a
machine (its server, its trainer and the sampling processes DGL spawns)
takes its machine id from the variable instead. Nothing else of DGL changes:
each machine still listens on its own address (127.0.0.1 and 127.0.0.2) and
holds its partition in a /dev/shm of its own.
"""

import os

_MACHINE_ID = os.environ.get('DGL_BENCH_MACHINE_ID')
if _MACHINE_ID is not None:
  from dgl.distributed import rpc_client

  rpc_client.get_local_machine_id = lambda server_namebook: int(_MACHINE_ID)
