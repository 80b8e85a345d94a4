// `memsnap serve`: a local HTTP server over the files it was started with.
// It answers the report table's entries (service/report_table.h) as routes,
// each parameter spelled as Python spells it (`?time=1.5&top=20`), and serves
// the page of `memsnap plot` for those files.
//
// Because it listens on a socket: it binds 127.0.0.1 unless told otherwise
// (and then only with a token the user chose), every request needs the token
// (in `?token=` or `Authorization: Bearer`), a file is named by its index in
// the list it was started with (never a path from a request), only GET and
// HEAD are answered, requests and their parameters are bounded, and the Host
// header must name the loopback address the server is bound to (a web page
// elsewhere cannot rebind its own name to it and read the answers).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/core/file_analysis.h"
#include "service/session.h"

namespace memsnap::serve {

struct ServeOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: any free port
  // Empty: a random one (192 bits). Required to bind anything but loopback.
  std::string token;
};

// One file the server answers for: a session that outlives the server, and
// the device asked for (nullopt: the one the file's analysis chooses).
struct ServedFile {
  std::string path;
  std::string label;
  const service::Session* session = nullptr;
  std::optional<int> device;
  [[nodiscard]] const FileAnalysis& analysis() const { return session->analysis(device); }
};

// Whether this build has the server (it needs Boost's headers, Asio and Beast, at build time).
bool server_available();
// Throws a usage Error saying what a build without the server lacks.
void require_server();
// Throws a usage Error when the options may not be served: a host other
// than loopback without a token of the user's own.
void check_options(const ServeOptions& options);

// Limits on what a request may carry.
constexpr size_t kMaxParameters = 16;
constexpr size_t kMaxParameterBytes = 256;

class Server {
 public:
  // `page`: the HTML of the page, built on the first request for it.
  Server(std::vector<ServedFile> files, ServeOptions options, std::function<std::string()> page);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the socket; returns the URL to open (the token in it). Throws a
  // usage Error when the host may not be bound or the port is taken.
  std::string bind();
  // Answers requests until stop() (from another thread or a signal handler's
  // thread).
  void run();
  // Whether run() is answering requests (stop() before that point is lost:
  // a caller that runs the server on a thread waits for it first).
  [[nodiscard]] bool running() const;
  void stop();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace memsnap::serve
