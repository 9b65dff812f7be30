#include "agent/hooks/mpi/type_cache.h"

#include <cstring>

namespace profagent {

TypeCache::TypeCache() {
  for (int i = 0; i < kMax; ++i) names_[i] = entries_[i].name;
  std::strcpy(entries_[kDerived].name, "derived");
  std::strcpy(entries_[kUnknown].name, "unknown");
  count_.store(2, std::memory_order_release);
}

int TypeCache::Find(uint64_t handle) const {
  const int n = count_.load(std::memory_order_acquire);
  for (int i = 2; i < n; ++i)
    if (entries_[i].handle.load(std::memory_order_relaxed) == handle) return i;
  return -1;
}

int TypeCache::Add(uint64_t handle, const char* name, uint32_t size) {
  std::lock_guard<std::mutex> l(mu_);
  const int found = Find(handle);
  if (found >= 0) return found;
  const int n = count_.load(std::memory_order_relaxed);
  if (n >= kMax) return kUnknown;
  Entry& e = entries_[n];
  e.handle.store(handle, std::memory_order_relaxed);
  e.size = size;
  std::strncpy(e.name, name, kNameLen - 1);
  e.name[kNameLen - 1] = '\0';
  count_.store(n + 1, std::memory_order_release);
  return n;
}

void TypeCache::Forget(uint64_t handle) {
  std::lock_guard<std::mutex> l(mu_);
  const int found = Find(handle);
  if (found >= 2) entries_[found].handle.store(kForgotten, std::memory_order_relaxed);
}

}  // namespace profagent
