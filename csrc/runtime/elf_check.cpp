// Structural check of a shared object before dlopen. glibc maps a truncated
// .so and then faults (SIGBUS) reading its dynamic section, so a corrupt
// cache entry must be refused here, never handed to dlopen.
#include <elf.h>

#include <cstdio>
#include <memory>
#include <string>
#include <sys/stat.h>

#include "internal.h"

namespace halojit {

namespace {

#if defined(__x86_64__)
constexpr int kMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr int kMachine = EM_AARCH64;
#else
constexpr int kMachine = -1;  // not checked
#endif

}  // namespace

void check_shared_object(const std::string &path) {
    auto bad = [&](const std::string &why) {
        throw Error(ErrorKind::Runtime, "'" + path + "' is not a loadable shared object: " + why);
    };
    struct stat st;
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) bad("no such file");
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    std::unique_ptr<FILE, int (*)(FILE *)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
    if (!f) bad("cannot open it");
    Elf64_Ehdr eh;
    if (std::fread(&eh, sizeof(eh), 1, f.get()) != 1) bad("truncated ELF header");
    if (eh.e_ident[EI_MAG0] != ELFMAG0 || eh.e_ident[EI_MAG1] != ELFMAG1 || eh.e_ident[EI_MAG2] != ELFMAG2 ||
        eh.e_ident[EI_MAG3] != ELFMAG3) {
        bad("no ELF magic");
    }
    if (eh.e_ident[EI_CLASS] != ELFCLASS64) bad("not a 64-bit ELF file");
    if (eh.e_type != ET_DYN) bad("not a shared object (ELF type " + std::to_string(eh.e_type) + ")");
    if (kMachine >= 0 && eh.e_machine != kMachine) bad("built for another machine (" + std::to_string(eh.e_machine) + ")");
    if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0) bad("no program headers");
    if (eh.e_phoff + uint64_t(eh.e_phnum) * eh.e_phentsize > size) bad("truncated (program headers)");
    if (eh.e_shnum && eh.e_shoff + uint64_t(eh.e_shnum) * eh.e_shentsize > size) bad("truncated (section headers)");
    if (std::fseek(f.get(), static_cast<long>(eh.e_phoff), SEEK_SET) != 0) bad("unreadable program headers");
    for (int i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        if (std::fread(&ph, sizeof(ph), 1, f.get()) != 1) bad("unreadable program headers");
        if (ph.p_type != PT_NULL && ph.p_offset + ph.p_filesz > size) {
            bad("truncated (segment " + std::to_string(i) + " ends past the end of the file)");
        }
    }
}

}  // namespace halojit
