#include "serve/http.h"

#include <sys/resource.h>

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/http.hpp>
#include <list>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "memsnap/error.h"
#include "report/format.h"

namespace memsnap::serve {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

// What a closing connection reads and drops, at most, so that the answer it
// was sent is not lost to a reset (a peer still sending when the socket
// closes gets an RST, which can discard the answer before it is read).
constexpr size_t kLingerBytes = size_t{64} << 10;
constexpr std::chrono::milliseconds kLingerTime{2'000};
// A failed accept (out of descriptors) waits this long before the next.
constexpr std::chrono::milliseconds kAcceptPause{50};

std::optional<int> hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return std::nullopt;
}

// `text` percent-decoded ('+' a space where `plus_is_space`); nullopt for a
// '%' without two hex digits.
std::optional<std::string> percent_decoded(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      const std::optional<int> high = hex_digit(text[i + 1]);
      const std::optional<int> low = hex_digit(text[i + 2]);
      if (!high || !low) return std::nullopt;
      out += static_cast<char>(*high * 16 + *low);
      i += 2;
    } else {
      out += plus_is_space && text[i] == '+' ? ' ' : text[i];
    }
  }
  return out;
}

// Beast's string_view (Boost's own before 1.77) as the standard one.
template <typename View>
std::string_view view(const View& text) {
  return {text.data(), text.size()};
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// The connections the process may open: the soft limit on descriptors is
// raised to the hard one, and the transport keeps 64 for everything else.
size_t descriptor_room() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  constexpr rlim_t kReserved = 64;
  return limit.rlim_cur > kReserved * 2 ? static_cast<size_t>(limit.rlim_cur - kReserved)
                                        : static_cast<size_t>(limit.rlim_cur / 2);
}

}  // namespace

bool HttpRequest::has_param(std::string_view name) const {
  return params.find(name) != params.end();
}

std::string HttpRequest::param(std::string_view name) const {
  const auto found = params.find(name);
  return found == params.end() ? std::string() : found->second;
}

std::string HttpRequest::header(std::string_view name) const {
  const std::string wanted = lower(name);
  for (const auto& [key, value] : headers) {
    if (key == wanted) return value;
  }
  return {};
}

std::string_view status_words(int status) {
  const auto words = http::obsolete_reason(static_cast<http::status>(status));
  return {words.data(), words.size()};
}

HttpResponse error_response(int status, ErrorCode code, std::string_view message) {
  const nlohmann::ordered_json body = {
      {"error", printable(message)}, {"code", error_code_name(code)}, {"status", status}};
  HttpResponse response;
  response.status = status;
  response.content_type = "application/json; charset=utf-8";
  response.body = body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  return response;
}

std::optional<std::pair<std::string, HttpParams>> split_target(std::string_view target) {
  const size_t query_at = target.find('?');
  std::optional<std::string> path = percent_decoded(target.substr(0, query_at), false);
  if (!path) return std::nullopt;
  HttpParams params;
  std::string_view query = query_at == std::string_view::npos ? "" : target.substr(query_at + 1);
  while (!query.empty()) {
    const size_t end = std::min(query.find('&'), query.size());
    const std::string_view pair = query.substr(0, end);
    query.remove_prefix(std::min(end + 1, query.size()));
    if (pair.empty()) continue;
    const size_t equals = pair.find('=');
    std::optional<std::string> name = percent_decoded(pair.substr(0, equals), true);
    std::optional<std::string> value =
        percent_decoded(equals == std::string_view::npos ? "" : pair.substr(equals + 1), true);
    if (!name || !value) return std::nullopt;
    params.emplace(std::move(*name), std::move(*value));
  }
  return std::pair{std::move(*path), std::move(params)};
}

struct HttpServer::Loop {
  struct Connection;
  using ConnectionPtr = std::shared_ptr<Connection>;

