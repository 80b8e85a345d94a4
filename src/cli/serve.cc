// memsnap serve FILE|DIR...: the page and the reports of these files over
// HTTP on this machine (serve/server.h), until Ctrl-C.
#include <pthread.h>
#include <time.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>

#include "analysis/reports/timeline.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "memsnap/error.h"
#include "report/html_plot.h"
#include "runs/multi_file.h"
#include "serve/server.h"

namespace memsnap::cli {
namespace {

struct ServeFlags {
  std::vector<std::string> files;
  serve::ServeOptions server;
  CommonOptions common;
};

// The page of `memsnap plot` for every file, built when first asked for;
// without embedded allocations (max_entries 0): served, the allocation view
// asks the server for each window.
std::function<std::string()> page_of(const std::vector<serve::ServedFile>& served,
                                     const CommonOptions& common) {
  return [&served, &common] {
    if (!html_plot_available()) {
      throw Error(ErrorCode::kUnavailable,
                  "this memsnap was built without the HTML page (MEMSNAP_HTML_PLOT=OFF)");
    }
    constexpr double kPrecisionMs = 1.0;
    std::vector<RunTimeline> runs;
    for (size_t i = 0; i < served.size(); ++i) {
      runs.push_back(plot_run(served[i].analysis(), served[i].label, kPrecisionMs, common.keys,
                              kDefaultMaxLifetimes, true, PagePlace{i, served.size(), 0}));
    }
    return render_plot_html(runs, kPrecisionMs);
  };
}

// SIGINT and SIGTERM, from the command's first step: they are blocked on
// this thread before any other starts, so that every thread inherits the
// mask (the loaders, an analysis' walk that outlives the load, the server's
// workers), and one thread waits for them, a fifth of a second at a time.
// Before the server answers, a signal ends the process as it would have;
// after, it stops the server and the command ends cleanly (exit 0). Without
// the mask from the start, a thread made while loading took the signal
// with its default action, and a Ctrl-C right after the URL killed the
// process.
class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&signals_);
    sigaddset(&signals_, SIGINT);
    sigaddset(&signals_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
    waiter_ = std::thread([this] { wait(); });
  }
  ~StopSignals() {
    done_.store(true);
    waiter_.join();
    pthread_sigmask(SIG_UNBLOCK, &signals_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // While the returned object lives, a signal stops `server` (before it runs
  // too: it then stops as soon as it starts). Made after the server, it
  // goes before it.
  class Stopping {
   public:
    explicit Stopping(StopSignals& owner) : owner_(owner) {}
    ~Stopping() { owner_.set_server(nullptr); }
    Stopping(const Stopping&) = delete;
    Stopping& operator=(const Stopping&) = delete;

   private:
    StopSignals& owner_;
  };
  [[nodiscard]] Stopping stop_with(serve::Server& server) {
    set_server(&server);
    return Stopping(*this);
  }

 private:
  void set_server(serve::Server* server) {
    const std::lock_guard lock(mutex_);
    server_ = server;
  }

  void wait() {
    const timespec tick{0, 200'000'000};
    while (!done_.load()) {
      const int signal = sigtimedwait(&signals_, nullptr, &tick);
      if (signal <= 0) continue;
      {
        const std::lock_guard lock(mutex_);
        if (server_ != nullptr) {
          server_->stop();
          return;
        }
      }
      // Still loading: end as the signal's own action would.
      std::signal(signal, SIG_DFL);
      sigset_t only;
      sigemptyset(&only);
      sigaddset(&only, signal);
      pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
      std::raise(signal);
    }
  }

  sigset_t signals_{};
  std::atomic<bool> done_{false};
  std::mutex mutex_;
  serve::Server* server_ = nullptr;  // under mutex_
  std::thread waiter_;
};

// A token of the user's own this short can be guessed by another user of
// the machine, who reaches the same loopback; the random one has 48 hex
// digits.
constexpr size_t kShortToken = 16;

void run_serve(const ServeFlags& flags) {
  // Before reading gigabytes: a build without the server, options it refuses.
  serve::check_options(flags.server);
  StopSignals signals;
  if (!flags.server.token.empty() && flags.server.token.size() < kShortToken) {
    write_note(fmt::format(
        "warning: --token has {} characters; one shorter than {} can be guessed by another user "
        "of this machine (leave --token out for a random one)",
        flags.server.token.size(), kShortToken));
  }
  const std::vector<std::string> paths = expand_inputs(flags.files);
  const auto sessions = open_all(paths, flags.common);
  std::vector<serve::ServedFile> served;
  for (size_t i = 0; i < paths.size(); ++i) {
    static_cast<void>(analysis_of(*sessions[i], flags.common));  // notes the device chosen
    served.push_back({paths[i], default_label(paths[i]), sessions[i].get(), flags.common.device});
  }
  serve::Server server(served, flags.server, page_of(served, flags.common));
  const auto stopping = signals.stop_with(server);
  const std::string url = server.bind();
  write_out(url + "\n");
  std::fflush(stdout);
  write_note(fmt::format("serving {} file{} at {} (Ctrl-C stops; from another machine: ssh -L)",
                         paths.size(), paths.size() == 1 ? "" : "s", url));
  server.run();
}

}  // namespace

Command serve_command() {
  return {"serve",
          "The page and every report of these files over HTTP on this machine, until Ctrl-C",
          [](CLI::App& command) -> Runner {
            auto flags = std::make_shared<ServeFlags>();
            add_snapshots_argument(command, flags->files,
                                   "Snapshot files or folders of them, each opened once");
            command.add_option("--port", flags->server.port,
                               "Port to listen on (default 0: any free port; the URL says which)");
            command.add_option("--host", flags->server.host,
                               "Address to listen on (default 127.0.0.1; any other needs --token)");
            command.add_option("--token", flags->server.token,
                               "The secret every request must carry (default: a random one, "
                               "printed in the URL)");
            add_device_flag(command, flags->common);
            add_steps_flag(command, flags->common);
            add_input_flags(command, flags->common);
            return [flags] { run_serve(*flags); };
          },
          "Opens each file once and answers the page and the reports (GET /api/reports lists "
          "them; GET /api/report/NAME?file=0&time=1.5 answers one, as `memsnap NAME --json` "
          "does) on 127.0.0.1 with a random token in the printed URL. Run it on the GPU machine "
          "and open the URL through an SSH tunnel (ssh -L PORT:127.0.0.1:PORT host).",
          "memsnap serve run/rank0.pickle run/rank1.pickle --port 8777"};
}

}  // namespace memsnap::cli
