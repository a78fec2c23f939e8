#include "train/stop_request.hpp"

#include <signal.h>

#include <atomic>

namespace poslab {

namespace {
std::atomic<int> g_stop_signal{0};  // lock-free: safe to store from a signal handler

extern "C" void on_stop_signal(int signal) {
  g_stop_signal.store(signal);
  // The next such signal takes the default action (ends the process).
  struct sigaction action{};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  ::sigaction(signal, &action, nullptr);
}
}  // namespace

void install_stop_handler() {
  struct sigaction action{};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a write interrupted by the signal goes on
  for (int signal : {SIGTERM, SIGINT}) {
    struct sigaction previous{};
    ::sigaction(signal, nullptr, &previous);
    if (previous.sa_handler == SIG_IGN) continue;  // a background job's SIGINT stays ignored
    ::sigaction(signal, &action, nullptr);
  }
}

int stop_requested() { return g_stop_signal.load(); }

void request_stop(int signal) { g_stop_signal.store(signal); }

}  // namespace poslab