  HttpLimits limits;
  Admit admit;
  Answer answer;
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_pause{io};
  // Made in run(), after the caller has set the threads' signal mask.
  std::optional<asio::thread_pool> workers;
  std::atomic<bool> is_running{false};
  bool stopping = false;

  // Everything below is touched on the loop's thread only.
  std::unordered_set<Connection*> open;
  // The connections that wait for a request head, longest first (closing
  // ones at the front): whom a new connection beyond a limit displaces.
  std::list<Connection*> waiting;
  std::unordered_map<std::string, size_t> per_peer;
  mutable std::mutex counters_mutex;
  HttpCounters counters;

  void accept();
  bool make_room(const std::string& peer);
  void shut();
  void count(size_t HttpCounters::*counter) {
    const std::lock_guard lock(counters_mutex);
    ++(counters.*counter);
  }
  void publish_open() {
    const std::lock_guard lock(counters_mutex);
    counters.open = open.size();
  }
};

// One peer's connection: it waits for a request head (bounded in size and
// time), is answered, writes the answer, and waits again or closes.
struct HttpServer::Loop::Connection : std::enable_shared_from_this<Connection> {
  enum class Phase { kWaiting, kAnswering, kWriting, kLingering, kClosed };

  Connection(Loop& owner, tcp::socket accepted, std::string address)
      : loop(owner), socket(std::move(accepted)), timer(owner.io), peer(std::move(address)) {}

  Loop& loop;
  tcp::socket socket;
  asio::steady_timer timer;
  std::string peer;
  Phase phase = Phase::kWaiting;
  std::list<Connection*>::iterator waiting_at;
  // Bumped at every change of phase: a timer armed in an earlier phase does
  // nothing when it fires.
  uint64_t epoch = 0;
  // The bytes received and not yet taken by the parser, and how many of
  // this request's head it has taken.
  std::string head;
  size_t head_taken = 0;
  size_t line_scanned = 0;  // of `head`, the bytes known to hold no '\n'
  bool line_ended = false;
  std::optional<http::request_parser<http::empty_body>> parser;
  std::array<char, 4096> chunk{};
  size_t lingered = 0;

  void wait_for_request();
  void read_more();
  void take(size_t bytes);
  void parse();
  void dispatch(HttpRequest request, bool keep_alive, bool head_only);
  void write(HttpResponse response, bool keep_alive, bool head_only);
  void refuse(int status, std::string_view message);
  void linger();
  void close();
  void arm(std::chrono::milliseconds after, void (*expired)(Connection&));
  void leave_waiting();
};

void HttpServer::Loop::Connection::arm(std::chrono::milliseconds after,
                                       void (*expired)(Connection&)) {
  timer.expires_after(after);
  timer.async_wait(
      [self = shared_from_this(), at = epoch, expired](boost::system::error_code error) {
        if (!error && self->epoch == at && self->phase != Phase::kClosed) expired(*self);
      });
}

void HttpServer::Loop::Connection::leave_waiting() {
  if (phase == Phase::kWaiting || phase == Phase::kLingering) loop.waiting.erase(waiting_at);
}

void HttpServer::Loop::Connection::wait_for_request() {
  ++epoch;
  phase = Phase::kWaiting;
  waiting_at = loop.waiting.insert(loop.waiting.end(), this);
  parser.emplace();
  parser->header_limit(static_cast<std::uint32_t>(loop.limits.max_head_bytes));
  line_scanned = 0;
  line_ended = false;
  head_taken = 0;
  arm(loop.limits.head_deadline, [](Connection& self) {
    self.loop.count(&HttpCounters::head_timeouts);
    if (self.head.empty()) {
      self.close();  // an idle connection's time is up
    } else {
      self.refuse(408, "the request head did not arrive in time");
    }
  });
  if (head.empty()) {
    read_more();
  } else {
    parse();  // a request sent behind the last one
  }
}

