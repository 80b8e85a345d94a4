// libFuzzer target: the pickle VM plus the snapshot decoder on arbitrary bytes.
// Any input must end in a result or a memsnap::Error, never a crash, a hang or
// an unbounded allocation; and the same with and without the decoder's
// fast path for trace entries.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "io/input.h"
#include "memsnap/error.h"
#include "model_digest.h"
#include "pickle/json.h"
#include "pickle/vm.h"
#include "snapshot/decoder.h"
#include "text_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Summaries, budgets, rules files and patterns (fuzz/text_inputs.h).
  if (memsnap::fuzz::exercise_text_input(data, size)) return 0;
  // MEMSNAP_FUZZ_FIXTURES (set by the test over the real fixtures, whose
  // `memsnap dump` the differential test already checks): only the flat
  // against generic comparison below, and once. An input the plain pass
  // decoded held no import opcode, so the pass with allow_objects would
  // decode it alike. The corpus and libFuzzer runs keep every pass.
  static const bool fixtures = std::getenv("MEMSNAP_FUZZ_FIXTURES") != nullptr;
  std::span<const uint8_t> bytes(data, size);
  if (!fixtures) {
    try {
      memsnap::check_looks_like_pickle(bytes);
      memsnap::pickle::Vm vm(bytes, {});
      memsnap::pickle::Value root = vm.run();
      (void)memsnap::pickle::to_plain_json(vm, root);
      // `memsnap dump`, both ways; inline, shared objects can multiply the
      // output (a list holding one list twice, 100 deep): capped here.
      size_t written = 0;
      const memsnap::pickle::TextSink capped = [&written](std::string_view text) {
        written += text.size();
        if (written > (size_t{16} << 20))
          throw memsnap::Error(memsnap::ErrorCode::kLimitExceeded, "fuzz: output cap");
      };
      for (auto shared :
           {memsnap::pickle::SharedObjects::kOnce, memsnap::pickle::SharedObjects::kInline}) {
        written = 0;
        try {
          memsnap::pickle::write_tagged_json(vm, root, capped, shared);
        } catch (const memsnap::Error&) {
        }
      }
    } catch (const memsnap::Error&) {
    }
  }
  // Every input decodes the same with the flat fast path for trace entries
  // as with the generic VM only, and as with the input overwritten behind
  // the reader at every opcode (as an inflated file is freed): the same
  // model, or the same error.
  constexpr memsnap::EntryReading kReadings[] = {memsnap::EntryReading::kFlat,
                                                 memsnap::EntryReading::kGenericOnly,
                                                 memsnap::EntryReading::kFlatScrubbed};
  constexpr const char* kReadingNames[] = {"flat", "generic", "flat, input scrubbed"};
  bool plain_decoded = false;
  for (bool allow_objects : {false, true}) {
    if (allow_objects && fixtures && plain_decoded) continue;
    std::string results[3];
    for (int way = 0; way < 3; ++way) {
      try {
        memsnap::InputBuffer input =
            memsnap::InputBuffer::from_memory(std::vector<uint8_t>(data, data + size), "fuzz");
        memsnap::LoadOptions options;
        options.allow_objects = allow_objects;
        const memsnap::Snapshot snapshot = memsnap::decode_snapshot(input, options, kReadings[way]);
        results[way] = memsnap::testing::model_digest(snapshot);
      } catch (const memsnap::Error& error) {
        results[way] = std::string("error: ") + error.what();
      }
    }
    plain_decoded = !allow_objects && results[0].rfind("error: ", 0) != 0;
    for (int way = 1; way < 3; ++way) {
      if (results[0] == results[way]) continue;
      std::fprintf(stderr, "flat and %s decoding differ:\n--- flat\n%s\n--- %s\n%s\n",
                   kReadingNames[way], results[0].substr(0, 4000).c_str(), kReadingNames[way],
                   results[way].substr(0, 4000).c_str());
      std::abort();
    }
  }
  return 0;
}
