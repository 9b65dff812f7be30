#include "agent/hooks/nvtx/nvtx_hooks.h"

#include <dlfcn.h>
#include <limits.h>
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCuda.h>
#include <nvtx3/nvToolsExtCudaRt.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

#include "agent/core/agent.h"
#include "agent/core/clock.h"
#include "agent/core/event.h"
#include "agent/hooks/nvtx/text.h"
#include "agent/model/steps.h"

extern "C" int profagent_init() __attribute__((weak));  // agent/core

namespace profagent {
namespace nvtx {
void FlushOpenRangesImpl(bool at_signal);  // below

namespace {

// ---- Handles we hand out ------------------------------------------------------------------
// nvtxDomainHandle_t points to a Domain; nvtxStringHandle_t to a RegisteredString. Both are
// allocated once per name and never freed (ranges may still refer to them).
struct Domain {
  uint32_t id;  // string id of the domain name
};

struct RegisteredString {
  uint32_t id;   // string id
  uint32_t len;  // bytes of text, without the NUL
  char text[1];  // NUL-terminated, allocated to fit
};

constexpr uint32_t kMaxRegisteredBytes = 65536;

// ---- Open ranges --------------------------------------------------------------------------
struct OpenRange {
  uint64_t t0;
  uint64_t cookie;           // model::OnNvtxRangeStart's result
  const Domain* dom;         // nullptr = default domain
  const char* ext_text;      // registered string text, else nullptr (text is in msg)
  union { int64_t i; double f; } payload;
  uint32_t domain_id;
  uint32_t name;             // registered string id, 0 = none
  uint32_t category;
  uint32_t color;
  uint32_t len;              // message bytes
  uint32_t start_thread;     // start/end ranges: CurrentThreadIndex() where it started
  uint8_t flags;
  bool cut;                  // the message was longer than kMaxLongMessageBytes - 1: cut there
  char* heap;                // a message longer than msg (malloc'd, == ext_text), else nullptr
  char msg[kMaxMessageBytes];