void HttpServer::Loop::Connection::read_more() {
  socket.async_read_some(asio::buffer(chunk), [self = shared_from_this(), at = epoch](
                                                  boost::system::error_code error, size_t bytes) {
    if (self->epoch != at || self->phase != Phase::kWaiting) return;
    if (error) {
      self->close();
      return;
    }
    self->take(bytes);
  });
}

void HttpServer::Loop::Connection::take(size_t bytes) {
  head.append(chunk.data(), bytes);
  // The request line's end is looked for in the new bytes only (the parser
  // takes nothing before the line is whole).
  if (!line_ended) {
    line_ended = head.find('\n', line_scanned) != std::string::npos;
    line_scanned = head.size();
    if (!line_ended && head.size() > loop.limits.max_request_line) {
      refuse(414,
             fmt::format("the request line is longer than {} bytes", loop.limits.max_request_line));
      return;
    }
  }
  parse();
}

void HttpServer::Loop::Connection::parse() {
  boost::system::error_code error;
  const size_t used = parser->put(asio::buffer(head), error);
  // The parser may take the request line and wait for the headers: what it
  // took is gone from `head`, and still counts towards the head's size.
  head.erase(0, used);
  head_taken += used;
  if (error == http::error::need_more) {
    if (head_taken + head.size() > loop.limits.max_head_bytes) {
      refuse(431,
             fmt::format("the request head is longer than {} bytes", loop.limits.max_head_bytes));
    } else {
      read_more();
    }
    return;
  }
  if (error == http::error::header_limit) {
    refuse(431,
           fmt::format("the request head is longer than {} bytes", loop.limits.max_head_bytes));
    return;
  }
  if (error == http::error::unexpected_body || error == http::error::body_limit) {
    refuse(413, "only GET and HEAD are answered, with no body");
    return;
  }
  if (error) {
    refuse(400, fmt::format("a malformed request ({})", error.message()));
    return;
  }
  if (!parser->is_done()) {
    refuse(413, "only GET and HEAD are answered, with no body");
    return;
  }
  const http::request<http::empty_body>& message = parser->get();
  const auto fields = static_cast<size_t>(std::distance(message.begin(), message.end()));
  if (fields > loop.limits.max_header_count) {
    refuse(431, fmt::format("{} headers; at most {}", fields, loop.limits.max_header_count));
    return;
  }
  auto target = split_target(view(message.target()));
  if (!target) {
    refuse(400, "a malformed percent escape in the request's address");
    return;
  }
  HttpRequest request;
  request.method = std::string(view(message.method_string()));
  request.path = std::move(target->first);
  request.params = std::move(target->second);
  for (const auto& field : message) {
    request.headers.emplace_back(lower(view(field.name_string())),
                                 std::string(view(field.value())));
  }
  dispatch(std::move(request), message.keep_alive(), message.method() == http::verb::head);
}

void HttpServer::Loop::Connection::dispatch(HttpRequest request, bool keep_alive, bool head_only) {
  leave_waiting();
  ++epoch;
  phase = Phase::kAnswering;
  timer.cancel();
  std::optional<HttpResponse> refusal;
  try {
    refusal = loop.admit(request);
  } catch (const std::exception&) {
    // Nothing thrown may leave the loop: it would stop every connection.
    refusal = error_response(500, ErrorCode::kInternalError, "internal error");
  }
  if (refusal) {
    // A peer refused once is not kept: it opens a new connection to try
    // again, and that one counts against the limits.
    refusal->close = true;
    write(std::move(*refusal), keep_alive, head_only);
    return;
  }
  asio::post(*loop.workers, [self = shared_from_this(), request = std::move(request), keep_alive,
                             head_only]() mutable {
    HttpResponse response;
    try {
      response = self->loop.answer(request);
    } catch (const std::exception&) {
      response = error_response(500, ErrorCode::kInternalError, "internal error");
    }
    asio::post(self->loop.io,
               [self, response = std::move(response), keep_alive, head_only]() mutable {
                 if (self->phase == Phase::kAnswering)
                   self->write(std::move(response), keep_alive, head_only);
               });
  });
}

