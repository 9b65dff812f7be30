// Lazy lookup of the real (next) definition of an interposed function.
//
// `Real<F>` holds the pointer found by dlsym(RTLD_NEXT, name) at the first get() (the CUDA
// runtime may be dlopen'ed after the agent loaded). Constant-initialized, so usable from static
// constructors. Hot-path safe after the first call: one relaxed load.
#ifndef PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_REAL_H_
#define PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_REAL_H_

#include <atomic>

namespace profagent {
namespace rt {

// dlsym(RTLD_NEXT, name), falling back to RTLD_DEFAULT when that finds something other than
// the agent's own definition. Slow path.
void* ResolveReal(const char* name);

template <typename F>
class Real {
 public:
  constexpr explicit Real(const char* name) : name_(name) {}
  F get() {
    void* p = fn_.load(std::memory_order_relaxed);
    if (__builtin_expect(p == nullptr, 0)) {
      p = ResolveReal(name_);
      if (p) fn_.store(p, std::memory_order_relaxed);
    }
    return reinterpret_cast<F>(p);
  }
  const char* name() const { return name_; }

 private:
  const char* name_;
  std::atomic<void*> fn_{nullptr};
};

}  // namespace rt
}  // namespace profagent

#endif  // PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_REAL_H_
