"""Renders docs/benchmarks.md, and a chart per table, from the benchmarks'
results (benchmarks/results/*.json, written by each script in benchmarks/).

  python benchmarks/report.py            # make bench-report
  python benchmarks/report.py --check    # is docs/benchmarks.md up to date?

The page answers, one section each, the questions a user asks: how fast our
sampling is against what they use now (PyG, GLT, DGL, GraphBolt), on a GPU,
in worker mode on one host and across hosts, in server-client mode, how
long partitioning takes, how fast the channel is; then how to tune. Every
table says where it was measured and the command that reproduces it. The
prose is here; every figure comes from a results file.
"""

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from results import DEFAULT_DIR, ROOT, render_table

PAGE = ROOT / 'docs' / 'benchmarks.md'
CHARTS = ROOT / 'docs' / '_static' / 'benchmarks'


@dataclass
class Section:
  r"""One question of the page.

  Args:
    title: the heading.
    intro: what the section measures, and against what.
    tables: the tables it shows: ``(results file, table key)``.
    missing: what to run where a results file is missing.
  """

  title: str
  intro: str
  tables: List[Tuple[str, str]]
  missing: str = ''


SECTIONS = [
  Section(
    'Sampling and feature gather on the CPU',
    'Neighbor sampling (fanout [15, 10, 5], batches of 1024 random seeds) and the gather of '
    "the sampled nodes' feature rows on a graph of ogbn-products' size (2,449,029 nodes, "
    '123,718,280 directed edges), ours beside the samplers a user would pick instead, each '
    "configured as its users would for speed and run in its own environment: PyG's "
    'NeighborSampler on pyg-lib (`make pyg-peer`), GLT 0.2.4 (`make glt-peer`), DGL 2.1 and '
    'GraphBolt (`make dgl-peer`). Then our sampler by thread count, on small batches beside '
    "PyG's, temporal sampling beside PyG's, and the sampler where users share cores.",
    [
      ('bench_sampler', 'sampling'),
      ('bench_sampler', 'gather'),
      ('bench_sampler', 'threads'),
      ('bench_sampler', 'sizes'),
      ('bench_temporal', 'temporal'),
      ('bench_contention', 'contention'),
      ('bench_contention', 'collocated'),
    ],
  ),
  Section(
    'Time to the first batch',
    'From a PyG `Data` in memory to the first batch: building the loader (the graph in CSC '
    "and, by node time, its time-sorted copy) and sampling one batch, ours beside PyG's own "
    'NeighborLoader on pyg-lib, plain and temporal, with the memory each added.',
    [('bench_startup', 'startup')],
  ),
  Section(
    'Link prediction',
    "Strict negative sampling against PyG's `negative_sampling`, and LinkNeighborLoader "
    "against PyG's own on pyg-lib, on the same graph and seed edges.",
    [('bench_link', 'link')],
  ),
  Section(
    'On a GPU',
    "The same graph on a GPU: sampling with the topology in GPU memory ('CUDA') and read in "
    "place from pinned host memory ('ZERO_COPY'), beside the CPU sampler on the GPU "
    "machine's cores and the device's random reads of the topology; feature lookup beside "
    "the device's own limits (a pinned host-to-device copy for UVA reads, a device-to-device "
    'copy for GPU memory); training; '
    "worker mode on one GPU; the CPU sampler on the GPU machine's cores.",
    [
      ('bench_gpu_sampler_gpu', 'gpu_sampling'),
      ('bench_gpu_sampler_gpu', 'gpu_sampling_limits'),
      ('bench_gpu_feature_dim100_gpu', 'gpu_gather'),
      ('bench_gpu_feature_dim128_gpu', 'gpu_gather'),
      ('bench_gpu_train_gpu', 'train'),
      ('bench_dist_sampling_gpu', 'worker_mode'),
      ('bench_dist_memory_gpu', 'memory'),
      ('bench_sampler_gpu', 'threads'),
    ],
    missing='needs a GPU machine: `bash tools/gpu_check.sh env build bench` (docs/cuda.md)',
  ),
  Section(
    'Worker mode on one host',
    'Two trainers, one per METIS partition of a 1 M-node community graph, each sampling '
    'across both partitions (collocated, or in sampling processes), against the '
    "single-machine loader on the whole graph in the same run and against GLT 0.2.4's worker "
    'mode on the same partitions. The RPC rows read the other partition over RPC, as '
    "between hosts; the cache rows hold the hottest quarter of the other partition's rows, "
    'the first memory table weighs what the cache costs the host, the others what more '
    'trainers and sampling processes a partition cost it, at 1 M, 8 M and 24 M nodes (random '
    'partitions: METIS cannot hold that graph here). '
    "DGL 2.1's distributed sampling runs beside our RPC row on loopback here, and between "
    'hosts in the next section. The start table times the start: from partitions on disk to '
    "every trainer's first batch.",
    [
      ('bench_dist_sampling', 'worker_mode'),
      ('bench_dist_sampling', 'vs_glt'),
      ('bench_dist_sampling', 'vs_dgl'),
      ('bench_dist_sampling', 'startup_vs_glt'),
      ('bench_dist_sampling_temporal', 'worker_mode'),
      ('profile_dist_rpc', 'rpc'),
      ('profile_dist_rpc', 'remote_share'),
      ('bench_cache_memory', 'cache_memory'),
      ('bench_dist_memory', 'memory'),
      ('bench_dist_memory_8m', 'memory'),
      ('bench_dist_memory_24m', 'memory'),
    ],
  ),
  Section(
    'Worker mode across hosts',
    'The trainers on two hosts (network namespaces on one machine, joined by a bridge, with '
    'delay added to the link), each with one sampling process, at several batches in flight, '
    "against GLT 0.2.4's worker mode and DGL 2.1's distributed sampling on the same links, "
    'with the bytes each host sends and receives per batch; against DGL in three runs back '
    'to back, on loopback and between hosts.',
    [
      ('bench_multihost', 'multihost'),
      ('bench_multihost', 'vs_glt'),
      ('bench_multihost_vs_dgl', 'vs_dgl'),
    ],  # fmt: skip
    missing='needs root for network namespaces: `sudo python benchmarks/bench_multihost.py`',
  ),
  Section(
    'Server-client mode',
    'Servers hold the partitions and sample; clients train. Against worker mode on the same '
    'partitions in the same run.',
    [('bench_server_client', 'server_client')],
  ),
  Section(
    'Partitioning',
    'Time and peak memory to partition the ogbn-products-size graph from memory-mapped .npy '
    "files, beside METIS's own run on the same graph (pymetis); the edge cut each "
    'partitioner leaves on real and synthetic graphs; a 400 M-edge graph METIS cannot hold '
    "here, and the share of a batch's rows its partitions leave on other partitions.",
    [
      ('bench_partition', 'partition'),
      ('bench_partition_quality', 'quality'),
      ('bench_partition_large', 'partition_large'),
      ('bench_partition_locality', 'partition_locality'),
    ],
  ),
  Section(
    'The shared-memory channel',
    'Batch-shaped messages from a sampling process to its trainer: in host memory, and on a '
    'GPU from a sampling process on it to a trainer on it.',
    [('bench_channel', 'channel'), ('bench_channel_gpu', 'channel')],
  ),
  Section(
    'Faults',
    'Each fault of the fault suite, how long the survivors take to see it, and what it '
    'leaves behind (docs/reliability.md says what each fault does).',
    [('fault_suite', 'faults'), ('fault_suite_gpu', 'faults')],
  ),
]