void HttpServer::Loop::Connection::write(HttpResponse response, bool keep_alive, bool head_only) {
  ++epoch;
  phase = Phase::kWriting;
  const bool stays = keep_alive && !response.close;
  struct Sending {
    http::response<http::string_body> message;
    std::optional<http::response_serializer<http::string_body>> serializer;
  };
  auto sending = std::make_shared<Sending>();
  http::response<http::string_body>& message = sending->message;
  message.result(static_cast<unsigned>(response.status));
  message.version(11);
  if (!response.content_type.empty()) message.set(http::field::content_type, response.content_type);
  for (const auto& [name, value] : response.headers) message.set(name, value);
  message.body() = std::move(response.body);
  message.prepare_payload();
  message.keep_alive(stays);
  sending->serializer.emplace(message);
  arm(loop.limits.write_deadline, [](Connection& self) { self.close(); });
  auto done = [self = shared_from_this(), sending, stays](boost::system::error_code error, size_t) {
    if (self->phase != Phase::kWriting) return;
    if (error) {
      self->close();
    } else if (stays) {
      self->wait_for_request();
    } else {
      self->linger();
    }
  };
  if (head_only) {
    http::async_write_header(socket, *sending->serializer, std::move(done));
  } else {
    http::async_write(socket, *sending->serializer, std::move(done));
  }
}

void HttpServer::Loop::Connection::refuse(int status, std::string_view message) {
  leave_waiting();
  ++epoch;
  phase = Phase::kAnswering;
  head.clear();
  HttpResponse response = error_response(status, ErrorCode::kBadRequest, message);
  response.close = true;
  write(std::move(response), false, false);
}

void HttpServer::Loop::Connection::linger() {
  boost::system::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_send, ignored);
  ++epoch;
  phase = Phase::kLingering;
  head.clear();
  head.shrink_to_fit();
  waiting_at = loop.waiting.insert(loop.waiting.begin(), this);
  arm(kLingerTime, [](Connection& self) { self.close(); });
  struct Drain {
    static void next(const std::shared_ptr<Connection>& self) {
      self->socket.async_read_some(
          asio::buffer(self->chunk),
          [self, at = self->epoch](boost::system::error_code error, size_t bytes) {
            if (self->epoch != at || self->phase != Phase::kLingering) return;
            self->lingered += bytes;
            if (error || self->lingered >= kLingerBytes) {
              self->close();
            } else {
              next(self);
            }
          });
    }
  };
  Drain::next(shared_from_this());
}

void HttpServer::Loop::Connection::close() {
  if (phase == Phase::kClosed) return;
  leave_waiting();
  ++epoch;
  phase = Phase::kClosed;
  boost::system::error_code ignored;
  timer.cancel();
  socket.close(ignored);
  head.clear();
  head.shrink_to_fit();
  loop.open.erase(this);
  if (auto found = loop.per_peer.find(peer); found != loop.per_peer.end() && --found->second == 0) {
    loop.per_peer.erase(found);
  }
  loop.publish_open();
}

// Room for one more connection from `peer`: the peer's (or, at the total
// limit, anyone's) connection that has waited longest for a request is
// closed. False where every connection in the way is being answered.
bool HttpServer::Loop::make_room(const std::string& peer) {
  auto displace = [this](auto&& matches) {
    const auto found = std::find_if(waiting.begin(), waiting.end(), matches);
    if (found == waiting.end()) return false;
    (*found)->close();
    count(&HttpCounters::evicted);
    return true;
  };
  const auto from_peer = per_peer.find(peer);
  if (from_peer != per_peer.end() && from_peer->second >= limits.max_connections_per_peer &&
      !displace([&peer](const Connection* c) { return c->peer == peer; })) {
    return false;
  }
  if (open.size() >= limits.max_connections && !displace([](const Connection*) { return true; })) {
    return false;
  }
  return true;
}

