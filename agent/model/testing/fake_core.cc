#include "agent/model/testing/fake_core.h"

#include <cstdarg>
#include <cstdio>
#include <map>
#include <mutex>

#include "agent/core/agent.h"
#include "agent/core/clock.h"

namespace profagent {
namespace internal {
bool g_use_tsc = false;
// No rings: every Emit takes EmitSlow below, which captures the event.
std::atomic<uint8_t> g_recording{kRecAll};
std::atomic<uint64_t> g_paused_at{0};
__thread Ring* t_ring = nullptr;
}  // namespace internal

thread_local int HookGuard::depth_ = 0;

namespace {
std::mutex mu;
std::vector<fake::Captured> events;
std::vector<bool> schedule_calls;
std::vector<std::string> notes;
std::map<std::string, uint32_t> ids;
std::vector<std::string> strings{""};
Config config;
}  // namespace

namespace internal {
bool EmitSlow(const RawEvent& e) {
  std::lock_guard<std::mutex> l(mu);
  events.push_back({e, ""});
  return true;
}
}  // namespace internal

bool EmitWithBytes(const RawEvent& e, const void* data, size_t n) {
  if (n > kMaxExtraBytes) n = kMaxExtraBytes;
  std::lock_guard<std::mutex> l(mu);
  RawEvent c = e;
  c.extra = uint16_t((n + sizeof(RawEvent) - 1) / sizeof(RawEvent));
  events.push_back({c, std::string(static_cast<const char*>(data), n)});
  return true;
}

uint32_t InternString(const std::string& s) {
  std::lock_guard<std::mutex> l(mu);
  auto it = ids.find(s);
  if (it != ids.end()) return it->second;
  uint32_t id = uint32_t(strings.size());
  strings.push_back(s);
  ids[s] = id;
  return id;
}

void AddNote(const char* level, const std::string& text) {
  std::lock_guard<std::mutex> l(mu);
  notes.push_back(std::string(level) + ": " + text);
}

uint32_t CurrentThreadIndex() { return 1; }  // one recording thread
uint32_t RegisterCurrentThread() { return 1; }

void NameOsThread(uint32_t tid, const std::string& name) {
  AddNote("thread name", std::to_string(tid) + " " + name);
}

void SetStreamLocator(StreamLocator) {}
void NameStream(uint64_t handle, const std::string& name) {
  AddNote("stream name", std::to_string(handle) + " " + name);
}

void Log(int, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "profagent(fake): ");
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
}

void SetScheduleActive(bool active) {
  std::lock_guard<std::mutex> l(mu);
  internal::g_recording.store(active ? internal::kRecAll : internal::kRecEnabled);
  schedule_calls.push_back(active);
}

bool InCaptureRange(uint64_t, bool) { return true; }  // no capture range in these tests

const Config& GetConfig() { return config; }

void AtShutdown(void (*)()) {}  // the tests call model::Shutdown themselves
void SetSignalRangeFlush(void (*)()) {}  // no signal path in these tests

void InitClock() {}
uint64_t TicksToNs(uint64_t t) { return t; }
bool UsingTsc() { return false; }

namespace fake {

std::vector<Captured> Events() {
  std::lock_guard<std::mutex> l(mu);
  return events;
}

std::vector<Captured> EventsOfType(EvType t) {
  std::lock_guard<std::mutex> l(mu);
  std::vector<Captured> out;
  for (const auto& c : events) {
    if (c.e.type == t) out.push_back(c);
  }
  return out;
}

std::string StringOf(uint32_t id) {
  std::lock_guard<std::mutex> l(mu);
  return id < strings.size() ? strings[id] : "";
}

std::vector<bool> ScheduleCalls() {
  std::lock_guard<std::mutex> l(mu);
  return schedule_calls;
}

std::vector<std::string> Notes() {
  std::lock_guard<std::mutex> l(mu);
  return notes;
}

void Reset(const Config& c) {
  std::lock_guard<std::mutex> l(mu);
  config = c;
  events.clear();
  schedule_calls.clear();
  notes.clear();
  internal::g_recording.store(internal::kRecAll);
}

}  // namespace fake
}  // namespace profagent