# Results files not named as their script.
SCRIPT_OF = {
  'bench_dist_sampling_temporal': 'bench_dist_sampling.py --temporal',
  'fault_suite_gpu': 'fault_suite.py --gpu` on a GPU machine: `bash tools/gpu_check.sh faults',
  'bench_channel_gpu': 'bench_channel.py --gpu 0` on a GPU machine: `bash tools/gpu_check.sh '
  'channel',
}

TUNING = """## Tuning

- **Threads.** Our CPU kernels use `torch.get_num_threads()` threads, at most
  a per-process cap (`graphlearn_torch.utils.set_kernel_threads`,
  `GLT_KERNEL_THREADS`); a distributed job's processes take their share of the
  host's cores by default. Leave cores to the model where it trains on the
  CPU. A hop's new nodes are numbered by the calling thread, between the draws
  it makes, while the others draw (always the same thread, so that the id maps
  stay in its core's caches); from 4 threads on, those it has not numbered
  when the draws end are numbered by every thread
  (`GLT_PARALLEL_INSERT_THREADS=n` moves that threshold;
  `bash tools/gpu_check.sh cpu-profile` profiles both ways at 4 to 16
  threads). Idle helper threads spin 20 us before they sleep (`GLT_WORKER_SPIN_US=n` moves
  it: where sleeping threads wake slowly, as a virtual machine's idle cores
  can, spinning across a batch's hops may pay).
- **Batches at once.** On many cores, a loader that samples on the CPU can
  sample several batches at once, each on a thread of its own that runs
  its kernels alone (`concurrent_batches=n` of `NeighborLoader` and
  `LinkNeighborLoader`; the batches are those of one at a time, in the same
  order): one batch's threads stop scaling before the cores run out (the
  threads table's whole batch against its draws alone), and batches side
  by side share them instead, as PyG's `num_workers` processes do, with
  no copy between processes. The table's 'batches at once' column measures
  it at each thread count. Each batch in flight holds its own buffers and
  id maps (an id-indexed map takes 4 bytes a node up to 8 M nodes).
- **Topologies.** A `Topology` stores int32 indices where the graph fits,
  which halves its memory and its random reads; keep the default.
- **Huge pages.** What the CPU sampler reads at random (a `Topology`'s
  entries, edge ids and times as it builds them, the inducer's maps) lies
  on 2 MB pages, advised with `MADV_HUGEPAGE` before it is first written, so
  that a random read rarely costs a page walk: 1.23-1.27x the batches/s of
  4 KB pages at 1 thread on this host (products-size graph, fanout
  [15, 10, 5]). A CPU `Feature`'s table, the user's tensor, is moved onto
  them in place when the Feature is made (`MADV_COLLAPSE`, Linux 6.1 on;
  about a second a GB on 2 cores, logged): the gather of a batch's rows
  then runs 1.49x as fast at 1 thread, 1.61x at 2 (100-dim fp32 rows).
  Linux gives huge pages where `/sys/kernel/mm/transparent_hugepage/enabled`
  reads `madvise` (most distributions' default) or `always`; at `never`
  the arrays stay on 4 KB pages. The copies a distributed job shares
  between the processes of a host (topologies, feature tables and their
  maps, in memfds) are moved onto huge pages when made, and every process
  maps them 2 MB-aligned, so that it reads them through huge pages too,
  even where `shmem_enabled` reads `never`: sampling on such a topology
  1.19x the batches/s at 1 thread and 1.15x at 2, a gather from such a
  table 1.74x and 1.26x. Tables mapped from files keep their pages.
- **Worker mode.** Sampling processes (`MpDistSamplingWorkerOptions`) overlap
  sampling with training; raise `worker_concurrency` from 4 to 16 on a link
  with milliseconds of delay; `channel_size` holds about three batches
  (measure one batch's bytes first).
- **Between hosts.** Most bytes of a remote batch are the other partitions'
  feature rows: partition with METIS (`StreamingPartitioner` where METIS's
  memory does not fit: about 170 bytes per directed edge), and cache the
  hottest remote rows (`cache_ratio` or `cache_memory_budget` of the
  partitioner). See
  docs/distributed.md, "Speed between machines, and what to tune".
- **On a GPU.** `graph_mode='CUDA'` where the topology fits in GPU memory,
  else 'ZERO_COPY'; `split_ratio` puts the hottest feature rows in GPU memory
  (sorted by in-degree), the rest is read through UVA. A loader on a GPU
  launches each batch's sampling before it collates the batch before, so
  that the GPU draws one batch while the host finishes another (two
  batches' sampling buffers on the GPU; `GLT_LAUNCH_AHEAD=0` samples one
  batch at a time); a script that calls the sampler itself does so with
  `NeighborSampler.launch_from_nodes` (`launch_from_edges` for link
  batches).
- **Measuring.** Time only on a quiet machine: every table gives the load
  average before its run. Beside busy processes our kernels keep most of
  their speed (the contention table above); the figures of a loaded
  machine are not comparable across runs.
"""


