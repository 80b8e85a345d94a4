#include "snapshot/allocator_settings.h"

#include <bit>
#include <charconv>

namespace memsnap {

AllocatorSettings decode_allocator_settings(const nlohmann::ordered_json& dict) {
  AllocatorSettings settings;
  settings.json = dict.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  if (!dict.is_object()) return settings;
  if (auto it = dict.find("expandable_segments"); it != dict.end() && it->is_boolean()) {
    settings.expandable_segments = it->get<bool>();
  }
  if (auto it = dict.find("max_split_size"); it != dict.end() && it->is_number_integer()) {
    // -1 (SIZE_MAX as int64) is unlimited; so is anything not positive.
    if (it->is_number_unsigned() || it->get<int64_t>() > 0) {
      settings.max_split_size = it->get<uint64_t>();
    }
  }
  if (auto it = dict.find("garbage_collection_threshold"); it != dict.end() && it->is_number()) {
    settings.garbage_collection_threshold = it->get<double>();
  }
  auto divisions = dict.find("roundup_power2_divisions");
  if (divisions == dict.end()) return settings;
  if (divisions->is_number_unsigned()) {
    settings.roundup_power2_divisions = divisions->get<uint64_t>();
  } else if (divisions->is_object()) {
    for (const auto& [key, value] : divisions->items()) {
      uint64_t mib = 0;
      auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), mib);
      if (error != std::errc() || end != key.data() + key.size() || !std::has_single_bit(mib) ||
          !value.is_number_unsigned()) {
        continue;
      }
      settings.roundup_power2_divisions_by_mib.emplace_back(mib, value.get<uint64_t>());
    }
  }
  return settings;
}

nlohmann::ordered_json allocator_settings_json(const AllocatorSettings& settings) {
  if (settings.json.empty()) return nullptr;
  return nlohmann::ordered_json::parse(settings.json);
}

}  // namespace memsnap
