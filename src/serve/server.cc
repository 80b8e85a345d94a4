#include "serve/server.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <span>
#include <stop_token>
#include <thread>
#include <utility>

#include <zlib.h>
#include <nlohmann/json.hpp>

#include "analysis/reports/allocation.h"
#include "analysis/reports/allocation_layout.h"
#include "analysis/reports/memory_line.h"
#include "analysis/reports/ranks.h"
#include "analysis/reports/run_summary.h"
#include "analysis/reports/segment_report.h"
#include "analysis/reports/segment_timeline.h"
#include "memsnap/error.h"
#include "report/allocation_render.h"
#include "report/format.h"
#include "report/line_render.h"
#include "report/ranks_render.h"
#include "report/segment_render.h"
#include "serve/http.h"
#include "service/report_table.h"

namespace memsnap::serve {
namespace {

using nlohmann::ordered_json;

constexpr std::string_view kJson = "application/json; charset=utf-8";
constexpr std::string_view kHtml = "text/html; charset=utf-8";

// `text` gzipped (zlib's default level), for Content-Encoding: gzip.
std::string gzipped(std::string_view text) {
  z_stream stream{};
  // 15 + 16: a gzip header and trailer, not zlib's.
  if (deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    throw Error(ErrorCode::kInternalError, "cannot start compressing the page");
  }
  std::string out(deflateBound(&stream, text.size()), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  stream.avail_in = static_cast<uInt>(text.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  const int done = deflate(&stream, Z_FINISH);
  deflateEnd(&stream);
  if (done != Z_STREAM_END) throw Error(ErrorCode::kInternalError, "cannot compress the page");
  out.resize(stream.total_out);
  return out;
}

// Fills bytes from the getrandom system call (Linux 3.17), called by number:
// glibc declares getrandom() only from 2.25, and the wheels are built for
// 2.17. False where the kernel lacks it (ENOSYS).
bool fill_from_getrandom(std::span<unsigned char> bytes) {
  size_t filled = 0;
  while (filled < bytes.size()) {
    const long got = syscall(SYS_getrandom, bytes.data() + filled, bytes.size() - filled, 0);
    if (got < 0 && errno == ENOSYS) return false;
    if (got < 0 && errno != EINTR)
      throw Error(ErrorCode::kInternalError, "cannot read random bytes for the token");
    if (got > 0) filled += static_cast<size_t>(got);
  }
  return true;
}

// The older kernels' way: /dev/urandom.
void fill_from_urandom(std::span<unsigned char> bytes) {
  const int file = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (file < 0)
    throw Error(ErrorCode::kInternalError,
                "cannot read random bytes for the token: no getrandom, no /dev/urandom");
  size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t got = read(file, bytes.data() + filled, bytes.size() - filled);
    if (got == 0 || (got < 0 && errno != EINTR)) {
      close(file);
      throw Error(ErrorCode::kInternalError,
                  "cannot read random bytes for the token from /dev/urandom");
    }
    if (got > 0) filled += static_cast<size_t>(got);
  }
  close(file);
}

// 24 bytes from the kernel's random source, in hex.
std::string random_token() {
  std::array<unsigned char, 24> bytes{};
  if (!fill_from_getrandom(bytes)) fill_from_urandom(bytes);
  std::string token;
  for (const unsigned char byte : bytes) token += fmt::format("{:02x}", byte);
  return token;
}

// Equal strings, in a time that does not depend on where they differ.
bool same_token(std::string_view given, std::string_view token) {
  unsigned char differ = given.size() == token.size() ? 0 : 1;
  for (size_t i = 0; i < token.size(); ++i) {
    differ |= static_cast<unsigned char>(token[i] ^ (i < given.size() ? given[i] : 0));
  }
  return differ == 0;
}

bool is_loopback(std::string_view host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1";
}

HttpResponse json_response(int status, const ordered_json& body) {
  HttpResponse response;
  response.status = status;
  response.content_type = kJson;
  response.body = body.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  return response;
}

// What every answer carries: it is for this user's browser only, never
// cached, never sniffed, and the token in the page's address never leaves it.
HttpResponse with_safety_headers(HttpResponse response) {
  response.headers.emplace_back("Cache-Control", "no-store");
  response.headers.emplace_back("X-Content-Type-Options", "nosniff");
  response.headers.emplace_back("Referrer-Policy", "no-referrer");
  return response;
}

// The token as it goes in the printed address: every byte but the
// unreserved ones (RFC 3986) percent-encoded, so that `a&b=c` or `a+b`
// arrive as they were given.
std::string url_encoded(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) != 0 || c == '-' || c == '.' || c == '_' || c == '~') {
      out += c;
    } else {
      out += fmt::format("%{:02X}", byte);
    }
  }
  return out;
}

}  // namespace