def load_results(directory: Path) -> Dict[str, dict]:
  return {p.stem: json.loads(p.read_text()) for p in sorted(directory.glob('*.json'))}


def machine_name(machine: dict) -> str:
  r"""A machine as the page names it: its GPU, or its cores and CPU."""
  memory = f', {machine["memory_gib"]:.0f} GiB' if machine.get('memory_gib') else ''
  head = f'{machine["gpu"]}, ' if machine.get('gpu') else ''
  physical = machine.get('physical_cores')
  cores = f'{machine["cores"]} cores'
  if physical and physical != machine['cores']:
    cores = f'{machine["cores"]} CPU threads on {physical} cores'
  return f'{head}{cores} ({machine["cpu"]}){memory}'


def machines_section(results: Dict[str, dict]) -> str:
  seen = {}
  for doc in results.values():
    m = doc['machine']
    seen.setdefault(machine_name(m), set()).add(f'Python {m["python"]}, torch {m["torch"]}')
  lines = ['## The machines', '', '| machine | software |', '|---|---|']
  lines += [f'| {name} | {", ".join(sorted(sw))} |' for name, sw in sorted(seen.items())]
  return '\n'.join(lines) + '\n'


def chart(table: dict, path: Path) -> None:
  r"""A horizontal bar per row of ``table``: its chart's value by label."""
  import matplotlib

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt

  cols = table['columns']
  label, value = cols.index(table['chart']['label']), cols.index(table['chart']['value'])
  rows = [r for r in table['rows'] if isinstance(r[value], (int, float))]
  values = [r[value] for r in rows]
  unit = 1e6 if max(values, default=0) >= 1e6 else 1
  fig, ax = plt.subplots(figsize=(7, 0.45 * len(rows) + 1.2))
  ax.barh([str(r[label]) for r in rows][::-1], [v / unit for v in values][::-1], color='#4c72b0')
  ax.set_xlabel(table['chart']['value'] + (', millions' if unit > 1 else ''))
  ax.set_title(table['title'], fontsize=9, wrap=True)
  ax.tick_params(axis='y', labelsize=8)
  fig.tight_layout()
  path.parent.mkdir(parents=True, exist_ok=True)
  fig.savefig(path, dpi=90, metadata={'Software': None})
  plt.close(fig)


