// sys/exec_image.hpp: whether a preload reaches the program an exec runs (the
// exec's hand-over claims kept bytes only for one it reaches). Crafted ELF
// headers, scripts that name them, and the system's own /bin/sh.
#include <catch2/catch.hpp>

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sys/exec_image.hpp"

using rdmasock::exec_image::preload_reaches;

namespace {

struct ElfShape {
    bool interp = true;                   // a PT_INTERP program header (a dynamically linked program)
    unsigned char elf_class = ELFCLASS64;
    unsigned machine = EM_X86_64;
    const char* section = ".text";        // one named section besides .shstrtab
};

std::vector<char> elf_bytes(const ElfShape& shape) {
    std::vector<char> b(1024, 0);
    Elf64_Ehdr e{};
    std::memcpy(e.e_ident, ELFMAG, SELFMAG);
    e.e_ident[EI_CLASS] = shape.elf_class;
    e.e_ident[EI_DATA] = ELFDATA2LSB;
    e.e_ident[EI_VERSION] = EV_CURRENT;
    e.e_type = ET_DYN;
    e.e_machine = static_cast<Elf64_Half>(shape.machine);
    e.e_phoff = sizeof e;
    e.e_phentsize = sizeof(Elf64_Phdr);
    e.e_phnum = 1;
    e.e_shoff = 256;
    e.e_shentsize = sizeof(Elf64_Shdr);
    e.e_shnum = 3;
    e.e_shstrndx = 1;
    std::memcpy(b.data(), &e, sizeof e);
    Elf64_Phdr p{};
    p.p_type = shape.interp ? PT_INTERP : PT_LOAD;
    std::memcpy(b.data() + sizeof e, &p, sizeof p);
    const std::string names = std::string("\0.shstrtab\0", 11) + shape.section + '\0';
    std::memcpy(b.data() + 512, names.data(), names.size());
    Elf64_Shdr s[3]{};
    s[1].sh_name = 1;
    s[1].sh_type = SHT_STRTAB;
    s[1].sh_offset = 512;
    s[1].sh_size = names.size();
    s[2].sh_name = 11;
    s[2].sh_type = SHT_PROGBITS;
    std::memcpy(b.data() + 256, s, sizeof s);
    return b;
}

struct TempFile {
    std::string path;
    explicit TempFile(const std::vector<char>& bytes) {
        char name[] = "/tmp/exec-image-XXXXXX";
        const int fd = mkstemp(name);
        REQUIRE(fd >= 0);
        REQUIRE(write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
        close(fd);
        path = name;
    }
    explicit TempFile(const std::string& text) : TempFile(std::vector<char>(text.begin(), text.end())) {}
    ~TempFile() { unlink(path.c_str()); }
};

bool reaches(const std::string& path) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    const bool r = preload_reaches(fd);
    close(fd);
    return r;
}

}  // namespace

#if defined(__x86_64__)
TEST_CASE("exec image: a dynamically linked program of our kind is reached; a static one is not", "[exec_image]") {
    CHECK(reaches(TempFile(elf_bytes({})).path));
    CHECK_FALSE(reaches(TempFile(elf_bytes({.interp = false})).path));
}

TEST_CASE("exec image: another class or machine, or a Go program, is not reached", "[exec_image]") {
    CHECK_FALSE(reaches(TempFile(elf_bytes({.elf_class = ELFCLASS32})).path));
    CHECK_FALSE(reaches(TempFile(elf_bytes({.machine = EM_AARCH64})).path));
    CHECK_FALSE(reaches(TempFile(elf_bytes({.section = ".note.go.buildid"})).path));
    CHECK_FALSE(reaches(TempFile(elf_bytes({.section = ".go.buildinfo"})).path));
}

TEST_CASE("exec image: inspect names what it found (rdmasock run's refusal says it)", "[exec_image]") {
    using rdmasock::exec_image::Image;
    auto inspect = [](const std::string& path) {
        const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
        REQUIRE(fd >= 0);
        const Image i = rdmasock::exec_image::inspect(fd);
        close(fd);
        return i;
    };
    CHECK(inspect(TempFile(elf_bytes({})).path) == Image::dynamic);
    CHECK(inspect(TempFile(elf_bytes({.interp = false})).path) == Image::static_linked);
    // A Go program statically linked is named for Go (its runtime is why, whatever the linking).
    CHECK(inspect(TempFile(elf_bytes({.interp = false, .section = ".go.buildinfo"})).path) == Image::go);
    CHECK(inspect(TempFile(elf_bytes({.elf_class = ELFCLASS32})).path) == Image::foreign);
    CHECK(inspect(TempFile(elf_bytes({.machine = EM_AARCH64})).path) == Image::foreign);
    CHECK(inspect(TempFile(std::string("#!/bin/sh-that-is-not-there\n")).path) == Image::unknown);
}

TEST_CASE("exec image: a script is what its interpreter is", "[exec_image]") {
    TempFile dynamic(elf_bytes({}));
    TempFile fixed(elf_bytes({.interp = false}));
    CHECK(reaches(TempFile("#!" + dynamic.path + "\necho\n").path));
    CHECK(reaches(TempFile("#! " + dynamic.path + " -x\necho\n").path));
    CHECK_FALSE(reaches(TempFile("#!" + fixed.path + "\necho\n").path));
    CHECK_FALSE(reaches(TempFile(std::string("#!/nonexistent/interpreter\n")).path));
    CHECK_FALSE(reaches(TempFile(std::string("#!\n")).path));
    // Scripts naming scripts: followed a few levels, as the kernel does, not forever.
    TempFile one("#!" + dynamic.path + "\n");
    TempFile two("#!" + one.path + "\n");
    TempFile three("#!" + two.path + "\n");
    TempFile four("#!" + three.path + "\n");
    TempFile five("#!" + four.path + "\n");
    CHECK(reaches(four.path));
    CHECK_FALSE(reaches(five.path));
}
#endif

TEST_CASE("exec image: this system's shell is reached; text, an empty file and a bad fd are not", "[exec_image]") {
    if (access("/bin/sh", R_OK) == 0) CHECK(reaches("/bin/sh"));
    CHECK_FALSE(reaches(TempFile(std::string("plain text, not a program\n")).path));
    CHECK_FALSE(reaches(TempFile(std::string()).path));
    CHECK_FALSE(preload_reaches(-1));
    const int saved = errno = EINTR;
    preload_reaches(-1);
    CHECK(errno == saved);  // errno is the caller's (an exec interposer)
}