  const char* text() const { return ext_text ? ext_text : msg; }
};

static_assert(kMaxLongMessageBytes <= kMaxExtraBytes, "a message must fit one event's bytes");

std::atomic<uint64_t> g_cut_messages{0};  // messages longer than kMaxLongMessageBytes - 1

// Frees the heap copy of a long message once its range was recorded.
inline void ReleaseText(OpenRange* r) {
  if (r->heap == nullptr) return;
  std::free(r->heap);
  r->heap = nullptr;
  r->ext_text = nullptr;
}

// Copies a message with `copy(out, cap)` (CopyUtf8 or WideToUtf8) into r->msg, or, when it does
// not fit (a step's kv list for a large batch runs to kilobytes), into a heap buffer of up to
// kMaxLongMessageBytes: a malloc for long messages only.
template <typename Copy>
void CopyMessage(OpenRange* r, Copy&& copy) {
  r->len = uint32_t(copy(r->msg, kMaxMessageBytes));
  if (r->len + 4 < kMaxMessageBytes) return;  // fits (a cut stops at most 3 bytes short)
  // 2 KiB first (a batch of a few hundred sequences), the whole limit only when that is cut.
  for (size_t cap = 2048;; cap = kMaxLongMessageBytes) {
    char* big = static_cast<char*>(std::malloc(cap));
    if (big == nullptr) return;  // the shorter copy stays
    const size_t n = copy(big, cap);
    if (n <= r->len) {
      std::free(big);
      return;
    }
    std::free(r->heap);
    r->heap = big;
    r->ext_text = big;
    r->len = uint32_t(n);
    if (n + 4 < cap) return;
    if (cap == kMaxLongMessageBytes) {  // cut there
      g_cut_messages.fetch_add(1, std::memory_order_relaxed);
      r->cut = true;
      return;
    }
  }
}

struct ThreadStack {
  int depth = 0;               // entries in use
  int capacity = kInlineDepth;  // entries available
  uint32_t overflow = 0;       // pushes beyond kMaxDepth still open
  std::atomic<bool> in_use{true};
  // CurrentThreadIndex() of the thread using it (0 until that thread has one): ranges a shutdown
  // on another thread flushes are written as this thread's.
  std::atomic<uint32_t> owner{0};
  ThreadStack* next = nullptr;
  // inline_entries, or a heap array GrowStack made. Arrays it replaced are not freed: a
  // shutdown flush may be reading them from another thread (a few per deeply nesting thread).
  std::atomic<OpenRange*> entries{inline_entries};
  OpenRange inline_entries[kInlineDepth];
};

std::atomic<ThreadStack*> g_stacks{nullptr};
thread_local ThreadStack* t_stack __attribute__((tls_model("initial-exec"))) = nullptr;

// Gives the thread's stack back for reuse when the thread exits with no open range (a stack
// with open ranges stays owned so that FlushOpenRanges can report them). A pthread key rather
// than a thread_local with a destructor: every TLS variable of the agent stays initial-exec.
pthread_key_t g_exit_key;
std::atomic<bool> g_exit_key_ok{false};

void ReleaseStack(void* p) {
  auto* s = static_cast<ThreadStack*>(p);
  t_stack = nullptr;
  if (s != nullptr && s->depth == 0) s->in_use.store(false, std::memory_order_release);
}

struct StartSlot {
  std::atomic<uint64_t> key{0};  // kFree, kBusy, or the range id it holds
  OpenRange r;
};
constexpr uint64_t kFree = 0;
constexpr uint64_t kBusy = 1;
constexpr uint64_t kFirstRangeId = 2;
static_assert((kStartSlots & (kStartSlots - 1)) == 0, "kStartSlots must be a power of 2");

std::atomic<StartSlot*> g_start_table{nullptr};
std::atomic<uint64_t> g_next_range_id{kFirstRangeId};

std::atomic<uint64_t> g_depth_overflow{0};
std::atomic<uint64_t> g_start_table_full{0};
std::atomic<uint64_t> g_start_lost{0};
// Start/end ranges that found no free table slot, by id (see the header).
std::mutex g_start_overflow_mu;
std::unordered_map<uint64_t, OpenRange>* g_start_overflow = nullptr;  // under the mutex
std::atomic<size_t> g_start_overflow_live{0};
std::atomic<uint64_t> g_unmatched_pops{0};
std::atomic<uint64_t> g_unknown_ends{0};
std::atomic<uint64_t> g_inits{0};

// ---- Slow paths ---------------------------------------------------------------------------
__attribute__((noinline)) ThreadStack* GetStackSlow() {
  for (ThreadStack* s = g_stacks.load(std::memory_order_acquire); s; s = s->next) {
    bool expected = false;
    if (s->in_use.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
      s->depth = 0;
      s->overflow = 0;
      s->owner.store(0, std::memory_order_relaxed);
      t_stack = s;
      if (g_exit_key_ok.load(std::memory_order_acquire)) pthread_setspecific(g_exit_key, s);
      return s;
    }
  }
  ThreadStack* s = new (std::nothrow) ThreadStack;
  if (s == nullptr) return nullptr;
  ThreadStack* head = g_stacks.load(std::memory_order_relaxed);
  do {
    s->next = head;
  } while (!g_stacks.compare_exchange_weak(head, s, std::memory_order_release,
                                           std::memory_order_relaxed));
  t_stack = s;
  if (g_exit_key_ok.load(std::memory_order_acquire)) pthread_setspecific(g_exit_key, s);
  return s;
}

inline ThreadStack* GetStack() {
  ThreadStack* s = t_stack;
  if (__builtin_expect(s != nullptr, 1)) return s;
  return GetStackSlow();
}

// Doubles the thread's stack (at most kMaxDepth entries). False when it cannot.
__attribute__((noinline)) bool GrowStack(ThreadStack* s) {
  if (s->capacity >= kMaxDepth) return false;
  const int n = std::min(kMaxDepth, s->capacity * 2);
  auto* bigger = static_cast<OpenRange*>(std::malloc(sizeof(OpenRange) * size_t(n)));
  if (bigger == nullptr) return false;
  std::memcpy(static_cast<void*>(bigger), s->entries.load(std::memory_order_relaxed),
              sizeof(OpenRange) * size_t(s->depth));
  s->entries.store(bigger, std::memory_order_release);
  s->capacity = n;
  return true;
}

void EnsureStartTable() {
  if (g_start_table.load(std::memory_order_acquire) != nullptr) return;
  StartSlot* t = new (std::nothrow) StartSlot[kStartSlots];
  if (t == nullptr) return;
  StartSlot* expected = nullptr;
  if (!g_start_table.compare_exchange_strong(expected, t, std::memory_order_acq_rel)) delete[] t;
}

std::mutex g_domains_mu;
std::unordered_map<uint32_t, Domain*>* g_domains = nullptr;  // by name id, under g_domains_mu

nvtxDomainHandle_t CreateDomain(const char* utf8_name) {
  try {
    const uint32_t id = InternString(utf8_name);
    std::lock_guard<std::mutex> lock(g_domains_mu);
    if (g_domains == nullptr) g_domains = new std::unordered_map<uint32_t, Domain*>;
    Domain*& d = (*g_domains)[id];
    if (d == nullptr) d = new Domain{id};
    return reinterpret_cast<nvtxDomainHandle_t>(d);
  } catch (...) {
    return nullptr;  // the application then uses the default domain
  }
}

nvtxStringHandle_t RegisterString(const char* utf8, size_t n) {
  try {
    if (n > kMaxRegisteredBytes) n = kMaxRegisteredBytes;
    const uint32_t id = InternString(std::string(utf8, n));
    auto* rs = static_cast<RegisteredString*>(malloc(sizeof(RegisteredString) + n));
    if (rs == nullptr) return nullptr;
    rs->id = id;
    rs->len = uint32_t(n);
    std::memcpy(rs->text, utf8, n);
    rs->text[n] = '\0';
    return reinterpret_cast<nvtxStringHandle_t>(rs);
  } catch (...) {
    return nullptr;
  }
}

std::string WideToString(const wchar_t* w) {
  if (w == nullptr) return "";
  size_t n = wcslen(w);
  std::string out(n * 4 + 1, '\0');
  out.resize(WideToUtf8(w, &out[0], out.size()));
  return out;
}

// ---- Capturing a message and its attributes ------------------------------------------------
struct MsgSrc {
  const char* ascii = nullptr;
  const wchar_t* wide = nullptr;
  const nvtxEventAttributes_t* attr = nullptr;
};

inline void Capture(OpenRange* r, const Domain* dom, const MsgSrc& m) {
  r->dom = dom;
  r->domain_id = dom ? dom->id : 0;
  r->ext_text = nullptr;
  r->payload.i = 0;
  r->name = 0;
  r->category = 0;
  r->color = 0;
  r->flags = 0;
  r->cut = false;
  r->heap = nullptr;
  r->len = 0;
  r->msg[0] = '\0';
  if (m.ascii != nullptr) {
    CopyMessage(r, [&](char* out, size_t cap) { return CopyUtf8(m.ascii, out, cap); });
    return;
  }
  if (m.wide != nullptr) {
    CopyMessage(r, [&](char* out, size_t cap) { return WideToUtf8(m.wide, out, cap); });
    r->flags |= kFlagMessageWide;
    return;
  }
  const nvtxEventAttributes_t* a = m.attr;
  if (a == nullptr) return;
  r->category = a->category;
  if (a->colorType == NVTX_COLOR_ARGB) r->color = a->color;
  switch (a->payloadType) {
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64:
      // The file's integer payload is signed: a value of 2^63 or more is kept as a double (a
      // positive number near it, not a negative one).
      if (a->payload.ullValue > uint64_t(INT64_MAX)) {
        r->payload.f = double(a->payload.ullValue);
        r->flags |= kFlagHasPayload | kFlagPayloadDouble;
      } else {
        r->payload.i = int64_t(a->payload.ullValue);
        r->flags |= kFlagHasPayload;
      }
      break;
    case NVTX_PAYLOAD_TYPE_INT64:
      r->payload.i = a->payload.llValue;
      r->flags |= kFlagHasPayload;
      break;
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32:
      r->payload.i = int64_t(a->payload.uiValue);
      r->flags |= kFlagHasPayload;
      break;
    case NVTX_PAYLOAD_TYPE_INT32:
      r->payload.i = a->payload.iValue;
      r->flags |= kFlagHasPayload;
      break;
    case NVTX_PAYLOAD_TYPE_DOUBLE:
      r->payload.f = a->payload.dValue;
      r->flags |= kFlagHasPayload | kFlagPayloadDouble;
      break;
    case NVTX_PAYLOAD_TYPE_FLOAT:
      r->payload.f = double(a->payload.fValue);
      r->flags |= kFlagHasPayload | kFlagPayloadDouble;
      break;
    default:
      break;
  }
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      CopyMessage(r, [&](char* out, size_t cap) { return CopyUtf8(a->message.ascii, out, cap); });
      break;
    case NVTX_MESSAGE_TYPE_UNICODE:
      CopyMessage(r,
                  [&](char* out, size_t cap) { return WideToUtf8(a->message.unicode, out, cap); });
      r->flags |= kFlagMessageWide;
      break;
    case NVTX_MESSAGE_TYPE_REGISTERED: {
      auto* rs = reinterpret_cast<const RegisteredString*>(a->message.registered);
      if (rs != nullptr) {
        r->name = rs->id;
        r->ext_text = rs->text;
        r->len = rs->len;
      }
      break;
    }
    default:
      break;
  }
}

// `owner`: for a push/pop range another thread flushes, the thread whose range it is.
inline void EmitRange(EvType type, const OpenRange& r, uint64_t t1, uint32_t depth,
                      uint32_t owner = 0) {
  RawEvent e;
  std::memset(&e, 0, sizeof(e));
  e.type = type;
  e.flags = r.flags;
  e.t0 = r.t0;
  e.t1 = t1;
  e.nvtx.domain = r.domain_id;
  e.nvtx.payload.i = r.payload.i;
  e.nvtx.name = r.name;
  e.nvtx.category = r.category;
  e.nvtx.color = r.color;
  e.nvtx.depth = depth;
  e.nvtx.start_thread = depth == kNvtxStartEnd ? r.start_thread : owner;
  if (r.name != 0) {
    Emit(e);
  } else {
    EmitWithBytes(e, r.text(), r.len);
  }
}

inline uint64_t ModelStart(const OpenRange& r) {
  try {
    return model::OnNvtxRangeStart(r.text(), r.len);
  } catch (...) {
    return 0;
  }
}

// A range ended at t1: record it (when this is the outermost hook and recording is on) and let
// the model see it.
inline void EndRange(const OpenRange& r, uint64_t t1, uint32_t depth, bool outermost) {
  if (outermost && RecordingSince(r.t0)) EmitRange(EvType::kNvtxRange, r, t1, depth);
  try {
    // A cut message's last word is partial (a kv value "50" of "50000"): the model does not
    // see it (a step's words after the cut are lost, as the note says).
    size_t n = r.len;
    if (r.cut) {
      while (n > 0 && r.text()[n - 1] != ' ' && r.text()[n - 1] != '\t') --n;
    }
    model::OnNvtxRangeEnd(r.t0, t1, r.text(), n, r.cookie);
  } catch (...) {
  }
}

// ---- Push/pop -----------------------------------------------------------------------------
int DoPush(const Domain* dom, const MsgSrc& m) {
  const uint64_t t0 = Now();
  HookGuard guard;
  ThreadStack* s = GetStack();
  if (s == nullptr) return -1;
  if (__builtin_expect(s->owner.load(std::memory_order_relaxed) == 0, 0)) {
    // The thread registers at its first push, not its first pop: a process whose first act is
    // a range around everything (an orchestrator's `run`) then has its writer and signal
    // handlers, so a SIGTERM or Ctrl-C still writes the open range (before: no file at all).
    s->owner.store(Recording() ? RegisterCurrentThread() : CurrentThreadIndex(),
                   std::memory_order_relaxed);
  }
  if (__builtin_expect(s->depth >= s->capacity, 0) &&
      (s->overflow > 0 || !GrowStack(s))) {
    ++s->overflow;
    g_depth_overflow.fetch_add(1, std::memory_order_relaxed);
    return s->depth + int(s->overflow) - 1;
  }
  OpenRange& r = s->entries.load(std::memory_order_relaxed)[s->depth];
  Capture(&r, dom, m);
  r.cookie = ModelStart(r);
  r.t0 = t0;
  return s->depth++;
}

int DoPop(const Domain* dom) {
  const uint64_t t1 = Now();
  HookGuard guard;
  ThreadStack* s = t_stack;
  if (s == nullptr) {
    g_unmatched_pops.fetch_add(1, std::memory_order_relaxed);
    return -1;
  }
  if (__builtin_expect(s->overflow > 0, 0)) {
    --s->overflow;
    return s->depth + int(s->overflow);
  }
  OpenRange* entries = s->entries.load(std::memory_order_relaxed);
  int i = s->depth - 1;
  while (i >= 0 && entries[i].dom != dom) --i;  // the innermost open range of this domain
  if (i < 0) {
    g_unmatched_pops.fetch_add(1, std::memory_order_relaxed);
    return -1;
  }
  EndRange(entries[i], t1, uint32_t(i), guard.outermost());
  ReleaseText(&entries[i]);
  if (i != s->depth - 1) {  // ranges of other domains above it: close the gap (rare)
    std::memmove(&entries[i], &entries[i + 1], size_t(s->depth - 1 - i) * sizeof(OpenRange));
  }
  --s->depth;
  return i;
}

// ---- Start/end ----------------------------------------------------------------------------

// The starting thread of a start/end range: registered now if it has recorded nothing yet (a
// Python scheduler thread that only opens steps), so the range is drawn on its track and its
// nvtxNameOsThread name is kept, not left to whichever thread ends it.
uint32_t StartingThread() {
  const uint32_t t = CurrentThreadIndex();
  return t != 0 || !Recording() ? t : RegisterCurrentThread();
}
// Slow path: a start whose probes found the table full goes to the overflow map.
__attribute__((noinline)) void StartOverflow(uint64_t id, const Domain* dom, const MsgSrc& m,
                                             uint64_t t0) {
  try {
    OpenRange r;
    std::memset(static_cast<void*>(&r), 0, sizeof(r));
    Capture(&r, dom, m);
    r.cookie = ModelStart(r);
    r.t0 = t0;
    r.start_thread = StartingThread();
    std::lock_guard<std::mutex> l(g_start_overflow_mu);
    if (g_start_overflow == nullptr) {
      g_start_overflow = new std::unordered_map<uint64_t, OpenRange>();
    }
    (*g_start_overflow)[id] = r;
    g_start_overflow_live.fetch_add(1, std::memory_order_release);
  } catch (...) {
    g_start_lost.fetch_add(1, std::memory_order_relaxed);
  }
}

// Slow path: the end of a range kept in the overflow map. False when it is not there.
__attribute__((noinline)) bool EndOverflow(uint64_t id, uint64_t t1, bool outermost) {
  OpenRange r;
  {
    std::lock_guard<std::mutex> l(g_start_overflow_mu);
    if (g_start_overflow == nullptr) return false;
    auto it = g_start_overflow->find(id);
    if (it == g_start_overflow->end()) return false;
    r = it->second;
    g_start_overflow->erase(it);
    g_start_overflow_live.fetch_sub(1, std::memory_order_release);
  }
  EndRange(r, t1, kNvtxStartEnd, outermost);
  ReleaseText(&r);
  return true;
}

nvtxRangeId_t DoStart(const Domain* dom, const MsgSrc& m) {
  const uint64_t t0 = Now();
  HookGuard guard;
  const uint64_t id = g_next_range_id.fetch_add(1, std::memory_order_relaxed);
  StartSlot* table = g_start_table.load(std::memory_order_acquire);
  if (table != nullptr) {
    for (size_t p = 0; p < kStartProbes; ++p) {
      StartSlot& slot = table[(id + p) & (kStartSlots - 1)];
      uint64_t expected = kFree;
      if (slot.key.compare_exchange_strong(expected, kBusy, std::memory_order_acquire,
                                           std::memory_order_relaxed)) {
        Capture(&slot.r, dom, m);
        slot.r.cookie = ModelStart(slot.r);
        slot.r.t0 = t0;
        slot.r.start_thread = StartingThread();
        slot.key.store(id, std::memory_order_release);
        return id;
      }
    }
  }
  g_start_table_full.fetch_add(1, std::memory_order_relaxed);
  StartOverflow(id, dom, m, t0);
  return id;
}

void DoEnd(nvtxRangeId_t id) {
  const uint64_t t1 = Now();
  HookGuard guard;
  StartSlot* table = g_start_table.load(std::memory_order_acquire);
  if (table != nullptr && id >= kFirstRangeId) {
    for (size_t p = 0; p < kStartProbes; ++p) {
      StartSlot& slot = table[(id + p) & (kStartSlots - 1)];
      uint64_t expected = id;
      if (slot.key.compare_exchange_strong(expected, kBusy, std::memory_order_acquire,
                                           std::memory_order_relaxed)) {
        EndRange(slot.r, t1, kNvtxStartEnd, guard.outermost());
        ReleaseText(&slot.r);
        slot.key.store(kFree, std::memory_order_release);
        return;
      }
    }
  }
  if (g_start_overflow_live.load(std::memory_order_acquire) > 0 &&
      EndOverflow(id, t1, guard.outermost())) {
    return;
  }
  g_unknown_ends.fetch_add(1, std::memory_order_relaxed);
}

// ---- Marks --------------------------------------------------------------------------------
void DoMark(const Domain* dom, const MsgSrc& m) {
  const uint64_t t = Now();
  HookGuard guard;
  if (!guard.outermost() || !Recording()) return;
  OpenRange r;
  Capture(&r, dom, m);
  r.t0 = t;
  EmitRange(EvType::kNvtxMark, r, t, 0);
  ReleaseText(&r);
}

// ---- NVTX handler table entries (exact NVTX prototypes) -----------------------------------
inline const Domain* D(nvtxDomainHandle_t d) { return reinterpret_cast<const Domain*>(d); }

void MarkEx(const nvtxEventAttributes_t* a) { MsgSrc m; m.attr = a; DoMark(nullptr, m); }
void MarkA(const char* s) { MsgSrc m; m.ascii = s; DoMark(nullptr, m); }
void MarkW(const wchar_t* s) { MsgSrc m; m.wide = s; DoMark(nullptr, m); }
nvtxRangeId_t RangeStartEx(const nvtxEventAttributes_t* a) { MsgSrc m; m.attr = a; return DoStart(nullptr, m); }
nvtxRangeId_t RangeStartA(const char* s) { MsgSrc m; m.ascii = s; return DoStart(nullptr, m); }
nvtxRangeId_t RangeStartW(const wchar_t* s) { MsgSrc m; m.wide = s; return DoStart(nullptr, m); }
void RangeEnd(nvtxRangeId_t id) { DoEnd(id); }
int RangePushEx(const nvtxEventAttributes_t* a) { MsgSrc m; m.attr = a; return DoPush(nullptr, m); }
int RangePushA(const char* s) { MsgSrc m; m.ascii = s; return DoPush(nullptr, m); }
int RangePushW(const wchar_t* s) { MsgSrc m; m.wide = s; return DoPush(nullptr, m); }
int RangePop() { return DoPop(nullptr); }

void NoteName(const char* what, uint64_t key, const std::string& name) {
  try {
    AddNote("info", std::string("nvtx: ") + what + " " + std::to_string(key) + " named '" +
                        name + "'");
  } catch (...) {
  }
}
void NameCategoryA(uint32_t c, const char* n) { NoteName("category", c, n ? n : ""); }
void NameCategoryW(uint32_t c, const wchar_t* n) { NoteName("category", c, WideToString(n)); }
void NameThread(uint32_t t, const std::string& n) {
  try {
    ::profagent::NameOsThread(t, n);
  } catch (...) {
  }
}
void NameOsThreadA(uint32_t t, const char* n) { NameThread(t, n ? n : ""); }
void NameOsThreadW(uint32_t t, const wchar_t* n) {
  try {
    NameThread(t, WideToString(n));
  } catch (...) {
  }
}

// NVTX's CUDA modules (nvToolsExtCudaRt.h, nvToolsExtCuda.h). A named stream gets a StreamInfo
// record (its track in the trace carries the name); devices, contexts and events a note.
template <typename Text>
void NameStreamOf(const void* stream, Text text) {
  try {
    ::profagent::NameStream(reinterpret_cast<uint64_t>(stream), text());
  } catch (...) {
  }
}
template <typename Text>
void NoteHandle(const char* what, const void* handle, Text text) {
  try {
    char key[32];
    snprintf(key, sizeof(key), "%p", handle);
    AddNote("info", std::string("nvtx: ") + what + " " + key + " named '" + text() + "'");
  } catch (...) {
  }
}
inline std::string Ascii(const char* n) { return n ? n : ""; }
void NameCudaStreamA(cudaStream_t s, const char* n) {
  NameStreamOf(s, [&] { return Ascii(n); });
}
void NameCudaStreamW(cudaStream_t s, const wchar_t* n) {
  NameStreamOf(s, [&] { return WideToString(n); });
}
void NameCuStreamA(CUstream s, const char* n) {
  NameStreamOf(s, [&] { return Ascii(n); });
}
void NameCuStreamW(CUstream s, const wchar_t* n) {
  NameStreamOf(s, [&] { return WideToString(n); });
}
void NameCudaDeviceA(int d, const char* n) { NoteName("device", uint64_t(d), Ascii(n)); }
void NameCudaDeviceW(int d, const wchar_t* n) {
  try {
    NoteName("device", uint64_t(d), WideToString(n));
  } catch (...) {
  }
}
void NameCuDeviceA(CUdevice d, const char* n) { NameCudaDeviceA(int(d), n); }
void NameCuDeviceW(CUdevice d, const wchar_t* n) { NameCudaDeviceW(int(d), n); }
void NameCudaEventA(cudaEvent_t e, const char* n) {
  NoteHandle("event", e, [&] { return Ascii(n); });
}
void NameCudaEventW(cudaEvent_t e, const wchar_t* n) {
  NoteHandle("event", e, [&] { return WideToString(n); });
}
void NameCuEventA(CUevent e, const char* n) {
  NoteHandle("event", e, [&] { return Ascii(n); });
}
void NameCuEventW(CUevent e, const wchar_t* n) {
  NoteHandle("event", e, [&] { return WideToString(n); });
}
void NameCuContextA(CUcontext c, const char* n) {
  NoteHandle("context", c, [&] { return Ascii(n); });
}
void NameCuContextW(CUcontext c, const wchar_t* n) {
  NoteHandle("context", c, [&] { return WideToString(n); });
}

void DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) { MsgSrc m; m.attr = a; DoMark(D(d), m); }
nvtxRangeId_t DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) { MsgSrc m; m.attr = a; return DoStart(D(d), m); }
void DomainRangeEnd(nvtxDomainHandle_t, nvtxRangeId_t id) { DoEnd(id); }
int DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) { MsgSrc m; m.attr = a; return DoPush(D(d), m); }
int DomainRangePop(nvtxDomainHandle_t d) { return DoPop(D(d)); }
void DomainNameCategoryA(nvtxDomainHandle_t, uint32_t c, const char* n) { NoteName("category", c, n ? n : ""); }
void DomainNameCategoryW(nvtxDomainHandle_t, uint32_t c, const wchar_t* n) { NoteName("category", c, WideToString(n)); }
nvtxStringHandle_t DomainRegisterStringA(nvtxDomainHandle_t, const char* s) {
  return s ? RegisterString(s, strlen(s)) : nullptr;
}
nvtxStringHandle_t DomainRegisterStringW(nvtxDomainHandle_t, const wchar_t* s) {
  try {
    std::string u = WideToString(s);
    return RegisterString(u.data(), u.size());
  } catch (...) {
    return nullptr;
  }
}
nvtxDomainHandle_t DomainCreateA(const char* name) { return CreateDomain(name ? name : ""); }
nvtxDomainHandle_t DomainCreateW(const wchar_t* name) {
  try {
    return CreateDomain(WideToString(name).c_str());
  } catch (...) {
    return nullptr;
  }
}
void DomainDestroy(nvtxDomainHandle_t) {}  // handles stay valid: open ranges may refer to them
void Initialize(const void*) {}

