// Names for host stack frames the agent could only place as module + offset: dladdr, which the
// agent symbolizes with, sees exported dynamic symbols only, so an application's own functions
// (an executable not linked with -rdynamic) come without names. The report looks them up in the
// module's ELF symbol table (.symtab, else .dynsym), read from the file as it is when the report
// runs (a module rebuilt since the profile gives wrong names; one that is gone, none).
#ifndef PROFAGENT_ANALYZER_REPORT_ELF_SYMBOLS_H_
#define PROFAGENT_ANALYZER_REPORT_ELF_SYMBOLS_H_

#include <cstdint>
#include <string>

namespace profagent {
namespace analyzer {

// The demangled name of the function containing `offset` (the frame's address minus the
// module's load address, as the agent records it) in the ELF file at `module`, or "" when the
// file is not a readable 64-bit ELF or no function covers it. Thread-safe; each module is read
// once per process.
std::string ElfFunctionAt(const std::string& module, uint64_t offset);

}  // namespace analyzer
}  // namespace profagent

#endif  // PROFAGENT_ANALYZER_REPORT_ELF_SYMBOLS_H_
