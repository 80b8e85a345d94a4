#include "snapshot/allocator_settings.h"

#include <bit>
#include <charconv>
#include <limits>
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

// garbage_collection_threshold: a number, or a float JSON cannot hold
// ("inf", "-inf", "nan": to_plain_json's strings for them).
std::optional<double> threshold_of(const nlohmann::ordered_json& value) {
  if (value.is_number()) return value.get<double>();
  if (value == "inf") return std::numeric_limits<double>::infinity();
  if (value == "-inf") return -std::numeric_limits<double>::infinity();
  if (value == "nan") return std::numeric_limits<double>::quiet_NaN();
  return std::nullopt;
}

void decode_divisions(const nlohmann::ordered_json& divisions, AllocatorSettings& settings) {
  if (divisions.is_number_integer()) {
    settings.roundup_power2_divisions = non_negative(divisions);
    return;
  }
  for (const auto& [key, value] : divisions.items()) {
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

}  // namespace

AllocatorSettings decode_allocator_settings(const nlohmann::ordered_json& dict) {
  AllocatorSettings settings;
  settings.json = dict.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  if (!dict.is_object()) return settings;
  // None is a setting left unset, not one of another type.
  const auto unread = [&](const char* key, const nlohmann::ordered_json& value) {
    if (value.is_null()) return;
    settings.unread.emplace_back(
        key, value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
  };
  if (auto it = dict.find("expandable_segments"); it != dict.end()) {
    if (it->is_boolean()) {
      settings.expandable_segments = it->get<bool>();
    } else {
      unread("expandable_segments", *it);
    }
  }
  if (auto it = dict.find("max_split_size"); it != dict.end()) {
    // -1 (SIZE_MAX as int64) is unlimited; so is anything not positive.
    if (!it->is_number_integer()) {
      unread("max_split_size", *it);
    } else if (const std::optional<uint64_t> size = non_negative(*it); size && *size > 0) {
      settings.max_split_size = size;
    }
  }
  if (auto it = dict.find("garbage_collection_threshold"); it != dict.end()) {
    settings.garbage_collection_threshold = threshold_of(*it);
    if (!settings.garbage_collection_threshold) unread("garbage_collection_threshold", *it);
  }
  if (auto it = dict.find("roundup_power2_divisions"); it != dict.end()) {
    if (it->is_number_integer() || it->is_object()) {
      decode_divisions(*it, settings);
    } else {
      unread("roundup_power2_divisions", *it);
    }
  }
  return settings;
}

nlohmann::ordered_json allocator_settings_json(const AllocatorSettings& settings) {
  if (settings.json.empty()) return nullptr;
  return nlohmann::ordered_json::parse(settings.json);
}

}  // namespace memsnap
