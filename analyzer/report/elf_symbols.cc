#include "analyzer/report/elf_symbols.h"

#include <cxxabi.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace profagent {
namespace analyzer {
namespace {

// Symbol tables beyond this are not read (a debug build of a huge library).
constexpr uint64_t kMaxTableBytes = 256ull << 20;

struct Function {
  uint64_t addr, size;
  uint32_t name;  // offset in `names`
};

struct ModuleSymbols {
  uint64_t base = 0;                // virtual address of the load segment at file offset 0
  std::vector<Function> functions;  // by address
  std::string names;
};

bool ReadAt(int fd, uint64_t off, void* out, uint64_t n, uint64_t file_size) {
  if (off > file_size || n > file_size - off) return false;
  char* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t got = pread(fd, p, n, off_t(off));
    if (got <= 0) return false;
    p += got;
    off += uint64_t(got);
    n -= uint64_t(got);
  }
  return true;
}

// Reads the functions of the symbol table section `symtab` (its names in section sh_link).
void ReadTable(int fd, uint64_t file_size, const std::vector<Elf64_Shdr>& sections,
               const Elf64_Shdr& symtab, ModuleSymbols* m) {
  if (symtab.sh_link >= sections.size() || symtab.sh_entsize != sizeof(Elf64_Sym)) return;
  const Elf64_Shdr& strtab = sections[symtab.sh_link];
  if (symtab.sh_size > kMaxTableBytes || strtab.sh_size > kMaxTableBytes) return;
  std::vector<Elf64_Sym> syms(symtab.sh_size / sizeof(Elf64_Sym));
  std::string strings(strtab.sh_size, '\0');
  if (!ReadAt(fd, symtab.sh_offset, syms.data(), syms.size() * sizeof(Elf64_Sym), file_size) ||
      !ReadAt(fd, strtab.sh_offset, strings.data(), strings.size(), file_size)) {
    return;
  }
  for (const Elf64_Sym& s : syms) {
    if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || s.st_shndx == SHN_UNDEF || s.st_value == 0 ||
        s.st_name >= strings.size()) {
      continue;
    }
    const char* raw = strings.data() + s.st_name;
    const size_t len = strnlen(raw, strings.size() - s.st_name);
    if (len == 0) continue;
    m->functions.push_back({s.st_value, s.st_size, uint32_t(m->names.size())});
    m->names.append(raw, len);
    m->names.push_back('\0');
    if (m->names.size() > kMaxTableBytes) break;
  }
}

std::unique_ptr<ModuleSymbols> Load(const std::string& path) {
  auto m = std::make_unique<ModuleSymbols>();
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return m;
  struct stat st;
  Elf64_Ehdr eh;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      !ReadAt(fd, 0, &eh, sizeof(eh), uint64_t(st.st_size)) ||
      memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_shentsize != sizeof(Elf64_Shdr) ||
      eh.e_phentsize != sizeof(Elf64_Phdr)) {
    close(fd);
    return m;
  }
  const uint64_t size = uint64_t(st.st_size);
  // The address the agent's offsets count from: the segment mapped from file offset 0 (where
  // dladdr's dli_fbase points).
  std::vector<Elf64_Phdr> phdrs(eh.e_phnum);
  if (ReadAt(fd, eh.e_phoff, phdrs.data(), phdrs.size() * sizeof(Elf64_Phdr), size)) {
    for (const Elf64_Phdr& p : phdrs) {
      if (p.p_type == PT_LOAD && p.p_offset == 0) {
        m->base = p.p_vaddr;
        break;
      }
    }
  }
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  if (ReadAt(fd, eh.e_shoff, sections.data(), sections.size() * sizeof(Elf64_Shdr), size)) {
    for (uint32_t type : {uint32_t(SHT_SYMTAB), uint32_t(SHT_DYNSYM)}) {
      for (const Elf64_Shdr& s : sections) {
        if (s.sh_type == type) ReadTable(fd, size, sections, s, m.get());
      }
      if (!m->functions.empty()) break;  // .dynsym only when there is no .symtab
    }
  }
  close(fd);
  std::sort(m->functions.begin(), m->functions.end(),
            [](const Function& a, const Function& b) { return a.addr < b.addr; });
  return m;
}

}  // namespace

std::string ElfFunctionAt(const std::string& module, uint64_t offset) {
  static std::mutex mu;
  static auto* cache = new std::map<std::string, std::unique_ptr<ModuleSymbols>>();
  const ModuleSymbols* m = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache->find(module);
    if (it == cache->end()) it = cache->emplace(module, Load(module)).first;
    m = it->second.get();
  }
  const uint64_t addr = m->base + offset;
  auto it = std::upper_bound(m->functions.begin(), m->functions.end(), addr,
                             [](uint64_t a, const Function& f) { return a < f.addr; });
  if (it == m->functions.begin()) return "";
  --it;
  // Inside the function: its size when known, else up to the next function (a last function
  // of unknown size has no end to go by: no name).
  const bool inside = it->size != 0 ? addr < it->addr + it->size
                                    : (it + 1 != m->functions.end() && addr < (it + 1)->addr);
  if (!inside) return "";
  const char* raw = m->names.data() + it->name;
  int status = 0;
  char* demangled = abi::__cxa_demangle(raw, nullptr, nullptr, &status);
  std::string name = status == 0 && demangled != nullptr ? demangled : raw;
  free(demangled);
  return name;
}

}  // namespace analyzer
}  // namespace profagent
