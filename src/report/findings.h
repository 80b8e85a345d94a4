// Findings in words: the one place they are phrased.
#pragma once

#include <string>
#include <vector>

#include "analysis/findings.h"

namespace memsnap {

std::string phrase(const Finding& finding);
std::vector<std::string> phrase_all(const std::vector<Finding>& findings);
// The line every command prints on stderr when the file has data on devices
// its report does not show: "memsnap: FILE: this report is device 1 (it ran
// out of memory); the file also has data on devices 0, 2 (...)".
std::string device_choice_note(const std::string& path, const DeviceChoice& choice);

}  // namespace memsnap
