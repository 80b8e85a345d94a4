#include "snapshot/allocator_settings.h"

#include <bit>
#include <charconv>
#include <optional>

namespace memsnap {
namespace {

// A whole number >= 0. The pickle's integers arrive signed; JSON text read
// back would have made them unsigned, so both are taken.
std::optional<uint64_t> non_negative(const nlohmann::ordered_json& value) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    return static_cast<uint64_t>(value.get<int64_t>());
  }
  return std::nullopt;
}

}  // namespace

AllocatorSettings decode_allocator_settings(const nlohmann::ordered_json& dict) {
  AllocatorSettings settings;
  settings.json = dict.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  if (!dict.is_object()) return settings;
  if (auto it = dict.find("expandable_segments"); it != dict.end() && it->is_boolean()) {
    settings.expandable_segments = it->get<bool>();
  }
  if (auto it = dict.find("max_split_size"); it != dict.end() && it->is_number_integer()) {
    // -1 (SIZE_MAX as int64) is unlimited; so is anything not positive.
    if (const std::optional<uint64_t> size = non_negative(*it); size && *size > 0) {
      settings.max_split_size = size;
    }
  }
  if (auto it = dict.find("garbage_collection_threshold"); it != dict.end() && it->is_number()) {
    settings.garbage_collection_threshold = it->get<double>();
  }
  auto divisions = dict.find("roundup_power2_divisions");
  if (divisions == dict.end()) return settings;
  if (divisions->is_number_integer()) {
    settings.roundup_power2_divisions = non_negative(*divisions);
  } else if (divisions->is_object()) {
    for (const auto& [key, value] : divisions->items()) {
      uint64_t mib = 0;
      auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), mib);
      const std::optional<uint64_t> count = non_negative(value);
      if (error != std::errc() || end != key.data() + key.size() || !std::has_single_bit(mib) ||
          !count) {
        continue;
      }
      settings.roundup_power2_divisions_by_mib.emplace_back(mib, *count);
    }
  }
  return settings;
}

nlohmann::ordered_json allocator_settings_json(const AllocatorSettings& settings) {
  if (settings.json.empty()) return nullptr;
  return nlohmann::ordered_json::parse(settings.json);
}

}  // namespace memsnap
