// A test-only stand-in for //agent/core: implements the few core functions that agent/model and
// agent/hooks/nvtx call, and captures what they emit so unit tests can inspect it in-process.
//
// Link this instead of //agent/core (never both). Not for production: Emit takes a mutex and
// allocates. Now() uses CLOCK_MONOTONIC (internal::g_use_tsc = false), so ticks are ns.
#ifndef PROFAGENT_AGENT_MODEL_TESTING_FAKE_CORE_H_
#define PROFAGENT_AGENT_MODEL_TESTING_FAKE_CORE_H_

#include <string>
#include <vector>

#include "agent/core/config.h"
#include "agent/core/event.h"

namespace profagent {
namespace fake {

struct Captured {
  RawEvent e;
  std::string bytes;  // the EmitWithBytes payload ("" for Emit)
};

// Every event emitted since the last Reset, in emission order.
std::vector<Captured> Events();
// Events of one type.
std::vector<Captured> EventsOfType(EvType t);
// The text of an interned string id ("" for 0 or unknown).
std::string StringOf(uint32_t id);
// Arguments of every SetScheduleActive call since the last Reset.
std::vector<bool> ScheduleCalls();
// Notes added with AddNote ("level: text"); NameOsThread adds "thread name: TID NAME".
std::vector<std::string> Notes();

// Sets the configuration GetConfig() returns and clears captured events, schedule calls and
// notes (interned strings are kept: ids stay stable, as in the real core).
void Reset(const Config& c);

}  // namespace fake
}  // namespace profagent

#endif  // PROFAGENT_AGENT_MODEL_TESTING_FAKE_CORE_H_
