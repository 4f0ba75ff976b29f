// A shared file (a memfd the processes of a host map) mapped where its huge
// pages can be mapped whole: at a 2 MB-aligned address.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace glt::cpu {

// The first `nbytes` of the shared file `fd`, mapped read-write at a 2
// MB-aligned address, as a uint8 tensor that torch counts as shared memory
// (is_shared(); its multiprocessing hands it on by descriptor). The mapping
// holds a descriptor of its own and is unmapped when the tensor is freed.
// Where the file's pages are huge pages (collapse_huge_pages on such a
// mapping, cpu/runtime/huge_pages.h), every process that maps it this way
// maps each whole, through one TLB entry. Raises where the descriptor cannot
// be mapped.
at::Tensor map_shared_file(int64_t fd, int64_t nbytes);

}  // namespace glt::cpu
