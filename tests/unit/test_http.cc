// The server's transport (serve/http.h) under small limits: what a peer
// without the token can make it hold, and that it cannot starve one who has
// it. Loopback sockets only; every wait is bounded.
#include "serve/http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace memsnap::serve {
namespace {

using std::chrono::milliseconds;

// A server on a thread of its own: admits every request but those whose
// path is /refuse, and answers the path back.
class Running {
 public:
  explicit Running(HttpLimits limits)
      : server_(
            limits,
            [](const HttpRequest& request) -> std::optional<HttpResponse> {
              if (request.path == "/refuse")
                return error_response(401, ErrorCode::kUnauthorized, "no");
              return std::nullopt;
            },
            [this](const HttpRequest& request) {
              answered_.fetch_add(1);
              HttpResponse response;
              response.content_type = "text/plain";
              response.body = request.path + "|" + request.param("q");
              return response;
            }) {
    port_ = server_.bind("127.0.0.1", 0);
    thread_ = std::thread([this] { server_.run(); });
    for (int waited = 0; !server_.running() && waited < 5000; ++waited) {
      std::this_thread::sleep_for(milliseconds(1));
    }
  }
  ~Running() {
    server_.stop();
    thread_.join();
  }
  Running(const Running&) = delete;
  Running& operator=(const Running&) = delete;

  [[nodiscard]] uint16_t port() const { return port_; }
  [[nodiscard]] HttpCounters counters() const { return server_.counters(); }
  [[nodiscard]] int answered() const { return answered_.load(); }

 private:
  std::atomic<int> answered_{0};
  HttpServer server_;
  uint16_t port_ = 0;
  std::thread thread_;
};

// A loopback socket connected to `port`.
class Peer {
 public:
  explicit Peer(uint16_t port) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    // A send the server never takes fails after this, rather than hang.
    const timeval most{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &most, sizeof most);
  }
  ~Peer() { close(fd_); }
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  [[nodiscard]] bool connected() const { return connected_; }
  // Whether all of `bytes` went out (false once the server closed).
  bool send_all(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t put = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (put <= 0) return false;
      sent += static_cast<size_t>(put);
    }
    return true;
  }
  // What arrives within `wait`, until the peer closes or `enough` bytes
  // came; "" when nothing came.
  std::string receive(milliseconds wait, size_t enough = 1 << 16) {
    std::string got;
    const auto until = std::chrono::steady_clock::now() + wait;
    while (got.size() < enough) {
      const auto left =
          std::chrono::duration_cast<milliseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd ready{fd_, POLLIN, 0};
      if (poll(&ready, 1, static_cast<int>(left.count())) <= 0) break;
      char buffer[4096];
      const ssize_t read = recv(fd_, buffer, sizeof buffer, 0);
      if (read <= 0) {
        closed_ = true;
        break;
      }
      got.append(buffer, static_cast<size_t>(read));
    }
    return got;
  }
  [[nodiscard]] bool closed() const { return closed_; }

 private:
  int fd_;
  bool connected_ = false;
  bool closed_ = false;
};

std::string get(const std::string& target, const std::string& extra = "") {
  return "GET " + target + " HTTP/1.1\r\nHost: x\r\n" + extra + "\r\n";
}

HttpLimits small_limits() {
  HttpLimits limits;
  limits.max_request_line = 1024;
  limits.max_head_bytes = 4096;
  limits.max_header_count = 8;
  limits.head_deadline = milliseconds(400);
  limits.max_connections_per_peer = 8;
  limits.max_connections = 16;
  limits.workers = 2;
  return limits;
}

TEST(HttpTarget, PercentDecodedPlusIsASpaceInTheQueryOnly) {
  const auto split = split_target("/a%2Fb+c?x=1+2&y=%26%3D&&z&x=3");
  ASSERT_TRUE(split);
  EXPECT_EQ(split->first, "/a/b+c");
  const auto& params = split->second;
  EXPECT_EQ(params.count("x"), 2U);
  EXPECT_EQ(params.find("x")->second, "1 2");
  EXPECT_EQ(params.find("y")->second, "&=");
  EXPECT_EQ(params.find("z")->second, "");
  for (const char* bad : {"/?x=%zz", "/?x=%4", "/?x=%", "/%g0", "/?%=1"}) {
    EXPECT_FALSE(split_target(bad)) << bad;
  }
}