void HttpServer::Loop::accept() {
  acceptor.async_accept([this](boost::system::error_code error, tcp::socket socket) {
    if (stopping) return;
    if (error) {
      // Out of descriptors, or the peer gave up: pause rather than spin.
      accept_pause.expires_after(kAcceptPause);
      accept_pause.async_wait([this](boost::system::error_code) {
        if (!stopping) accept();
      });
      return;
    }
    boost::system::error_code ignored;
    const tcp::endpoint remote = socket.remote_endpoint(ignored);
    std::string peer = remote.address().to_string(ignored);
    if (!make_room(peer)) {
      count(&HttpCounters::refused);
      socket.close(ignored);
    } else {
      socket.set_option(tcp::no_delay(true), ignored);
      auto connection = std::make_shared<Connection>(*this, std::move(socket), peer);
      open.insert(connection.get());
      ++per_peer[peer];
      publish_open();
      connection->wait_for_request();
    }
    accept();
  });
}

void HttpServer::Loop::shut() {
  stopping = true;
  boost::system::error_code ignored;
  acceptor.close(ignored);
  accept_pause.cancel();
  const std::vector<Connection*> all(open.begin(), open.end());
  for (Connection* connection : all) connection->close();
  io.stop();
}

HttpServer::HttpServer(HttpLimits limits, Admit admit, Answer answer)
    : loop_(std::make_unique<Loop>()) {
  if (limits.workers == 0) {
    limits.workers = std::max<size_t>(2, std::thread::hardware_concurrency());
  }
  const size_t room = descriptor_room();
  if (room > 0) limits.max_connections = std::min(limits.max_connections, room);
  limits.max_connections_per_peer =
      std::min(limits.max_connections_per_peer, limits.max_connections);
  loop_->limits = limits;
  loop_->admit = std::move(admit);
  loop_->answer = std::move(answer);
}

HttpServer::~HttpServer() {
  if (loop_->workers) loop_->workers->join();
}

uint16_t HttpServer::bind(const std::string& host, uint16_t port) {
  Loop& loop = *loop_;
  boost::system::error_code error;
  tcp::resolver resolver(loop.io);
  const auto found = resolver.resolve(
      host, std::to_string(port), tcp::resolver::numeric_service | tcp::resolver::passive, error);
  if (!error && !found.empty()) {
    const tcp::endpoint endpoint = found.begin()->endpoint();
    loop.acceptor.open(endpoint.protocol(), error);
    // SO_REUSEADDR alone: a restart may take the port back from TIME_WAIT,
    // but no second process can share a port in use (SO_REUSEPORT would).
    if (!error) loop.acceptor.set_option(tcp::acceptor::reuse_address(true), error);
    if (!error) loop.acceptor.bind(endpoint, error);
    if (!error) loop.acceptor.listen(asio::socket_base::max_listen_connections, error);
  }
  if (error || found.empty()) {
    throw Error(ErrorCode::kCannotListen,
                fmt::format("cannot listen on {} port {} (in use, or not this machine's)",
                            printable(host), port));
  }
  return loop.acceptor.local_endpoint().port();
}

void HttpServer::run() {
  Loop& loop = *loop_;
  loop.workers.emplace(loop.limits.workers);
  loop.accept();
  loop.is_running.store(true);
  loop.io.run();
  loop.is_running.store(false);
  loop.workers->join();
}

bool HttpServer::running() const {
  return loop_->is_running.load();
}

void HttpServer::stop() {
  asio::post(loop_->io, [loop = loop_.get()] { loop->shut(); });
}

HttpCounters HttpServer::counters() const {
  const std::lock_guard lock(loop_->counters_mutex);
  return loop_->counters;
}

}  // namespace memsnap::serve