def provenance(doc: dict) -> str:
  r"""Where and when a results file was measured, and how to do it again."""
  machine = doc['machine']
  load = machine.get('load_average')
  where = f'{machine_name(machine)}; {doc["date"]}, commit {doc["commit"]}'
  where += f', load average {load} before the run' if load is not None else ''
  text = f'*Measured on* {where}. *Reproduce:* `{doc["command"]}`'
  if doc.get('source'):
    text += f' ({doc["source"]})'
  return text + '\n'


def table_block(name: str, doc: dict, table: dict, charts: Optional[Path]) -> str:
  text = render_table(table['title'], table['columns'], table['rows'], table['note'])
  text += '\n' + provenance(doc)
  if table.get('chart'):
    png = f'{name}-{table["key"]}.png'
    if charts is not None:
      chart(table, charts / png)
    text += f'\n![{table["title"]}](_static/benchmarks/{png})\n'
  return text


def section(sec: Section, results: Dict[str, dict], charts: Optional[Path]) -> str:
  parts = [f'## {sec.title}', '', sec.intro, '']
  for name, key in sec.tables:
    doc = results.get(name)
    table = next((t for t in doc['tables'] if t['key'] == key), None) if doc else None
    if table is None:
      how = sec.missing or f'`python benchmarks/{SCRIPT_OF.get(name, name + ".py")}`'
      parts += [f'*Not measured yet ({name}, {key}):* {how}.', '']
      continue
    parts += [table_block(name, doc, table, charts), '']
  return '\n'.join(parts)


def render(results: Dict[str, dict], charts: Optional[Path]) -> str:
  head = (
    '# Benchmarks\n\n'
    'How fast graphlearn_torch is against what you would use instead, measured side by '
    'side: every table comes from one run of a script in `benchmarks/`, on the machine it '
    "names, with the command that reproduces it. This page is generated from those runs' "
    'results (`benchmarks/results/*.json`) by `make bench-report`.\n\n'
  )
  body = [machines_section(results)] + [section(s, results, charts) for s in SECTIONS]
  return head + '\n'.join(body) + '\n' + TUNING


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--results', default=str(DEFAULT_DIR))
  p.add_argument('--check', action='store_true', help='fail if docs/benchmarks.md is stale')
  p.add_argument('--no-charts', action='store_true')
  args = p.parse_args()
  results = load_results(Path(args.results))
  if args.check:
    if PAGE.read_text() != render(results, None):
      sys.exit('docs/benchmarks.md differs from its results: run make bench-report')
    return
  PAGE.write_text(render(results, None if args.no_charts else CHARTS))
  print(f'wrote {PAGE.relative_to(ROOT)} from {len(results)} results files')


if __name__ == '__main__':
  main()