bool server_available() {
  return true;
}

void require_server() {}

void check_options(const ServeOptions& options) {
  if (!is_loopback(options.host) && options.token.empty()) {
    throw Error(
        ErrorCode::kBadParameter,
        fmt::format(
            "--host {} answers other machines: give --token too (a secret of your own), or use "
            "127.0.0.1 and an SSH tunnel",
            printable(options.host)));
  }
}

struct Server::State {
  std::vector<ServedFile> files;
  ServeOptions options;
  std::function<std::string()> build_page;
  std::once_flag page_once;
  std::string page;
  std::string page_gzip;  // the same, gzipped once
  std::string page_error;
  std::once_flag ranks_once;
  ordered_json ranks;  // GET /api/ranks, computed on the first request
  std::unique_ptr<HttpServer> http;
  int port = 0;
  // Builds the indexes behind the zoomable views while the page loads; last,
  // so that it is stopped and joined before anything it reads goes away.
  std::jthread warm_up;

  // On the transport's event loop: every request proves it may ask before
  // anything is read; a refusal, or nullopt for a request to answer.
  [[nodiscard]] std::optional<HttpResponse> admit(const HttpRequest& request) const;
  // On a worker: the answer to an admitted request.
  HttpResponse answer(const HttpRequest& request);
  HttpResponse page_answer(const HttpRequest& request);
  [[nodiscard]] HttpResponse report_answer(const HttpRequest& request) const;
  [[nodiscard]] ordered_json files_json() const;
  const ordered_json& ranks_json();
};

std::optional<HttpResponse> Server::State::admit(const HttpRequest& request) const {
  if (request.method != "GET" && request.method != "HEAD") {
    HttpResponse refusal =
        error_response(405, ErrorCode::kBadRequest, "only GET and HEAD are answered");
    refusal.headers.emplace_back("Allow", "GET, HEAD");
    return refusal;
  }
  if (is_loopback(options.host)) {
    // Another site's page cannot name this server by its own host name.
    const std::string host = request.header("Host");
    const std::array<std::string, 3> allowed = {fmt::format("127.0.0.1:{}", port),
                                                fmt::format("localhost:{}", port),
                                                fmt::format("[::1]:{}", port)};
    if (std::find(allowed.begin(), allowed.end(), host) == allowed.end()) {
      return error_response(403, ErrorCode::kForbiddenHost,
                            "the Host header does not name this server's loopback address");
    }
  }
  std::string given = request.param("token");
  const std::string authorization = request.header("Authorization");
  if (given.empty() && authorization.rfind("Bearer ", 0) == 0) given = authorization.substr(7);
  if (!same_token(given, options.token)) {
    return error_response(401, ErrorCode::kUnauthorized,
                          "a token is required: open the address memsnap serve printed");
  }
  if (request.params.size() > kMaxParameters) {
    return error_response(400, ErrorCode::kBadRequest,
                          fmt::format("at most {} parameters", kMaxParameters));
  }
  for (const auto& [name, value] : request.params) {
    if (request.params.count(name) > 1) {
      return error_response(400, ErrorCode::kBadRequest,
                            fmt::format("{} given {} times; give it once",
                                        printable(name.substr(0, 40)), request.params.count(name)));
    }
    if (name.size() > kMaxParameterBytes || value.size() > kMaxParameterBytes) {
      return error_response(
          400, ErrorCode::kBadRequest,
          fmt::format("a parameter or its value is longer than {} bytes", kMaxParameterBytes));
    }
  }
  return std::nullopt;
}

