// The server where the build had no Boost headers (MEMSNAP_SERVE=OFF): the
// command exists and says what it needs.
#include "memsnap/error.h"
#include "serve/server.h"

namespace memsnap::serve {

bool server_available() {
  return false;
}

void require_server() {
  throw Error(ErrorCode::kUnavailable,
              "this memsnap was built without the server (MEMSNAP_SERVE=OFF: it needs Boost's "
              "headers, Debian's libboost-dev); memsnap plot writes the page as a file");
}

void check_options(const ServeOptions& /*options*/) {
  require_server();
}

struct Server::State {};

Server::Server(std::vector<ServedFile> /*files*/, ServeOptions /*options*/,
               std::function<std::string()> /*page*/) {
  require_server();
}

Server::~Server() = default;

std::string Server::bind() {
  return {};
}

void Server::run() {}

bool Server::running() const {
  return false;
}

void Server::stop() {}

}  // namespace memsnap::serve
