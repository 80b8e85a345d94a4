// Findings in words: the one place they are phrased.
#pragma once

#include <string>
#include <vector>

#include "analysis/findings.h"

namespace memsnap {

std::string phrase(const Finding& finding);
std::vector<std::string> phrase_all(const std::vector<Finding>& findings);

}  // namespace memsnap