ordered_json Server::State::files_json() const {
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < files.size(); ++i) {
    const FileAnalysis& file = files[i].analysis();
    out.push_back({{"file", i},
                   {"label", files[i].label},
                   {"path", files[i].path},
                   {"device", file.device()},
                   {"devices", file.snapshot().devices_in_use()},
                   {"event_count", file.trace().count()}});
  }
  return out;
}

// The served files as ranks (memsnap ranks --json FILES): each summarised from
// its analysis, the rank read from its name.
const ordered_json& Server::State::ranks_json() {
  std::call_once(ranks_once, [this] {
    std::vector<RunSummary> summaries;
    for (const ServedFile& file : files) {
      summaries.push_back(run_summary(
          file.analysis(),
          SummaryOptions{SourceKeyOptions{}, rank_from_name(file.path, kDefaultRankPattern)}));
    }
    ranks = render_ranks_json(analyze_ranks(summaries), {});
  });
  return ranks;
}

namespace {

ordered_json report_table_json() {
  ordered_json out = ordered_json::array();
  for (const service::ReportEntry& entry : service::report_table()) {
    ordered_json parameters = ordered_json::array();
    std::vector<service::Parameter> all = entry.parameters;
    all.push_back(service::top_parameter());
    for (const service::Parameter& parameter : all) {
      parameters.push_back({{"name", service::spelled(parameter, service::Spelling::kKeyword)},
                            {"kind", service::kind_description(parameter)},
                            {"help", std::string(parameter.help)}});
    }
    out.push_back({{"name", std::string(entry.name)},
                   {"summary", std::string(entry.summary)},
                   {"two_files", entry.answer_pair != nullptr},
                   {"parameters", parameters}});
  }
  return out;
}

// A file's index from the request: a whole number below `count`, never a path.
size_t file_index(const HttpRequest& request, const char* name, size_t count) {
  const std::string text = request.param(name);
  size_t index = 0;
  const char* end = text.data() + text.size();
  const auto [at, problem] = std::from_chars(text.data(), end, index);
  if (text.empty() || problem != std::errc() || at != end || index >= count) {
    throw Error(ErrorCode::kBadParameter,
                fmt::format("{} must be the index of a served file, 0 to {} (GET /api/files)", name,
                            count - 1));
  }
  return index;
}

// Throws a usage Error for a parameter `route` does not take.
void only_parameters(const HttpRequest& request, std::string_view route,
                     std::initializer_list<std::string_view> names) {
  for (const auto& [name, value] : request.params) {
    if (name == "token" || name == "file" ||
        std::find(names.begin(), names.end(), name) != names.end()) {
      continue;
    }
    throw Error(ErrorCode::kBadParameter, fmt::format("{} has no parameter '{}' ({})", route,
                                                      printable(name), fmt::join(names, ", ")));
  }
}

// Throws a usage Error for any parameter but the token: the routes of the
// whole server (files, reports, ranks) take none.
void only_the_token(const HttpRequest& request, std::string_view route) {
  for (const auto& [name, value] : request.params) {
    if (name != "token") {
      throw Error(
          ErrorCode::kBadParameter,
          fmt::format("{} takes no parameter but the token, not '{}'", route, printable(name)));
    }
  }
}

// A finite number from the request; `fallback` when it is absent.
double number_of(const HttpRequest& request, const char* name, double fallback) {
  if (!request.has_param(name)) return fallback;
  const std::string text = request.param(name);
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [at, problem] = std::from_chars(text.data(), end, value);
  if (text.empty() || problem != std::errc() || at != end || !std::isfinite(value)) {
    throw Error(ErrorCode::kBadParameter, fmt::format("{} expects a finite number, not '{}'", name,
                                                      printable(text.substr(0, 40))));
  }
  return value;
}

// A whole number in lowest..highest from the request; `fallback` when absent.
uint64_t whole_number_of(const HttpRequest& request, const char* name, double fallback,
                         double lowest, double highest) {
  const double value = number_of(request, name, fallback);
  if (value < lowest || value != std::floor(value) || value > highest) {
    throw Error(ErrorCode::kBadParameter,
                fmt::format("{} must be a whole number, {} to {}", name, lowest, highest));
  }
  return static_cast<uint64_t>(value);
}

// time=T: seconds from the trace's start, at least 0.
double seconds_of(const HttpRequest& request) {
  const double seconds = number_of(request, "time", 0);
  if (seconds < 0)
    throw Error(ErrorCode::kBadParameter, "time must be >= 0 (seconds from the trace's start)");
  return seconds;
}

// The window of a line or a layout: axis=time|event&from=A&to=B&width=W,
// the whole trace by default.
LineWindow window_of(const HttpRequest& request, const FileAnalysis& file) {
  const std::string axis = request.has_param("axis") ? request.param("axis") : "time";
  if (axis != "time" && axis != "event")
    throw Error(ErrorCode::kBadParameter, "axis is time or event");
  LineWindow window;
  window.axis = axis == "time" ? LineAxis::kTime : LineAxis::kEvent;
  const double end = window.axis == LineAxis::kTime ? file.time().duration_s()
                                                    : static_cast<double>(file.trace().count());
  window.from = number_of(request, "from", 0);
  window.to = number_of(request, "to", end);
  window.width = static_cast<int>(whole_number_of(request, "width", 1000, 1, kMaxLineWidth));
  return window;
}

// GET /api/line?file=I&<window>: the memory line of a window
// (analysis/reports/memory_line.h).
ordered_json line_of(const HttpRequest& request, const FileAnalysis& file) {
  only_parameters(request, "line", {"axis", "from", "to", "width"});
  return render_line_json(memory_line(file, window_of(request, file)));
}

// The allocations a layout draws, and the segments a segment timeline
// draws, unless the request says otherwise.
constexpr size_t kLayoutBudget = 2000;
constexpr size_t kSegmentBudget = 500;

// budget=N: how many spans to draw one by one, 1 to `limit`.
size_t budget_of(const HttpRequest& request, size_t fallback, size_t limit) {
  return whole_number_of(request, "budget", static_cast<double>(fallback), 1,
                         static_cast<double>(limit));
}

// GET /api/layout?file=I&<window>&budget=N&q=TEXT: the window's largest
// allocations one by one and the band of the rest
// (analysis/reports/allocation_layout.h); q marks what a search finds.
ordered_json layout_of(const HttpRequest& request, const FileAnalysis& file) {
  only_parameters(request, "layout", {"axis", "from", "to", "width", "budget", "q"});
  return render_layout_json(allocation_layout(file, window_of(request, file),
                                              budget_of(request, kLayoutBudget, kMaxLayoutBudget),
                                              request.param("q"), SourceKeyOptions{}));
}

// GET /api/segment-timeline?file=I&<window>&budget=N: the segments reserved
// over the window, the largest one by one over the band of the rest
// (analysis/reports/segment_timeline.h).
ordered_json segment_timeline_of(const HttpRequest& request, const FileAnalysis& file) {
  only_parameters(request, "segment-timeline", {"axis", "from", "to", "width", "budget"});
  return render_segment_timeline_json(segment_timeline(
      file, window_of(request, file), budget_of(request, kSegmentBudget, kMaxSegmentBudget)));
}

// The segments a segment map draws unless the request says otherwise, and
// the most it may ask for.
constexpr double kMapSegments = 48;
constexpr double kMaxMapSegments = 1000;

// GET /api/segments?file=I&time=T|position=P&limit=N: the allocator's
// segments then (the dump without either), as `memsnap segments --time T
// --json --top N` says, and the map of the largest N with their blocks.
ordered_json segments_of(const HttpRequest& request, const FileAnalysis& file) {
  only_parameters(request, "segments", {"time", "position", "limit"});
  const auto limit = whole_number_of(request, "limit", kMapSegments, 0, kMaxMapSegments);
  SegmentReport report;
  if (request.has_param("time") && request.has_param("position")) {
    throw Error(ErrorCode::kBadParameter, "give time or position, not both");
  } else if (request.has_param("time")) {
    report = segments_at_time(file, seconds_of(request), true);
  } else if (request.has_param("position")) {
    const uint64_t position =
        whole_number_of(request, "position", 0, 0, static_cast<double>(file.trace().count()));
    report = segments_at_position(file, position, true);
    // The time of the last entry applied, where the trace has times.
    const std::optional<double> seconds = position == 0
                                              ? std::optional<double>(0)
                                              : file.seconds_at(file.trace().begin + position - 1);
    report.time_s = report.requested_time_s = seconds.value_or(0);
  } else {
    report = segments_at_dump(file.path(), file.snapshot(), file.device(), true);
    report.history = file.allocator_history()->check();
  }
  return {{"report", render_segments_json(report, static_cast<int>(limit))},
          {"map", render_segment_map_json(report, limit)}};
}

// GET /api/block?file=I&address=A&position=P: the trace's allocation that
// holds the block at A after P entries, in full, or null (a block from
// before the trace).
ordered_json block_of(const HttpRequest& request, const FileAnalysis& file) {
  only_parameters(request, "block", {"address", "position"});
  // Addresses pass 2^53: read as integers, decimal or 0x hex, not as doubles.
  const std::string text = request.param("address");
  const bool hex = text.rfind("0x", 0) == 0;
  const char* begin = text.data() + (hex ? 2 : 0);
  const char* end = text.data() + text.size();
  uint64_t address = 0;
  const auto [at, problem] = std::from_chars(begin, end, address, hex ? 16 : 10);
  if (begin == end || problem != std::errc() || at != end) {
    throw Error(ErrorCode::kBadParameter, "address must be a block's address (decimal or 0x hex)");
  }
  const uint64_t position = whole_number_of(request, "position", 0, 0, 0x1p53);
  const std::optional<uint64_t> entry = allocation_at_address(file, address, position);
  if (!entry) return {{"allocation", nullptr}};
  return {{"allocation", render_allocation_json(allocation_at(file, *entry, SourceKeyOptions{}))}};
}

// The allocations a search returns by entry, at most.
constexpr size_t kSearchEntries = 500;

// GET /api/allocation?file=I&entry=K: one allocation in full.
ordered_json allocation_of(const HttpRequest& request, const FileAnalysis& file) {
  only_parameters(request, "allocation", {"entry"});
  const double entry = number_of(request, "entry", -1);
  if (entry < 0 || entry != std::floor(entry) || entry > 0x1p53) {
    throw Error(ErrorCode::kBadParameter,
                "entry must be the index of an alloc entry (memsnap events)");
  }
  return render_allocation_json(
      allocation_at(file, static_cast<uint64_t>(entry), SourceKeyOptions{}));
}

// GET /api/live?file=I&time=T|position=P&source=NAME: the allocations of
// one source live then, largest first (a drill-down row opened).
ordered_json live_of(const HttpRequest& request, const FileAnalysis& file) {
  only_parameters(request, "live", {"time", "position", "source"});
  if (request.has_param("time") == request.has_param("position")) {
    throw Error(ErrorCode::kBadParameter, "give time or position (not both)");
  }
  uint64_t position = 0;
  if (request.has_param("time")) {
    const double seconds = seconds_of(request);
    file.time().require_times(file.path(), "ask by position instead");
    position = file.time().position_at(file.time().clamped(seconds));
  } else {
    position =
        whole_number_of(request, "position", 0, 0, static_cast<double>(file.trace().count()));
  }
  return render_live_of_source_json(
      live_of_source(file, position, request.param("source"), kSearchEntries, SourceKeyOptions{}));
}

// GET /api/search?file=I&q=TEXT: the allocations a search finds.
ordered_json search_of(const HttpRequest& request, const FileAnalysis& file) {
  only_parameters(request, "search", {"q"});
  return render_search_json(
      search_allocations(file, request.param("q"), kSearchEntries, SourceKeyOptions{}));
}

// Runs `answer`; a memsnap Error becomes its status: 400 for a bad request,
// 422 where the file cannot give what was asked (no times, no steps).
template <typename Answer>
HttpResponse answered(Answer&& answer) {
  try {
    return answer();
  } catch (const Error& error) {
    return error_response(error.kind() == Error::Kind::kUsage ? 400 : 422, error.code(),
                          error.what());
  }
}

// The name of /api/report/NAME, where it is one that could name a report.
std::optional<std::string_view> report_name(std::string_view path) {
  constexpr std::string_view kPrefix = "/api/report/";
  constexpr size_t kLongest = 32;
  if (path.rfind(kPrefix, 0) != 0) return std::nullopt;
  const std::string_view name = path.substr(kPrefix.size());
  const bool spelled =
      !name.empty() && name.size() <= kLongest && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || c == '_' || c == '-';
      });
  return spelled ? std::optional(name) : std::nullopt;
}

