// The allocator_settings dict of a snapshot, decoded once into the model's
// typed AllocatorSettings (what the analyses read) beside its JSON text (what
// reports show and compare).
#pragma once

#include <nlohmann/json.hpp>

#include "memsnap/model.h"

namespace memsnap {

// `dict` is the settings as plain JSON (pickle::to_plain_json). Fields of an
// unexpected type are left unset, never an error: the settings are advice.
AllocatorSettings decode_allocator_settings(const nlohmann::ordered_json& dict);

// The whole dict again, for reports and compare's diff (null when the file
// has none).
nlohmann::ordered_json allocator_settings_json(const AllocatorSettings& settings);

}  // namespace memsnap