TEST(HttpTransport, AnswersKeptAliveAndPipelinedRequests) {
  Running server(small_limits());
  Peer peer(server.port());
  ASSERT_TRUE(peer.connected());
  ASSERT_TRUE(peer.send_all(get("/one?q=a+b") + get("/two")));
  std::string got;
  for (int i = 0; i < 20 && got.find("/two|") == std::string::npos; ++i) {
    got += peer.receive(milliseconds(100));
  }
  EXPECT_NE(got.find("/one|a b"), std::string::npos) << got;
  EXPECT_NE(got.find("/two|"), std::string::npos) << got;
  EXPECT_FALSE(peer.closed());
  ASSERT_TRUE(peer.send_all("HEAD /three HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string head = peer.receive(milliseconds(500));
  EXPECT_NE(head.find("Content-Length: 7"), std::string::npos) << head;
  EXPECT_EQ(head.find("/three|"), std::string::npos) << "a HEAD answer has no body";
}

TEST(HttpTransport, ARefusalIsSentAndTheConnectionClosed) {
  Running server(small_limits());
  Peer peer(server.port());
  ASSERT_TRUE(peer.send_all(get("/refuse")));
  const std::string got = peer.receive(milliseconds(2000));
  EXPECT_EQ(got.rfind("HTTP/1.1 401", 0), 0U) << got;
  EXPECT_NE(got.find(R"({"error":"no","code":"unauthorized","status":401})"), std::string::npos)
      << got;
  EXPECT_TRUE(peer.closed());
  EXPECT_EQ(server.answered(), 0);
}

TEST(HttpTransport, APortInUseIsCannotListen) {
  Running server(small_limits());
  HttpServer second(
      small_limits(), [](const HttpRequest&) { return std::optional<HttpResponse>(); },
      [](const HttpRequest&) { return HttpResponse{}; });
  try {
    second.bind("127.0.0.1", server.port());
    ADD_FAILURE() << "bound a port in use";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kCannotListen) << error.what();
    EXPECT_EQ(error.kind(), ErrorKind::kUsage);
  }
}

TEST(HttpTransport, ALongRequestLineIs414BeforeItsEnd) {
  Running server(small_limits());
  Peer peer(server.port());
  // No newline ever comes: the answer must not wait for one.
  peer.send_all("GET /" + std::string(2000, 'a'));
  const std::string got = peer.receive(milliseconds(2000));
  EXPECT_EQ(got.rfind("HTTP/1.1 414", 0), 0U) << got.substr(0, 200);
  EXPECT_NE(got.find(R"("code":"bad_request")"), std::string::npos) << got.substr(0, 200);
  EXPECT_NE(got.find("longer than 1024 bytes"), std::string::npos);  // the limit it passed
  // The server takes at most a bounded drain more: sending 16 MiB (more
  // than loopback's socket buffers hold) fails once it has closed.
  bool refused = false;
  for (int i = 0; i < 4096 && !refused; ++i) refused = !peer.send_all(std::string(4096, 'a'));
  EXPECT_TRUE(refused);
}

TEST(HttpTransport, TooLongOrTooManyHeadersAre431) {
  Running server(small_limits());
  {
    Peer peer(server.port());
    std::string headers;
    for (int i = 0; i < 9; ++i) headers += "X-" + std::to_string(i) + ": y\r\n";
    peer.send_all(get("/", headers));
    const std::string got = peer.receive(milliseconds(2000));
    EXPECT_EQ(got.rfind("HTTP/1.1 431", 0), 0U) << got;
  }
  {
    Peer peer(server.port());
    peer.send_all("GET / HTTP/1.1\r\n");
    bool refused = false;
    for (int i = 0; i < 64 && !refused; ++i)
      refused = !peer.send_all("X: " + std::string(500, 'y') + "\r\n");
    const std::string got = peer.receive(milliseconds(2000));
    EXPECT_EQ(got.rfind("HTTP/1.1 431", 0), 0U) << got.substr(0, 200);
  }
  {
    Peer peer(server.port());
    peer.send_all("GET /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
    EXPECT_EQ(peer.receive(milliseconds(2000)).rfind("HTTP/1.1 413", 0), 0U);
  }
  EXPECT_EQ(server.answered(), 0);
}

TEST(HttpTransport, AHeadThatDoesNotArriveInTimeIsClosed) {
  Running server(small_limits());
  Peer slow(server.port());
  Peer idle(server.port());
  // A byte every 100 ms: each read is on time, the head as a whole is not.
  std::string got;
  const auto start = std::chrono::steady_clock::now();
  for (const char c : std::string("GET /slowly HTTP/1.1\r\nHost: x\r\n")) {
    if (!slow.send_all(std::string(1, c))) break;
    got += slow.receive(milliseconds(100));
    if (!got.empty()) break;
  }
  got += slow.receive(milliseconds(1000));
  EXPECT_EQ(got.rfind("HTTP/1.1 408", 0), 0U) << got;
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2000));
  EXPECT_EQ(idle.receive(milliseconds(1000)), "");
  EXPECT_TRUE(idle.closed());
  EXPECT_GE(server.counters().head_timeouts, 2U);
}

TEST(HttpTransport, IdlePeersBeyondTheLimitsDoNotStarveARequest) {
  Running server(small_limits());
  std::vector<std::unique_ptr<Peer>> idle;
  for (int i = 0; i < 40; ++i) {
    idle.push_back(std::make_unique<Peer>(server.port()));
    idle.back()->send_all("GET /never");
  }
  for (int round = 0; round < 5; ++round) {
    Peer holder(server.port());
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(holder.send_all(get("/mine")));
    const std::string got = holder.receive(milliseconds(1000), 12);
    EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0U) << round << ": " << got;
    EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1000));
  }
  const HttpCounters counters = server.counters();
  EXPECT_LE(counters.open, 16U);
  EXPECT_GE(counters.evicted, 40U - 8U);
}

}  // namespace
}  // namespace memsnap::serve