// The routes of one file's answers: file=I names it, the rest is theirs.
using FileAnswer = ordered_json (*)(const HttpRequest&, const FileAnalysis&);
constexpr std::array<std::pair<std::string_view, FileAnswer>, 8> kFileRoutes = {{
    {"/api/live", live_of},
    {"/api/line", line_of},
    {"/api/layout", layout_of},
    {"/api/segment-timeline", segment_timeline_of},
    {"/api/segments", segments_of},
    {"/api/block", block_of},
    {"/api/allocation", allocation_of},
    {"/api/search", search_of},
}};

}  // namespace

HttpResponse Server::State::report_answer(const HttpRequest& request) const {
  const service::ReportEntry* entry = service::find_report(*report_name(request.path));
  if (entry == nullptr) {
    return error_response(404, ErrorCode::kNotFound,
                          "no such report (GET /api/reports lists them)");
  }
  const size_t a = file_index(request, "file", files.size());
  std::vector<std::pair<std::string, service::Value>> given;
  for (const auto& [name, text] : request.params) {
    if (name == "token" || name == "file" || name == "vs") continue;
    const service::Parameter* parameter = service::find_parameter(*entry, name);
    if (parameter == nullptr) {
      throw Error(ErrorCode::kBadParameter,
                  fmt::format("{} has no parameter '{}' (GET /api/reports lists them)", entry->name,
                              printable(name)));
    }
    given.emplace_back(parameter->id,
                       service::value_of_text(*parameter, text, service::Spelling::kKeyword));
  }
  const service::ReportRequest checked =
      service::request_for(*entry, given, SourceKeyOptions{}, service::Spelling::kKeyword);
  service::Answer answer;
  if (request.has_param("vs")) {
    if (entry->answer_pair == nullptr) {
      throw Error(ErrorCode::kBadParameter,
                  fmt::format("{} reads one file: drop vs=", entry->name));
    }
    const size_t b = file_index(request, "vs", files.size());
    answer = entry->answer_pair(files[a].analysis(), files[b].analysis(), checked,
                                service::Format::kJson);
  } else {
    answer = entry->answer(files[a].analysis(), checked, service::Format::kJson);
  }
  return json_response(200, {{"report", std::move(answer.json)}, {"notes", answer.notes}});
}

