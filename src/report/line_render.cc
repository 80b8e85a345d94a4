#include "report/line_render.h"

namespace memsnap {

nlohmann::ordered_json render_line_json(const MemoryLine& line) {
  return {{"file", line.file},
          {"device", line.device},
          {"axis", line.window.axis == LineAxis::kTime ? "time" : "event"},
          {"from", line.window.from},
          {"to", line.window.to},
          {"width", line.window.width},
          {"baseline", line.baseline},
          {"low", line.low},
          {"high", line.high}};
}

}  // namespace memsnap
