"""Model checkpoints by sequence number, as GLT 0.2.x's
``graphlearn_torch.utils.common.save_ckpt`` / ``load_ckpt`` write and read
them: ``<ckpt_dir>/model_seq_<seq>.ckpt``, a ``torch.save``'d dict of
``seq``, ``epoch``, ``model_state_dict`` and, with an optimizer,
``optimizer_state_dict``. A checkpoint is written whole or not at all, and
read without unpickling code (``weights_only``).

Given ``loaders`` (a dict of named loaders), a checkpoint also holds where
they are (``loaders_state_dict``: each loader's ``state_dict``) and torch's
random state (``rng_state``), all a job needs to go on mid-epoch with the
batches and the random draws (dropout) of the uninterrupted run."""

import os
from typing import Any, Dict, Optional

import torch


def ckpt_path(ckpt_seq: int, ckpt_dir: str) -> str:
  """The file of checkpoint ``ckpt_seq`` in ``ckpt_dir``."""
  return os.path.join(ckpt_dir, f'model_seq_{ckpt_seq}.ckpt')


def save_ckpt(
  ckpt_seq: int,
  ckpt_dir: str,
  model: torch.nn.Module,
  optimizer: Optional[torch.optim.Optimizer] = None,
  epoch: float = 0,
  loaders: Optional[Dict[str, Any]] = None,
) -> None:
  """Saves ``model``'s (and ``optimizer``'s) state as checkpoint ``ckpt_seq``.

  Args:
    ckpt_seq: the checkpoint's sequence number (its file name).
    ckpt_dir: the directory, made when missing.
    model: the model whose ``state_dict`` is saved.
    optimizer: the optimizer whose ``state_dict`` is saved too, if any.
    epoch: the (possibly fractional) epoch the checkpoint is taken at.
    loaders: loaders by name whose ``state_dict`` is saved, with torch's
      random state, to resume mid-epoch (``load_ckpt``'s ``loaders``).
  """
  os.makedirs(ckpt_dir, exist_ok=True)
  ckpt = {'seq': ckpt_seq, 'epoch': epoch, 'model_state_dict': model.state_dict()}
  if optimizer:
    ckpt['optimizer_state_dict'] = optimizer.state_dict()
  if loaders is not None:
    ckpt['loaders_state_dict'] = {name: loader.state_dict() for name, loader in loaders.items()}
    ckpt['rng_state'] = torch.get_rng_state()
  path = ckpt_path(ckpt_seq, ckpt_dir)
  partial = f'{path}.{os.getpid()}.partial'
  try:
    torch.save(ckpt, partial)
    os.replace(partial, path)  # a crash mid-write leaves the old checkpoint whole
  finally:
    if os.path.exists(partial):
      os.remove(partial)


def load_ckpt(
  ckpt_seq: int,
  ckpt_dir: str,
  model: torch.nn.Module,
  optimizer: Optional[torch.optim.Optimizer] = None,
  loaders: Optional[Dict[str, Any]] = None,
) -> float:
  """Loads checkpoint ``ckpt_seq`` into ``model`` (and ``optimizer``).

  Args:
    ckpt_seq: the checkpoint's sequence number.
    ckpt_dir: the directory ``save_ckpt`` wrote it to.
    model: the model to load the saved state into.
    optimizer: the optimizer to load the saved state into, if any.
    loaders: loaders by name to resume where the saved ones were (their
      ``load_state_dict``); torch's random state is restored with them.

  Raises:
    KeyError: the checkpoint lacks the optimizer's or a loader's state.
    ValueError: a loader's state does not fit the loader (see its
      ``load_state_dict``).

  Returns:
    The checkpoint's epoch, or -1 when there is no such checkpoint (GLT's
    answer: the caller starts from scratch).
  """
  try:
    ckpt = torch.load(ckpt_path(ckpt_seq, ckpt_dir), map_location='cpu', weights_only=True)
  except FileNotFoundError:
    return -1
  model.load_state_dict(ckpt['model_state_dict'])
  if optimizer:
    if 'optimizer_state_dict' not in ckpt:
      raise KeyError(
        f'{ckpt_path(ckpt_seq, ckpt_dir)} holds no optimizer state (saved without an optimizer)'
      )
    optimizer.load_state_dict(ckpt['optimizer_state_dict'])
  if loaders is not None:
    saved = ckpt.get('loaders_state_dict', {})
    missing = sorted(set(loaders) - set(saved))
    if missing:
      raise KeyError(
        f'{ckpt_path(ckpt_seq, ckpt_dir)} holds no state of loaders {missing} (it has '
        f'{sorted(saved)})'
      )
    for name, loader in loaders.items():
      loader.load_state_dict(saved[name])
    torch.set_rng_state(ckpt['rng_state'])
  return ckpt.get('epoch')
