"""Distributed graph learning: partitions, and (next) distributed sampling."""

from .dist_dataset import DistDataset, default_id_filter, default_id_select

__all__ = ['DistDataset', 'default_id_filter', 'default_id_select']
