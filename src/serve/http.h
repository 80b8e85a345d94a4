// The HTTP transport under `memsnap serve`: requests in, answers out, and
// every bound a peer without the token meets before the server's own checks
// (serve/server.h) look at what it sent.
//
// Why a transport of our own, over Boost.Beast's parser and Asio's event
// loop, and not a server library's pool: the server runs where the GPUs are
// (a login node, a shared machine) and any local user's process can reach
// loopback. A pool of blocking workers is held by whoever opens a handful
// of silent sockets, and a library that buffers a request line until its
// newline can be fed a gigabyte. Here one thread reads every connection's
// head as it arrives, bounded in size, in header count and in time, and only
// a request the server admits is answered on the worker pool; whoever holds
// the token is answered while hundreds of idle or slow peers are open.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "memsnap/error.h"

namespace memsnap::serve {

// What a peer may send and hold. The defaults are what `memsnap serve` uses
// (docs/safety.md states them).
struct HttpLimits {
  // The request line: a longer one is answered 414 as soon as that many
  // bytes have come without its end.
  size_t max_request_line = size_t{8} << 10;
  // The whole head, request line and headers: longer is answered 431.
  size_t max_head_bytes = size_t{16} << 10;
  size_t max_header_count = 64;
  // From the moment a connection waits for a request until its head is
  // complete (an idle kept-alive connection included): then it is closed.
  std::chrono::milliseconds head_deadline{10'000};
  // For an answer to be taken by the peer; then the connection is closed.
  std::chrono::milliseconds write_deadline{60'000};
  // Open connections, from one peer address and in all. A new connection
  // beyond either closes the peer's (or anyone's) connection that has waited
  // longest for its request head; where none waits, it is refused.
  size_t max_connections_per_peer = 256;
  size_t max_connections = 1024;
  // Threads that answer admitted requests (0: one per core, at least 2).
  size_t workers = 0;
};

// Query parameters by name, found by any string (std::less<>).
using HttpParams = std::multimap<std::string, std::string, std::less<>>;

// A request whose head is complete and well-formed: the target split into
// its path and its query parameters, percent-decoded ('+' is a space, as
// a form and URLSearchParams write it).
struct HttpRequest {
  std::string method;
  std::string path;
  HttpParams params;
  // Header names in lower case, in the order sent.
  std::vector<std::pair<std::string, std::string>> headers;

  [[nodiscard]] bool has_param(std::string_view name) const;
  // The first value of `name`; empty when absent.
  [[nodiscard]] std::string param(std::string_view name) const;
  // The first value of the header `name` (any case); empty when absent.
  [[nodiscard]] std::string header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // Close the connection after this answer (every refusal does).
  bool close = false;
};

// An answer of `status` with a JSON body {"error": message, "code": the
// code's stable spelling, "status": N}: every refusal, the transport's and
// the server's.
HttpResponse error_response(int status, ErrorCode code, std::string_view message);
// The reason phrase of an HTTP status ("Request-URI Too Long" for 414).
std::string_view status_words(int status);

// How many connections the transport holds now, and what it has refused or
// closed since it started (tests read them).
struct HttpCounters {
  size_t open = 0;
  size_t evicted = 0;
  size_t refused = 0;
  size_t head_timeouts = 0;
};

class HttpServer {
 public:
  // Runs on the event loop's thread for every complete head: an answer here
  // (a refusal) is sent at once and the connection closed after it;
  // nothing sends the request on to `answer`.
  // It must be quick and must not block.
  using Admit = std::function<std::optional<HttpResponse>(const HttpRequest&)>;
  // Runs on a worker for every admitted request.
  using Answer = std::function<HttpResponse(const HttpRequest&)>;

  HttpServer(HttpLimits limits, Admit admit, Answer answer);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds `host` (an address or a name that resolves to one) at `port` (0:
  // any free port); returns the port bound. Throws a usage Error.
  uint16_t bind(const std::string& host, uint16_t port);
  // Answers until stop(); returns once every worker is done.
  void run();
  [[nodiscard]] bool running() const;
  // From any thread.
  void stop();
  [[nodiscard]] HttpCounters counters() const;

 private:
  struct Loop;
  std::unique_ptr<Loop> loop_;
};

// The target of a request split into path and parameters; nullopt where a
// percent escape is malformed.
std::optional<std::pair<std::string, HttpParams>> split_target(std::string_view target);

}  // namespace memsnap::serve
