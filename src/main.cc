#include "cli/command.h"
#include "util/glibc_malloc.h"

int main(int argc, char** argv) {
#if defined(MEMSNAP_GLIBC_MALLOC)
  // glibc raises its mmap threshold after each large free, so the next
  // file's columns come from the heap, which then keeps several files' worth
  // of pages; a fixed threshold keeps large buffers in mmap, returned as they
  // are freed (measured: summarising 8 files of 11 MB with -j 1 peaked at
  // 65 MB instead of 38 MB). Set here, in the program, never in the library:
  // the Python package must not change its interpreter's allocator.
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
  return memsnap::cli::run_cli(argc, argv);
}
