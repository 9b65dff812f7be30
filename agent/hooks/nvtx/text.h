// Message text helpers for the NVTX surface: bounded copies without allocation.
//
// Both functions write at most `cap - 1` bytes plus a NUL into `out`, never split a UTF-8
// sequence when they cut, and return the number of bytes written (without the NUL). Safe in a
// hook: no allocation, no lock, no locale dependence.
#ifndef PROFAGENT_AGENT_HOOKS_NVTX_TEXT_H_
#define PROFAGENT_AGENT_HOOKS_NVTX_TEXT_H_

#include <cstddef>
#include <cwchar>

namespace profagent {
namespace nvtx {

// Copies the NUL-terminated `s` (ASCII or UTF-8). nullptr copies nothing.
size_t CopyUtf8(const char* s, char* out, size_t cap);

// Converts the NUL-terminated wide string `w` (UTF-32 on Linux; UTF-16 surrogate pairs are
// combined when wchar_t is 16 bits) to UTF-8. Invalid code points become U+FFFD.
size_t WideToUtf8(const wchar_t* w, char* out, size_t cap);

}  // namespace nvtx
}  // namespace profagent

#endif  // PROFAGENT_AGENT_HOOKS_NVTX_TEXT_H_