template <typename Fn>
void SetSlot(NvtxFunctionTable table, unsigned int size, unsigned int id, Fn fn) {
  if (id < size && table[id] != nullptr) *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

// Whether the agent initialized and records (a bad configuration, PROFAGENT_ENABLE=0 or a rank
// outside PROFAGENT_RANKS leave NVTX to the application and other tools). profagent_init runs
// once; a test build without the core has no profagent_init: the surface is on.
bool AgentEnabled() {
  if (&profagent_init == nullptr) {
    const char* enable = getenv("PROFAGENT_ENABLE");
    return enable == nullptr || std::strcmp(enable, "0") != 0;
  }
  return profagent_init() != 0;
}

// model::ThreadNvtxContext: the thread's open push/pop ranges (any domain), outermost first.
size_t ThreadContext(char* out, size_t cap) {
  const ThreadStack* s = t_stack;
  if (s == nullptr || cap == 0) return 0;
  const OpenRange* entries = s->entries.load(std::memory_order_relaxed);
  auto seg = [&](int i) { return std::min<size_t>(entries[i].len, model::kContextSegmentBytes); };
  // The innermost ranges decide: when all do not fit, the outermost are left out.
  int first = s->depth;
  size_t total = 0;
  while (first > 0 && total + seg(first - 1) + (total > 0 ? 1 : 0) <= cap) {
    total += seg(first - 1) + (total > 0 ? 1 : 0);
    --first;
  }
  size_t n = 0;
  for (int i = first; i < s->depth; ++i) {
    if (n > 0) out[n++] = model::kContextSeparator;
    std::memcpy(out + n, entries[i].text(), seg(i));
    n += seg(i);
  }
  return n;
}

__attribute__((constructor)) void NvtxSurfaceLoad() {
  if (pthread_key_create(&g_exit_key, &ReleaseStack) == 0) {
    g_exit_key_ok.store(true, std::memory_order_release);
  }
  InstallEnv();
  model::SetOpenRangeFlusher(&FlushOpenRanges);
  SetSignalRangeFlush([] { FlushOpenRangesImpl(true); });
  model::SetThreadNvtxContext(&ThreadContext);
  AtShutdown(&model::Shutdown);  // idempotent: harmless if the core calls it as well
}

}  // namespace