HttpResponse Server::State::page_answer(const HttpRequest& request) {
  std::call_once(page_once, [this] {
    try {
      page = build_page();
      page_gzip = gzipped(page);
    } catch (const std::exception& error) {
      page_error = error.what();
    }
  });
  if (!page_error.empty()) return error_response(500, ErrorCode::kInternalError, page_error);
  HttpResponse response;
  response.content_type = kHtml;
  // The page is one file: its script and style are inline, and it asks
  // nothing of any other origin.
  response.headers = {{"Content-Security-Policy",
                       "default-src 'none'; script-src 'unsafe-inline'; style-src "
                       "'unsafe-inline'; img-src data: blob:; connect-src 'self'"},
                      {"Vary", "Accept-Encoding"}};
  if (request.header("Accept-Encoding").find("gzip") != std::string::npos) {
    response.headers.emplace_back("Content-Encoding", "gzip");
    response.body = page_gzip;
  } else {
    response.body = page;
  }
  return response;
}

HttpResponse Server::State::answer(const HttpRequest& request) {
  const std::string& path = request.path;
  if (path == "/") return page_answer(request);
  return answered([&]() -> HttpResponse {
    if (path == "/api/files") {
      only_the_token(request, "files");
      return json_response(200, files_json());
    }
    if (path == "/api/reports") {
      only_the_token(request, "reports");
      return json_response(200, report_table_json());
    }
    if (path == "/api/ranks") {
      only_the_token(request, "ranks");
      return json_response(200, ranks_json());
    }
    if (report_name(path)) return report_answer(request);
    for (const auto& [route, file_answer] : kFileRoutes) {
      if (path == route) {
        const size_t index = file_index(request, "file", files.size());
        return json_response(200, file_answer(request, files[index].analysis()));
      }
    }
    return error_response(404, ErrorCode::kNotFound,
                          "not found (GET /api/reports lists the reports)");
  });
}

