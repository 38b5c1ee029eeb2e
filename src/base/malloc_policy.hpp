// base/malloc_policy.hpp — how glibc's malloc treats the large blocks Sheaf frees over and over.
// Tracing, the IR passes (each rebuilds the graph) and every training step free and allocate the
// same large blocks (node vectors, tensor buffers) again and again. glibc's defaults hand such
// blocks back to the kernel (munmap, heap trimming) and fault in fresh zeroed pages on the next
// allocation: 5–7 % of a CPU GPT step (perf, bench/gpt_step_style3.shf) and a third of the page
// faults of tracing and optimising GPT-2 (bench/gpu_dry). Fixed thresholds turn that off; a
// steady loop then reuses the same pages. The executables link tcmalloc where it is installed
// (CMakeLists.txt: SHEAF_TCMALLOC), which keeps freed spans by itself: there mallopt is
// tcmalloc's and these calls change nothing. The Python module keeps glibc's malloc and this policy.
#pragma once

namespace sheaf {

// Blocks under 32 MiB come from the heap, and the heap is trimmed only past 1 GiB free.
// Idempotent; the CPU backend calls it before its first program runs.
void keep_freed_memory();

// The policy of Sheaf's own processes (the CLI, the Python module's worker, the bench programs):
// one malloc arena — the interpreter runs on a thread of its own, whose secondary arena would
// otherwise return every large freed block — and keep_freed_memory(). Call at start-up.
void set_process_malloc_policy();

}  // namespace sheaf