void InstallEnv() {
  if (!AgentEnabled()) return;
  // The agent's own file, by a function of its own: InitializeInjectionNvtx2 is exported, and a
  // reference to it binds to the first library that exports it (NVIDIA's libcupti does, and a
  // framework may load it globally first): the agent then pointed NVTX at libcupti.
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&InstallEnv), &info) == 0 || info.dli_fname == nullptr ||
      info.dli_fname[0] == '\0') {
    return;
  }
  char self[PATH_MAX];
  if (realpath(info.dli_fname, self) == nullptr) return;
  char exe[PATH_MAX];
  if (realpath("/proc/self/exe", exe) != nullptr && std::strcmp(exe, self) == 0) return;
  if (const char* set = getenv("NVTX_INJECTION64_PATH"); set != nullptr && set[0] != '\0') {
    // Another tool's (left alone), or a path that does not load: NVTX then reaches that tool or
    // nothing, never the agent, whose steps and runs come from NVTX. Said once, at start.
    char other[PATH_MAX];
    if (realpath(set, other) == nullptr || std::strcmp(other, self) != 0) {
      AddNote("warning", std::string("NVTX_INJECTION64_PATH is set to ") + set +
                             (realpath(set, other) == nullptr ? " (no such file)" : "") +
                             ": the program's NVTX ranges go there, not to the agent (no NVTX "
                             "steps or runs); unset it to record them");
    }
    return;
  }
  setenv("NVTX_INJECTION64_PATH", self, 0);
}