Server::Server(std::vector<ServedFile> files, ServeOptions options,
               std::function<std::string()> page)
    : state_(std::make_unique<State>()) {
  if (files.empty()) throw Error(ErrorCode::kBadParameter, "serve needs at least one snapshot");
  check_options(options);
  if (options.token.empty()) options.token = random_token();
  state_->files = std::move(files);
  state_->options = std::move(options);
  state_->build_page = std::move(page);
  State& state = *state_;
  state_->http = std::make_unique<HttpServer>(
      HttpLimits{},
      [&state](const HttpRequest& request) -> std::optional<HttpResponse> {
        std::optional<HttpResponse> refusal = state.admit(request);
        if (refusal) return with_safety_headers(std::move(*refusal));
        return std::nullopt;
      },
      [&state](const HttpRequest& request) { return with_safety_headers(state.answer(request)); });
}

Server::~Server() = default;

std::string Server::bind() {
  State& s = *state_;
  s.port = s.http->bind(s.options.host, s.options.port);
  const std::string host =
      s.options.host.find(':') != std::string::npos ? "[" + s.options.host + "]" : s.options.host;
  return fmt::format("http://{}:{}/?token={}", host, s.port, url_encoded(s.options.token));
}

void Server::run() {
  // The levels and allocation spans (line, layout, replay-to-time) and the
  // segment spans (segment timeline) are built on a thread of their own
  // while the user opens the page, so that the first zoom, or the first look
  // at the segments, answers as fast as the rest (at 10M entries the segment
  // spans took 180 ms on first use). A request that comes first waits for
  // the same call_once; an error here is thrown again to the request that
  // needs the part (call_once tries again after a throw).
  state_->warm_up = std::jthread([&files = state_->files](const std::stop_token& stop) {
    for (const ServedFile& file : files) {
      try {
        if (stop.stop_requested()) return;
        static_cast<void>(file.analysis().levels());
        if (stop.stop_requested()) return;
        static_cast<void>(file.analysis().segment_spans());
      } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): see above
      }
    }
  });
  state_->http->run();
}

bool Server::running() const {
  return state_->http->running();
}

void Server::stop() {
  state_->http->stop();
}

}  // namespace memsnap::serve
