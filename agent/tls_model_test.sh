#!/bin/bash
# Every thread-local variable of the agent is initial-exec (one fs-relative load on the hot path).
# A local-dynamic one (e.g. a thread_local with a constructor or destructor, whose guard variable
# ignores the tls_model attribute) shows as an R_X86_64_DTPMOD64 relocation without a symbol:
# it costs a __tls_get_addr call, and mixing it with initial-exec TLS was seen to make Bazel's
# gold linker resolve the core's ring pointer to the wrong slot (nvtx_hooks.h).
# Dynamic TLS of other libraries (libstdc++'s std::call_once state) is named and allowed.
set -u
status=0
for lib in "$@"; do
  relocs=$(readelf -rW "$lib") || { echo "FAIL: readelf cannot read $lib"; exit 1; }
  own=$(printf '%s\n' "$relocs" | awk '$3 == "R_X86_64_DTPMOD64" && NF <= 4')
  if [[ -n "$own" ]]; then
    echo "FAIL: $lib has local-dynamic TLS of its own:"
    printf '%s\n' "$own"
    status=1
  fi
  if ! readelf -lW "$lib" | grep -q ' TLS '; then
    echo "FAIL: $lib has no TLS segment (is this the agent?)"
    status=1
  fi
done
[[ $status == 0 ]] && echo "PASS: $# libraries, agent TLS all initial-exec"
exit $status