// At exit, _exit and exec (the shutdown hooks), and, with `at_signal`, when a fatal signal ends
// the file (SetSignalRangeFlush: on the writer thread, while the interrupted thread may hold any
// lock: the overflow map's is only tried).
void FlushOpenRangesImpl(bool at_signal) {
  HookGuard guard;
  for (ThreadStack* s = g_stacks.load(std::memory_order_acquire); s; s = s->next) {
    if (!s->in_use.load(std::memory_order_acquire)) continue;
    const OpenRange* entries = s->entries.load(std::memory_order_acquire);
    int depth = s->depth;
    if (depth > s->capacity) depth = s->capacity;
    // Another thread's ranges (a worker still inside its run while main exits) are written as
    // that thread's: its run encloses its steps.
    uint32_t owner = s->owner.load(std::memory_order_relaxed);
    if (owner == CurrentThreadIndex()) owner = 0;
    for (int i = 0; i < depth; ++i) {
      OpenRange r = entries[i];  // (a heap copy stays the entry's)
      if (r.len >= kMaxMessageBytes && r.ext_text == nullptr) r.len = kMaxMessageBytes - 1;
      EmitRange(EvType::kNvtxPush, r, r.t0, uint32_t(i), owner);
    }
  }
  StartSlot* table = g_start_table.load(std::memory_order_acquire);
  if (table != nullptr) {
    for (size_t k = 0; k < kStartSlots; ++k) {
      StartSlot& slot = table[k];
      uint64_t id = slot.key.load(std::memory_order_acquire);
      if (id < kFirstRangeId) continue;
      if (!slot.key.compare_exchange_strong(id, kBusy, std::memory_order_acquire)) continue;
      EmitRange(EvType::kNvtxPush, slot.r, slot.r.t0, kNvtxStartEnd);
      slot.key.store(id, std::memory_order_release);
    }
  }
  {
    std::unique_lock<std::mutex> l(g_start_overflow_mu, std::defer_lock);
    if (at_signal) {
      l.try_lock();
    } else {
      l.lock();
    }
    if (l.owns_lock() && g_start_overflow != nullptr) {
      for (const auto& kv : *g_start_overflow) {
        EmitRange(EvType::kNvtxPush, kv.second, kv.second.t0, kNvtxStartEnd);
      }
    }
  }
  // What could not be recorded, in the file: the report lists these notes with its warnings.
  const uint64_t deep = g_depth_overflow.load(std::memory_order_relaxed);
  const uint64_t lost = g_start_lost.load(std::memory_order_relaxed);
  if (deep > 0) {
    AddNote("warning",
            "NVTX: " + std::to_string(deep) + " push/pop ranges nested deeper than " +
                std::to_string(kMaxDepth) +
                " were not recorded (nor seen as steps or runs, if any of them was one)");
  }
  if (const uint64_t cut = g_cut_messages.load(std::memory_order_relaxed); cut > 0) {
    AddNote("warning", "NVTX: " + std::to_string(cut) + " messages longer than " +
                           std::to_string(kMaxLongMessageBytes - 1) +
                           " bytes were cut there (a step's or run's key=value words after the "
                           "cut are lost)");
  }
  if (lost > 0) {
    AddNote("warning", "NVTX: " + std::to_string(lost) +
                           " start/end ranges could not be kept (out of memory) and were not "
                           "recorded");
  }
}

