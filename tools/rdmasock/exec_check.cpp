#include "exec_check.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

namespace rdmasock::cli {

namespace {

bool executable_file(const std::string& p) {
    struct stat st{};
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(p.c_str(), X_OK) == 0;
}

bool read_at(int fd, void* buf, size_t len, uint64_t off) {
    return pread(fd, buf, len, static_cast<off_t>(off)) == static_cast<ssize_t>(len);
}

struct ElfInfo {
    bool ok = false;  // headers readable
    bool has_interp = false;
    bool go = false;
};

// One body for both classes: Ehdr/Phdr/Shdr are ElfN_* of the file's class.
template <class Ehdr, class Phdr, class Shdr>
ElfInfo inspect(int fd) {
    ElfInfo info;
    Ehdr eh{};
    if (!read_at(fd, &eh, sizeof eh, 0) || eh.e_phentsize != sizeof(Phdr)) return info;
    for (unsigned i = 0; i < eh.e_phnum; ++i) {
        Phdr ph{};
        if (!read_at(fd, &ph, sizeof ph, eh.e_phoff + uint64_t{i} * sizeof ph)) return info;
        if (ph.p_type == PT_INTERP) info.has_interp = true;
    }
    info.ok = true;
    // Section names; a stripped file may have none, then only the interpreter decides.
    if (eh.e_shentsize != sizeof(Shdr) || eh.e_shnum == 0 || eh.e_shstrndx >= eh.e_shnum) return info;
    Shdr strtab{};
    if (!read_at(fd, &strtab, sizeof strtab, eh.e_shoff + uint64_t{eh.e_shstrndx} * sizeof(Shdr))) return info;
    if (strtab.sh_size == 0 || strtab.sh_size > (16u << 20)) return info;
    std::vector<char> names(strtab.sh_size + 1, '\0');
    if (!read_at(fd, names.data(), strtab.sh_size, strtab.sh_offset)) return info;
    for (unsigned i = 0; i < eh.e_shnum; ++i) {
        Shdr sh{};
        if (!read_at(fd, &sh, sizeof sh, eh.e_shoff + uint64_t{i} * sizeof sh)) break;
        if (sh.sh_name >= strtab.sh_size) continue;
        const char* n = names.data() + sh.sh_name;
        if (!std::strcmp(n, ".note.go.buildid") || !std::strcmp(n, ".go.buildinfo")) info.go = true;
    }
    return info;
}

}  // namespace

std::string resolve_command(const std::string& cmd) {
    if (cmd.empty()) return {};
    if (cmd.find('/') != std::string::npos) return executable_file(cmd) ? cmd : std::string();
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
    size_t start = 0;
    while (start <= dirs.size()) {
        size_t end = dirs.find(':', start);
        if (end == std::string::npos) end = dirs.size();
        std::string dir = dirs.substr(start, end - start);
        std::string full = (dir.empty() ? "." : dir) + "/" + cmd;  // empty entry = current directory
        if (executable_file(full)) return full;
        start = end + 1;
    }
    return {};
}

std::string preload_blocker(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};  // exec will report it
    unsigned char ident[EI_NIDENT] = {};
    ssize_t n = pread(fd, ident, sizeof ident, 0);
    ElfInfo info;
    bool elf = n == EI_NIDENT && !std::memcmp(ident, ELFMAG, SELFMAG);
    if (elf && ident[EI_DATA] == ELFDATA2LSB && ident[EI_CLASS] == ELFCLASS64)
        info = inspect<Elf64_Ehdr, Elf64_Phdr, Elf64_Shdr>(fd);
    else if (elf && ident[EI_DATA] == ELFDATA2LSB && ident[EI_CLASS] == ELFCLASS32)
        info = inspect<Elf32_Ehdr, Elf32_Phdr, Elf32_Shdr>(fd);
    close(fd);
    if (!elf || !info.ok) return {};  // a #! script or something exec judges
    if (info.go)
        return path + " is a Go program: the Go runtime makes system calls directly, so an LD_PRELOAD "
                      "library never sees its sockets";
    if (!info.has_interp)
        return path + " is statically linked (no ELF interpreter): the dynamic loader never runs, so "
                      "LD_PRELOAD is ignored";
    return {};
}

}  // namespace rdmasock::cli
