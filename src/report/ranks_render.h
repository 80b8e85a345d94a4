// `memsnap ranks`: text and JSON of a RanksReport.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/reports/ranks.h"

namespace memsnap {

// A file that could not be read: its path and why (the report still covers the rest).
struct UnreadableFile {
  std::string path;
  std::string error;
};

// "Could not be read" and one line per file, or nothing; and the JSON list.
std::string unreadable_text(const std::vector<UnreadableFile>& unread);
nlohmann::ordered_json unreadable_json(const std::vector<UnreadableFile>& unread);

// top: rows per table (negative: all).
std::string render_ranks_text(const RanksReport& report, const std::vector<UnreadableFile>& unread,
                              int top);
nlohmann::ordered_json render_ranks_json(const RanksReport& report,
                                         const std::vector<UnreadableFile>& unread);

// "0-7, 9, 12-14 (13 ranks)", or the files' names where ranks are unknown.
std::string rank_list(const RanksReport& report, const std::vector<size_t>& rows);

}  // namespace memsnap