void FlushOpenRanges() { FlushOpenRangesImpl(false); }

Stats GetStats() {
  Stats st;
  st.depth_overflow = g_depth_overflow.load(std::memory_order_relaxed);
  st.start_table_full = g_start_table_full.load(std::memory_order_relaxed);
  st.start_lost = g_start_lost.load(std::memory_order_relaxed);
  st.unmatched_pops = g_unmatched_pops.load(std::memory_order_relaxed);
  st.unknown_ends = g_unknown_ends.load(std::memory_order_relaxed);
  st.inits = g_inits.load(std::memory_order_relaxed);
  return st;
}

}  // namespace nvtx
}  // namespace profagent

extern "C" int InitializeInjectionNvtx2(const void* (*get_export_table)(uint32_t)) {
  using namespace profagent::nvtx;  // NOLINT
  try {
    if (!AgentEnabled()) return 0;
    if (get_export_table == nullptr) return 0;
    auto* cb = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
    if (cb == nullptr || cb->struct_size < sizeof(NvtxExportTableCallbacks) ||
        cb->GetModuleFunctionTable == nullptr) {
      return 0;
    }
    EnsureStartTable();
    NvtxFunctionTable t = nullptr;
    unsigned int n = 0;
    if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t, &n) && t != nullptr) {
      SetSlot(t, n, NVTX_CBID_CORE_MarkEx, &MarkEx);
      SetSlot(t, n, NVTX_CBID_CORE_MarkA, &MarkA);
      SetSlot(t, n, NVTX_CBID_CORE_MarkW, &MarkW);
      SetSlot(t, n, NVTX_CBID_CORE_RangeStartEx, &RangeStartEx);
      SetSlot(t, n, NVTX_CBID_CORE_RangeStartA, &RangeStartA);
      SetSlot(t, n, NVTX_CBID_CORE_RangeStartW, &RangeStartW);
      SetSlot(t, n, NVTX_CBID_CORE_RangeEnd, &RangeEnd);
      SetSlot(t, n, NVTX_CBID_CORE_RangePushEx, &RangePushEx);
      SetSlot(t, n, NVTX_CBID_CORE_RangePushA, &RangePushA);
      SetSlot(t, n, NVTX_CBID_CORE_RangePushW, &RangePushW);
      SetSlot(t, n, NVTX_CBID_CORE_RangePop, &RangePop);
      SetSlot(t, n, NVTX_CBID_CORE_NameCategoryA, &NameCategoryA);
      SetSlot(t, n, NVTX_CBID_CORE_NameCategoryW, &NameCategoryW);
      SetSlot(t, n, NVTX_CBID_CORE_NameOsThreadA, &NameOsThreadA);
      SetSlot(t, n, NVTX_CBID_CORE_NameOsThreadW, &NameOsThreadW);
    }
    t = nullptr;
    n = 0;
    if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &n) && t != nullptr) {
      SetSlot(t, n, NVTX_CBID_CORE2_DomainMarkEx, &DomainMarkEx);
      SetSlot(t, n, NVTX_CBID_CORE2_DomainRangeStartEx, &DomainRangeStartEx);
      SetSlot(t, n, NVTX_CBID_CORE2_DomainRangeEnd, &DomainRangeEnd);
      SetSlot(t, n, NVTX_CBID_CORE2_DomainRangePushEx, &DomainRangePushEx);
      SetSlot(t, n, NVTX_CBID_CORE2_DomainRangePop, &DomainRangePop);
      SetSlot(t, n, NVTX_CBID_CORE2_DomainNameCategoryA, &DomainNameCategoryA);
      SetSlot(t, n, NVTX_CBID_CORE2_DomainNameCategoryW, &DomainNameCategoryW);
      SetSlot(t, n, NVTX_CBID_CORE2_DomainRegisterStringA, &DomainRegisterStringA);
      SetSlot(t, n, NVTX_CBID_CORE2_DomainRegisterStringW, &DomainRegisterStringW);
      SetSlot(t, n, NVTX_CBID_CORE2_DomainCreateA, &DomainCreateA);
      SetSlot(t, n, NVTX_CBID_CORE2_DomainCreateW, &DomainCreateW);
      SetSlot(t, n, NVTX_CBID_CORE2_DomainDestroy, &DomainDestroy);
      SetSlot(t, n, NVTX_CBID_CORE2_Initialize, &Initialize);
    }
    t = nullptr;
    n = 0;
    if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CUDART, &t, &n) && t != nullptr) {
      SetSlot(t, n, NVTX_CBID_CUDART_NameCudaDeviceA, &NameCudaDeviceA);
      SetSlot(t, n, NVTX_CBID_CUDART_NameCudaDeviceW, &NameCudaDeviceW);
      SetSlot(t, n, NVTX_CBID_CUDART_NameCudaStreamA, &NameCudaStreamA);
      SetSlot(t, n, NVTX_CBID_CUDART_NameCudaStreamW, &NameCudaStreamW);
      SetSlot(t, n, NVTX_CBID_CUDART_NameCudaEventA, &NameCudaEventA);
      SetSlot(t, n, NVTX_CBID_CUDART_NameCudaEventW, &NameCudaEventW);
    }
    t = nullptr;
    n = 0;
    if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CUDA, &t, &n) && t != nullptr) {
      SetSlot(t, n, NVTX_CBID_CUDA_NameCuDeviceA, &NameCuDeviceA);
      SetSlot(t, n, NVTX_CBID_CUDA_NameCuDeviceW, &NameCuDeviceW);
      SetSlot(t, n, NVTX_CBID_CUDA_NameCuContextA, &NameCuContextA);
      SetSlot(t, n, NVTX_CBID_CUDA_NameCuContextW, &NameCuContextW);
      SetSlot(t, n, NVTX_CBID_CUDA_NameCuStreamA, &NameCuStreamA);
      SetSlot(t, n, NVTX_CBID_CUDA_NameCuStreamW, &NameCuStreamW);
      SetSlot(t, n, NVTX_CBID_CUDA_NameCuEventA, &NameCuEventA);
      SetSlot(t, n, NVTX_CBID_CUDA_NameCuEventW, &NameCuEventW);
    }
    g_inits.fetch_add(1, std::memory_order_relaxed);
    return 1;
  } catch (...) {
    return 0;
  }
}
