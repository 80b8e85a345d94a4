// libFuzzer target: the pickle VM plus the snapshot decoder on arbitrary bytes.
// Any input must end in a result or a memsnap::Error, never a crash, a hang or
// an unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "io/input.h"
#include "memsnap/error.h"
#include "pickle/json.h"
#include "pickle/vm.h"
#include "snapshot/decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  try {
    memsnap::check_looks_like_pickle(bytes);
    memsnap::pickle::Vm vm(bytes, {});
    memsnap::pickle::Value root = vm.run();
    (void)memsnap::pickle::to_plain_json(vm, root);
  } catch (const memsnap::Error&) {
  }
  for (bool allow_objects : {false, true}) {
    try {
      memsnap::InputBuffer input =
          memsnap::InputBuffer::from_memory(std::vector<uint8_t>(data, data + size), "fuzz");
      memsnap::LoadOptions options;
      options.allow_objects = allow_objects;
      (void)memsnap::decode_snapshot(input, options);
    } catch (const memsnap::Error&) {
    }
  }
  return 0;
}
