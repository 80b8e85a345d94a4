// Renderers of `memsnap events`.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/event_list.h"

namespace memsnap {

std::string render_events_text(const EventListing& listing, const std::string& file);
nlohmann::ordered_json render_events_json(const EventListing& listing);

}  // namespace memsnap
