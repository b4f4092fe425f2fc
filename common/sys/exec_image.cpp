#include "sys/exec_image.hpp"

#include <elf.h>
#include <fcntl.h>

#include <cstring>

#include "sys/raw_syscall.hpp"

namespace rdmasock::exec_image {
namespace {

// The kernel follows at most a few interpreters (#!) before it gives up (ELOOP).
constexpr int kMaxScriptDepth = 4;

#if defined(__x86_64__)
constexpr unsigned kMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr unsigned kMachine = EM_AARCH64;
#elif defined(__i386__)
constexpr unsigned kMachine = EM_386;
#elif defined(__riscv)
constexpr unsigned kMachine = EM_RISCV;
#elif defined(__powerpc64__)
constexpr unsigned kMachine = EM_PPC64;
#elif defined(__s390x__)
constexpr unsigned kMachine = EM_S390;
#else
constexpr unsigned kMachine = EM_NONE;  // not checked
#endif

#if __SIZEOF_POINTER__ == 8
using Ehdr = Elf64_Ehdr;
using Phdr = Elf64_Phdr;
using Shdr = Elf64_Shdr;
constexpr unsigned char kClass = ELFCLASS64;
#else
using Ehdr = Elf32_Ehdr;
using Phdr = Elf32_Phdr;
using Shdr = Elf32_Shdr;
constexpr unsigned char kClass = ELFCLASS32;
#endif

constexpr unsigned char kData = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB;

bool read_at(int fd, void* buf, size_t len, uint64_t off) {
    return raw_syscall(SYS_pread64, fd, buf, len, static_cast<long>(off)) == static_cast<long>(len);
}

bool has_interpreter(int fd, const Ehdr& e) {
    if (e.e_phentsize != sizeof(Phdr) || e.e_phnum == 0 || e.e_phnum > 512) return false;
    for (unsigned i = 0; i < e.e_phnum; ++i) {
        Phdr p;
        if (!read_at(fd, &p, sizeof p, e.e_phoff + uint64_t(i) * sizeof p)) return false;
        if (p.p_type == PT_INTERP) return true;
    }
    return false;
}

// Go's toolchain marks its programs with these sections (a stripped program
// may have no section table: then it is taken as not Go).
bool built_by_go(int fd, const Ehdr& e) {
    if (e.e_shentsize != sizeof(Shdr) || e.e_shnum == 0 || e.e_shnum > 1024 || e.e_shstrndx >= e.e_shnum) return false;
    Shdr names;
    if (!read_at(fd, &names, sizeof names, e.e_shoff + uint64_t(e.e_shstrndx) * sizeof names)) return false;
    for (unsigned i = 0; i < e.e_shnum; ++i) {
        Shdr s;
        if (!read_at(fd, &s, sizeof s, e.e_shoff + uint64_t(i) * sizeof s) || s.sh_name >= names.sh_size) continue;
        char name[24] = {};
        const uint64_t room = names.sh_size - s.sh_name;
        const size_t len = room < sizeof name - 1 ? static_cast<size_t>(room) : sizeof name - 1;
        if (raw_syscall(SYS_pread64, fd, name, len, static_cast<long>(names.sh_offset + s.sh_name)) <= 0) continue;
        if (std::strcmp(name, ".go.buildinfo") == 0 || std::strcmp(name, ".note.go.buildid") == 0 ||
            std::strcmp(name, ".gopclntab") == 0)
            return true;
    }
    return false;
}

Image inspect_at(int fd, int depth) {
    char head[256] = {};
    const long n = raw_syscall(SYS_pread64, fd, head, sizeof head - 1, 0L);
    if (n < 4) return Image::unknown;
    if (head[0] == '#' && head[1] == '!') {
        if (depth >= kMaxScriptDepth) return Image::unknown;
        char* p = head + 2;
        while (*p == ' ' || *p == '\t') ++p;
        char* end = p;
        while (*end && *end != ' ' && *end != '\t' && *end != '\n') ++end;
        if (end == p || *end == '\0') return Image::unknown;  // no interpreter, or a line longer than the kernel reads
        *end = '\0';
        const int interp = static_cast<int>(raw_syscall(SYS_openat, AT_FDCWD, p, O_RDONLY | O_CLOEXEC));
        if (interp < 0) return Image::unknown;
        const Image i = inspect_at(interp, depth + 1);
        raw_syscall(SYS_close, interp);
        return i;
    }
    if (std::memcmp(head, ELFMAG, SELFMAG) != 0) return Image::unknown;
    if (static_cast<size_t>(n) < sizeof(Ehdr) || head[EI_CLASS] != kClass || head[EI_DATA] != kData) return Image::foreign;
    Ehdr e;
    std::memcpy(&e, head, sizeof e);
    if (kMachine != EM_NONE && e.e_machine != kMachine) return Image::foreign;
    if (built_by_go(fd, e)) return Image::go;
    return has_interpreter(fd, e) ? Image::dynamic : Image::static_linked;
}

}  // namespace

Image inspect(int fd) { return fd >= 0 ? inspect_at(fd, 0) : Image::unknown; }

bool preload_reaches(int fd) {
    const int saved = errno;
    const bool ok = inspect(fd) == Image::dynamic;
    errno = saved;
    return ok;
}

}  // namespace rdmasock::exec_image
